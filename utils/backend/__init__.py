"""The one package that imports a deep-learning framework, laid out as keras' backend is: the backend is chosen once,
here, and each per-backend module implements the same function set (utils/backend/api.py lists it):

    torch_backend.py    PyTorch (with torch_ciou.py and torch_ciou_triton.py, its fused CIoU; torch_head_reads.py,
                        torch_head_layout.py, torch_conv_grad.py, torch_bn_silu.py)
    oneflow_backend.py  OneFlow 0.9.0 (with oneflow_ciou.py, its fused-kernel CIoU chain)
    shared.py           helpers whose code is the same on both (devices, RNG, attention fallback)
    common.py           helpers that need no framework at all

Every other module does ``from utils.backend import torch, nn, F`` and calls the names re-exported below; nothing
outside this package branches on the backend. Selection: ``YOLO_BACKEND=oneflow|torch``; unset means the backend
follows the device: OneFlow when a CUDA GPU is seen, PyTorch otherwise (OneFlow 0.9.0's CPU kernels run on one
thread, 5-10x slower than PyTorch's), each falling back to the other when it is not installed. A one-line notice on
stderr says which one is in use and why (``YOLO_QUIET=1`` silences it).
"""
from utils.backend.api import FUNCTION_SET
from utils.backend.host_memory import keep_freed_memory
from utils.backend.selection import announce_backend_once, select_backend
from utils.backend_choice import gpu_seen_here

BACKEND, impl, SELECTION_REASON = select_backend()  # impl: the chosen per-backend module (tests patch its internals)
if not gpu_seen_here()[0]:  # CPU tensors are the activations: keep their pages between steps (host_memory.py)
    keep_freed_memory()
IS_ONEFLOW = BACKEND == "oneflow"  # for tests and tools; project code asks the function set instead
IS_TORCH = BACKEND == "torch"

# The function set (api.py), one line per name so that a reader, an editor or a linter can follow each one
# (tests/test_backend/test_backend_api.py holds these lines against api.py).
torch = impl.torch
BatchNorm2d = impl.BatchNorm2d
from_numpy = impl.from_numpy
to_device = impl.to_device
wait_for_work = impl.wait_for_work
require_pytorch = impl.require_pytorch
set_deterministic = impl.set_deterministic
tensorboard_graph = impl.tensorboard_graph
nms_kernel = impl.nms_kernel
has_amp = impl.has_amp
no_amp_reason = impl.no_amp_reason
cpu_has_native_bf16 = impl.cpu_has_native_bf16
amp_dtype = impl.amp_dtype
channels_last_pays = impl.channels_last_pays
autocast = impl.autocast
grad_scaler = impl.grad_scaler
fused_ciou = impl.fused_ciou
compiled_ciou = impl.compiled_ciou
conv2d = impl.conv2d
bn_silu = impl.bn_silu
head_layout = impl.head_layout
head_reads = impl.head_reads
ema_impl = impl.ema_impl
ema_update_ = impl.ema_update_
optimizer_kwargs = impl.optimizer_kwargs
RMSprop = impl.RMSprop
optimizer_class = impl.optimizer_class
optimizer_impl = impl.optimizer_impl
optimizer_variants = impl.optimizer_variants
clip_grad_norm_ = impl.clip_grad_norm_
all_finite = impl.all_finite
optimizer_state_to_native = impl.optimizer_state_to_native
dist_init = impl.dist_init
dist_ready = impl.dist_ready
dist_barrier = impl.dist_barrier
dist_broadcast_ = impl.dist_broadcast_
ddp_wrap = impl.ddp_wrap
ddp_gpu_follows_local_rank = impl.ddp_gpu_follows_local_rank

nn = torch.nn
F = torch.nn.functional
VERSION = torch.__version__

from utils.backend.shared import (  # noqa: E402  (written against torch/nn/F above)
    is_cuda, to_numpy, cuda_available, cuda_device_count, device, select_device, set_cuda_device, synchronize,
    memory_reserved_gb, can_report_cuda_memory, cuda_memory, empty_cuda_cache, cudnn_benchmark_enabled, manual_seed,
    get_rng_state, set_rng_state, no_grad, inference_mode, to_channels_last, convert_sync_batchnorm,
    MultiheadAttentionFallback, MultiheadAttention)
from utils.backend import shared  # noqa: E402  (its __all__ lists the names just imported)

__all__ = ["torch", "nn", "F", "BACKEND", "IS_ONEFLOW", "IS_TORCH", "VERSION", "SELECTION_REASON", "impl",
           *FUNCTION_SET, *shared.__all__]

announce_backend_once(BACKEND, VERSION, SELECTION_REASON)  # once per process tree, unless YOLO_QUIET=1
