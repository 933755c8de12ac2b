"""The one module that imports a deep-learning framework.

Every other module does ``from utils.backend import torch, nn, F`` and calls the small adapters below for the
few things that differ between OneFlow 0.9.0 and PyTorch. Selection: ``YOLO_BACKEND=oneflow|torch``; unset means
the backend follows the device: OneFlow when a CUDA GPU is seen, PyTorch otherwise (OneFlow 0.9.0's CPU kernels
run on one thread, 5-10x slower than PyTorch's), each falling back to the other when it is not installed. A
one-line notice on stderr says which one is in use and why (``YOLO_QUIET=1`` silences it). Without a GPU, PyTorch
is imported with ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it (see _import_torch).
"""
import contextlib
import ctypes
import glob
import os
import signal
import sys
import threading
import importlib.util

from utils.backend_choice import BACKEND_NAMES, BackendError, choose_backend, gpu_seen

__all__ = ["torch", "nn", "F", "BACKEND", "IS_ONEFLOW", "IS_TORCH", "VERSION"]


def _site_packages_dirs():
    import site
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.append(user)
    dirs += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(dirs))


def _preload_oneflow_cuda_libs():
    """OneFlow 0.9.0 links against cuDNN 8 / cuBLAS 11 but does not find the pip-installed copies by itself.
    Loading them with RTLD_GLOBAL before ``import oneflow`` means users need no LD_LIBRARY_PATH."""
    missing = []
    for pkg, pattern in (("cublas", "libcublasLt.so.11*"), ("cublas", "libcublas.so.11*"), ("cudnn", "libcudnn.so.8*")):
        found = []
        for sp in _site_packages_dirs():
            found += glob.glob(os.path.join(sp, "nvidia", pkg, "lib", pattern))
        if not found:
            missing.append(pattern)
            continue
        try:
            ctypes.CDLL(sorted(found)[0], mode=ctypes.RTLD_GLOBAL)
        except OSError as e:  # a broken wheel: say so, OneFlow's own error would be obscure
            missing.append(f"{pattern} ({e})")
    return missing


def _oneflow_dist_version():
    try:
        from importlib.metadata import version
        return version("oneflow")
    except Exception:
        return None


def _import_oneflow():
    if importlib.util.find_spec("oneflow") is None:
        raise BackendError("OneFlow is not installed. Install it on Python 3.7-3.10 with "
                           "'pip install oneflow==0.9.0 nvidia-cudnn-cu11==8.5.0.96 nvidia-cublas-cu11==11.10.3.66 "
                           "\"numpy<2\"' (or run 'make setup'), or set YOLO_BACKEND=torch.")
    dist_version = _oneflow_dist_version()
    if dist_version and not dist_version.startswith("0.9"):
        raise BackendError(f"oneflow=={dist_version} is installed, but this project needs oneflow==0.9.0. On Python "
                           f"{sys.version_info.major}.{sys.version_info.minor} pip only offers the 0.7.0 placeholder "
                           "package; use Python 3.10 ('make setup' builds .venv-oneflow) or set YOLO_BACKEND=torch.")
    missing = _preload_oneflow_cuda_libs()
    python_sigint = signal.getsignal(signal.SIGINT)
    try:
        import oneflow
    except Exception as e:
        hint = (f" Missing CUDA libraries: {', '.join(missing)}: 'pip install nvidia-cudnn-cu11==8.5.0.96 "
                "nvidia-cublas-cu11==11.10.3.66'." if missing else "")
        raise BackendError(f"'import oneflow' failed: {type(e).__name__}: {e}.{hint}") from e
    # TRAP: `import oneflow` (0.9.0) replaces the process's SIGINT handler with its own C one (in liboneflow), which
    # Python's signal.getsignal does not show: Ctrl-C then never reaches Python and ends the process with exit 255,
    # a segfault or a hang. Putting Python's handler back restores KeyboardInterrupt (and utils/signals.py's).
    if python_sigint is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, python_sigint)
    return oneflow


def _import_torch():
    if "OMP_WAIT_POLICY" not in os.environ and not gpu_seen()[0]:
        # OpenMP threads that spin at barriers waste the cores that loader workers (and anyone else on the machine)
        # need, and stall when those preempt them: yolov5n training steps ran 5.5x faster with passive waiting on a
        # loaded 2-core machine, and the same within 6% on a quiet one (benchmarks/cpu_levers.py). Read by the
        # OpenMP runtime when torch loads it, hence here; a value the user set wins.
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import torch as _torch
    except Exception as e:
        raise BackendError(f"'import torch' failed ({e}). Install it with 'pip install torch==2.13.0' "
                           "(CPU build) or set YOLO_BACKEND=oneflow.") from e
    return _torch


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_IMPORTERS = {"oneflow": lambda: _import_oneflow(), "torch": lambda: _import_torch()}


def _select():
    requested = os.environ.get("YOLO_BACKEND", "")
    gpu, gpu_why = gpu_seen() if not requested.strip() else (None, "")
    order, why = choose_backend(requested, gpu, gpu_why, {k: _installed(k) for k in BACKEND_NAMES})
    errors = []
    for name in order:
        try:
            module = _IMPORTERS[name]()
        except BackendError as e:
            if len(order) == 1:
                raise
            errors.append(f"  {BACKEND_NAMES[name]}: {e}")
            continue
        if errors:  # the preferred one failed to import: say so in the notice
            why = f"{why}; {BACKEND_NAMES[order[0]]} failed to import"
        return name, module, why
    raise BackendError("No backend imports.\n" + "\n".join(errors))


BACKEND, torch, SELECTION_REASON = _select()
IS_ONEFLOW = BACKEND == "oneflow"
IS_TORCH = BACKEND == "torch"
nn = torch.nn
F = torch.nn.functional
VERSION = torch.__version__

if os.environ.get("YOLO_QUIET", "0") != "1" and not os.environ.get("_YOLO_BACKEND_ANNOUNCED"):
    os.environ["_YOLO_BACKEND_ANNOUNCED"] = "1"  # child processes (dataloader workers, DDP ranks) stay quiet
    print(f"YOLOv5 backend: {BACKEND} {VERSION} ({SELECTION_REASON}; set YOLO_BACKEND=oneflow|torch to choose)",
          file=sys.stderr)


# ----------------------------------------------------------------------------------------------------------------
# Capabilities
def cuda_available():
    return bool(torch.cuda.is_available())


def cuda_device_count():
    return torch.cuda.device_count() if cuda_available() else 0


def is_cuda(x):
    """True when a tensor or device lives on a CUDA GPU."""
    dev = x.device if hasattr(x, "device") else x
    return "cuda" in str(dev)


def has_fused_bbox_ops(device):
    """OneFlow's fused_get_* CIoU kernels exist only for CUDA tensors."""
    return IS_ONEFLOW and is_cuda(device) and hasattr(torch._C, "fused_get_ciou_result")


def has_multi_tensor_ema(device):
    """OneFlow's multi_tensor_yolov5_weight_update exists only for CUDA fp32."""
    return IS_ONEFLOW and is_cuda(device) and hasattr(torch._C, "multi_tensor_yolov5_weight_update")


def has_foreach():
    return IS_TORCH and hasattr(torch, "_foreach_mul_")


def multi_tensor_norms(tensors):
    """L2 norm of each tensor with one multi-tensor op (PyTorch's torch._foreach_norm: one launch per chunk of
    tensors on CUDA, the per-tensor norm kernels on the CPU, so the values equal torch.linalg.vector_norm's), or
    None where the framework has no such op (OneFlow 0.9.0)."""
    if has_foreach() and hasattr(torch, "_foreach_norm"):
        return list(torch._foreach_norm(tensors, 2.0))
    return None


def multi_tensor_mul_(tensors, factor):
    """In place: every tensor times ``factor`` (a 0-d tensor), as one multi-tensor op where the framework has one
    (returns True), else False and nothing is done."""
    if has_foreach():
        torch._foreach_mul_(tensors, factor)
        return True
    return False


def has_amp(device):
    """Mixed precision: PyTorch on CUDA only; OneFlow 0.9.0 has no eager GradScaler, so it trains in fp32."""
    return IS_TORCH and is_cuda(device)


def require_pytorch(purpose):
    """The real PyTorch module, for what only PyTorch does (TorchScript, torch.onnx export). Under OneFlow it raises
    a one-line UserError that names the PyTorch environment: checkpoints are the same files under both backends,
    so the user only has to run the same command there."""
    if IS_TORCH:
        return torch
    from utils.errors import NeedsPyTorchError
    raise NeedsPyTorchError(f"{purpose} needs the PyTorch environment, and this runs under OneFlow: run the same "
                            "command with YOLO_BACKEND=torch .venv-torch/bin/python (a checkpoint trained under "
                            "OneFlow is the same file there).")


def no_amp_reason():
    """Why this framework never trains in mixed precision ('' when it can)."""
    return "OneFlow 0.9.0 has no eager GradScaler for AMP" if IS_ONEFLOW else ""


def _cpu_flags():
    """The CPU's feature flags: PyTorch's own probe (cpuinfo) where the build has it, else /proc/cpuinfo."""
    probe = getattr(getattr(torch._C, "_cpu", None), "_get_cpu_capability", None) if IS_TORCH else None
    if probe is not None:
        try:
            return {k for k, v in probe().items() if v is True}
        except Exception:  # an unexpected shape of the answer: fall back to the kernel's list
            pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_native_bf16():
    """True when this CPU computes in bfloat16 natively (AVX512-BF16 or AMX-BF16) and PyTorch's oneDNN will use it.
    Read from the CPU's flags, not guessed from a model name; without them bf16 is emulated and slower than fp32."""
    if not IS_TORCH:
        return False  # OneFlow 0.9.0 has no CPU autocast
    flags = _cpu_flags()
    if not ({"avx512_bf16", "amx_bf16"} & flags):
        return False
    mkldnn_bf16 = getattr(getattr(torch.ops, "mkldnn", None), "_is_mkldnn_bf16_supported", None)
    try:
        return bool(mkldnn_bf16()) if mkldnn_bf16 is not None else True
    except Exception:
        return False


def amp_dtype(device, request=None):
    """The autocast dtype for training on ``device``, or None for fp32. The weights stay fp32 either way.

    request None (the default): the official choice, fp16 with loss scaling on CUDA under PyTorch, fp32 elsewhere.
    request True (--amp): fp16 on CUDA under PyTorch; bf16 on a CPU with native bf16 (no loss scaling: bf16 has
    fp32's exponent range); otherwise fp32, with the reason as the second value. request False (--no-amp): fp32.
    Returns (dtype or None, note or '')."""
    if request is False:
        return None, ""
    if has_amp(device):
        return torch.float16, ""
    if request is None:
        return None, ""
    if IS_ONEFLOW:
        return None, f"--amp: {no_amp_reason()}; training in fp32"
    if is_cuda(device):
        return None, "--amp: no mixed precision for this device; training in fp32"
    if cpu_has_native_bf16():
        return torch.bfloat16, ""
    return None, "--amp: this CPU has no native bfloat16 (AVX512-BF16 or AMX); training in fp32"


# ----------------------------------------------------------------------------------------------------------------
# Devices
def device(spec="cpu"):
    return torch.device(spec)


def select_device(spec="", batch_size=0):
    """'' (first GPU if any, else CPU), 'cpu', '0', '0,1', 'cuda:1' -> a device. Several ids keep the first: each
    DDP rank picks its own with local_rank. Raises ValueError with a message for a GPU that is not there."""
    spec = str(spec).strip().lower().replace("cuda:", "").replace("none", "")
    if spec == "cpu" or (spec == "" and not cuda_available()):
        return torch.device("cpu")
    if spec == "mps":
        raise ValueError("--device mps is not supported by this project; use 'cpu' or a CUDA id.")
    n = cuda_device_count()
    ids = [int(s) for s in spec.split(",") if s.strip() != ""] if spec else [0]
    if n == 0:
        raise ValueError(f"--device {spec} asks for CUDA, but no CUDA GPU is visible to {BACKEND}; use --device cpu.")
    bad = [i for i in ids if i >= n]
    if bad:
        raise ValueError(f"--device {spec}: GPU {bad} not found, {n} visible (ids 0..{n - 1}).")
    if batch_size and len(ids) > 1 and batch_size % len(ids):
        raise ValueError(f"--batch-size {batch_size} is not a multiple of the {len(ids)} GPUs in --device {spec}.")
    return torch.device(f"cuda:{ids[0]}")


def to_device(t, dev):
    """A host tensor onto the device without making the host wait where the framework allows it (PyTorch:
    non_blocking, asynchronous from pinned memory)."""
    return t.to(dev, non_blocking=True) if IS_TORCH else t.to(dev)


def synchronize(dev=None):
    if dev is not None and is_cuda(dev) and cuda_available():
        torch.cuda.synchronize()


def wait_for_work(dev=None):
    """Block until queued work is done, for timers (val/detect speed lines). OneFlow runs eager ops
    asynchronously even on CPU, so without this the time lands in whatever first reads a result."""
    if IS_ONEFLOW and hasattr(torch, "_oneflow_internal"):
        torch._oneflow_internal.eager.Sync()
    synchronize(dev)


def memory_reserved_gb(dev):
    if is_cuda(dev) and cuda_available() and hasattr(torch.cuda, "memory_reserved"):
        return torch.cuda.memory_reserved() / 1e9
    return 0.0


def can_report_cuda_memory(dev):
    """True when dev is a CUDA device whose caching allocator reports its use (PyTorch does; OneFlow 0.9.0 has no
    memory_reserved/memory_allocated)."""
    return is_cuda(dev) and cuda_available() and all(
        hasattr(torch.cuda, n) for n in ("get_device_properties", "memory_reserved", "memory_allocated"))


def cuda_memory(dev):
    """(device name, total, reserved, allocated) in bytes for a device that can_report_cuda_memory."""
    props = torch.cuda.get_device_properties(dev)
    return props.name, props.total_memory, torch.cuda.memory_reserved(dev), torch.cuda.memory_allocated(dev)


def empty_cuda_cache():
    if cuda_available() and hasattr(torch.cuda, "empty_cache"):
        torch.cuda.empty_cache()


def cudnn_benchmark_enabled():
    """cuDNN autotuning picks kernels (and workspaces) per shape, which would skew a memory profile."""
    return bool(getattr(getattr(torch.backends, "cudnn", None), "benchmark", False))


# ----------------------------------------------------------------------------------------------------------------
# Tensors <-> numpy, RNG
def to_numpy(t):
    return t.detach().cpu().numpy()


def from_numpy(a):
    import numpy as np
    a = np.asarray(a)  # not np.ascontiguousarray alone: it turns a 0-d array into shape (1,)
    return torch.from_numpy(a if a.flags.c_contiguous else np.ascontiguousarray(a))


def manual_seed(seed):
    torch.manual_seed(seed)
    if cuda_available():
        torch.cuda.manual_seed_all(seed)


def get_rng_state():
    """The framework's CPU RNG state as a numpy uint8 array (saved in checkpoints for exact resume)."""
    return to_numpy(torch.get_rng_state())


def set_rng_state(state):
    import numpy as np
    torch.set_rng_state(from_numpy(np.asarray(state, dtype=np.uint8)))


# ----------------------------------------------------------------------------------------------------------------
# Layers whose framework kernel needs a fix
class _PreciseBatchNorm2d(nn.BatchNorm2d):
    """OneFlow 0.9's CPU BatchNorm kernel accumulates its training-mode statistics naively in float32 (one pass,
    E[x^2] - E[x]^2, error growing with batch*height*width): yolov5n's raw train-mode outputs then differ from
    PyTorch's by ~1e-2. On OneFlow CPU in training mode the output is computed from statistics taken with the
    framework's accurate mean/var reductions (through the inference kernel), while the gradient still comes from
    the fast training kernel (its ~1e-4 relative error in the statistics only perturbs the gradient, which is
    harmless; a hand-written backward was ~15x slower on CPU). Running statistics use the accurate values.
    CUDA and eval mode use the kernel alone."""

    def forward(self, x):
        if not (self.training and self.affine and x.dim() == 4 and not is_cuda(x)):
            return super().forward(x)
        with torch.no_grad():
            mean = x.mean((0, 2, 3))
            var = x.var((0, 2, 3), unbiased=False)
            if self.track_running_stats and self.running_mean is not None:
                self.num_batches_tracked += 1
                m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                n = x.numel() // x.shape[1]
                self.running_mean.mul_(1 - m).add_(mean * m)
                self.running_var.mul_(1 - m).add_(var * (m * n / max(n - 1, 1)))  # unbiased, like the kernel
            exact = F.batch_norm(x, mean, var, self.weight, self.bias, training=False, momentum=0.0, eps=self.eps)
        y = F.batch_norm(x, None, None, self.weight, self.bias, training=True, momentum=0.0, eps=self.eps)
        with torch.no_grad():
            correction = exact - y
        return y + correction  # value: the accurate output; gradient: the kernel's


BatchNorm2d = _PreciseBatchNorm2d if IS_ONEFLOW else nn.BatchNorm2d  # models build their BN layers from this


class MultiheadAttentionFallback(nn.Module):
    """nn.MultiheadAttention for a framework that has none (OneFlow 0.9.0): sequence-first inputs (L, N, E), no
    masks, no dropout. Parameters carry PyTorch's names and shapes (in_proj_weight (3E, E), in_proj_bias,
    out_proj.weight/bias) and initial values, so official state dicts load into it. out_proj is applied through
    F.linear, as PyTorch does, so a forward hook on it never fires (FLOP counters rely on that)."""

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim = self.vdim = embed_dim
        self.batch_first, self.add_zero_attn, self.bias_k, self.bias_v = False, False, None, None
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, need_weights=True):
        tgt, n, e = query.shape
        src = key.shape[0]
        h, d = self.num_heads, self.head_dim
        w = self.in_proj_weight.chunk(3)
        b = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        q = F.linear(query, w[0], b[0]).reshape(tgt, n * h, d).transpose(0, 1)  # (batch*heads, L, head_dim)
        k = F.linear(key, w[1], b[1]).reshape(src, n * h, d).transpose(0, 1)
        v = F.linear(value, w[2], b[2]).reshape(src, n * h, d).transpose(0, 1)
        attn = torch.softmax(torch.bmm(q * d ** -0.5, k.transpose(1, 2)), dim=-1)  # (batch*heads, L, S)
        out = torch.bmm(attn, v).transpose(0, 1).reshape(tgt, n, e)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        return out, (attn.reshape(n, h, tgt, src).mean(1) if need_weights else None)


# The framework's own attention where it exists (official pickles name torch.nn.MultiheadAttention), else ours.
MultiheadAttention = getattr(nn, "MultiheadAttention", None) or MultiheadAttentionFallback


# ----------------------------------------------------------------------------------------------------------------
# Autograd modes and mixed precision
def no_grad():
    return torch.no_grad()


def inference_mode():
    """no_grad on both: tensors made under torch.inference_mode cannot enter autograd later (EMA validation)."""
    return torch.no_grad()


def channels_last_pays(device, dtype):
    """Whether training inputs should be channels_last (NHWC): measured on CPUs with bf16 autocast, where oneDNN's
    bf16 convolutions run faster in that layout (benchmarks/cpu_levers.py: yolov5n 320 step 1.53x -> 1.77x over
    fp32). Only the input changes: the layout spreads through the convolutions, the weights stay NCHW."""
    return IS_TORCH and not is_cuda(device) and dtype is not None and dtype == torch.bfloat16


def to_channels_last(x):
    """A 4-D batch in channels_last memory format (same values); unchanged where the framework has none."""
    fmt = getattr(torch, "channels_last", None)
    return x.contiguous(memory_format=fmt) if fmt is not None and x.dim() == 4 else x


def autocast(dev, enabled=True, dtype=None):
    """Mixed-precision region: fp16 (or ``dtype``) on CUDA under PyTorch; bf16 on the CPU under PyTorch when asked
    for with dtype=bfloat16 (see amp_dtype); a no-op otherwise."""
    if enabled and has_amp(dev):
        return torch.autocast("cuda", dtype=dtype or torch.float16)
    if enabled and IS_TORCH and dtype is not None and dtype == torch.bfloat16 and not is_cuda(dev):
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class _NoScaler:
    """Stands in for GradScaler when AMP is off: same calls, plain fp32 behaviour."""

    def scale(self, loss):
        return loss

    def unscale_(self, optimizer):
        pass

    def step(self, optimizer):
        optimizer.step()

    def update(self):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def grad_scaler(dev, enabled=True):
    if enabled and has_amp(dev):
        return torch.amp.GradScaler("cuda") if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler()
    return _NoScaler()


# ----------------------------------------------------------------------------------------------------------------
# NMS kernel (or None when the framework has none for this device; utils/general.py then uses its own)
def nms_kernel(dev):
    if IS_TORCH:
        try:
            import torchvision  # optional: not installable on the CPU machines, fine on GPU hosts
            return torchvision.ops.nms
        except Exception:
            return None
    if is_cuda(dev) and hasattr(torch, "nms"):
        return lambda boxes, scores, iou: torch.nms(boxes, scores, iou)  # OneFlow: CUDA kernel only
    return None


# ----------------------------------------------------------------------------------------------------------------
# Distributed: every helper is safe (a no-op or the trivial answer) in a single process.
def _env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def get_rank():
    # A single process is rank 0 whatever the environment says: importing OneFlow 0.9.0 sets RANK=-1 and
    # LOCAL_RANK=0 even without a launcher (seen in os.environ right after `import oneflow`).
    return _env_int("RANK", 0) if get_world_size() > 1 else 0


def get_world_size():
    return _env_int("WORLD_SIZE", 1)


def get_local_rank():
    return _env_int("LOCAL_RANK", 0) if get_world_size() > 1 else -1


def dist_initialized():
    if get_world_size() <= 1:
        return False
    if IS_TORCH:
        return torch.distributed.is_available() and torch.distributed.is_initialized()
    return True  # OneFlow initialises its communicator from the launcher's environment on first use


def init_process_group(dev, timeout_s=1800):
    """Start the process group for a launcher-started job (no-op for one process)."""
    if get_world_size() <= 1:
        return
    if IS_TORCH:
        import datetime
        if not torch.distributed.is_initialized():
            backend = "nccl" if is_cuda(dev) else "gloo"
            torch.distributed.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
    # OneFlow: the launcher's MASTER_ADDR/PORT, RANK, WORLD_SIZE are read by the runtime itself.


def barrier():
    if not dist_initialized():
        return
    if IS_TORCH:
        torch.distributed.barrier()
    else:
        torch.comm.barrier()


def all_reduce_sum_(t):
    """In-place sum over ranks; returns t."""
    if dist_initialized():
        if IS_TORCH:
            torch.distributed.all_reduce(t)
        else:
            torch.comm.all_reduce(t)
    return t


def broadcast_(t, src=0):
    """In-place broadcast of a tensor from src; returns t."""
    if dist_initialized():
        if IS_TORCH:
            torch.distributed.broadcast(t, src)
        else:
            torch.comm.broadcast(t, src)
    return t


def destroy_process_group():
    if IS_TORCH and dist_initialized():
        torch.distributed.destroy_process_group()
