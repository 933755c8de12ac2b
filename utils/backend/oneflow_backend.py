"""The function set (utils/backend/api.py) on OneFlow 0.9.0. Imported by utils/backend/__init__.py when OneFlow is the
chosen backend; importing it imports oneflow (a BackendError says what to install when that fails).

OneFlow 0.9.0's gaps that shape this module: the fused CIoU and multi_tensor_* kernels exist only for CUDA; flow.nms
has no CPU kernel; there is no eager GradScaler (training is fp32); collectives are flow.comm.* and the runtime sets
up its communicator from the launcher's environment by itself; from_numpy refuses int16/uint16/uint32/uint64.
"""
import contextlib
import ctypes
import glob
import os
import signal
import site
import sys
import threading
from functools import partial
from importlib.metadata import version

from utils.backend.common import (accepts, check_ema_pairs, contiguous_array, ema_loop_, fused_ciou_request, group_get,
                                  installed, is_cuda, _NoScaler)
from utils.backend.oneflow_ciou import ciou_fused_chain
from utils.backend_choice import BackendError, gpu_seen_here
from utils.errors import NeedsPyTorchError
from utils.optimizer_layout import to_oneflow_layout


# ----------------------------------------------------------------------------------------------------------------
# Import
def _site_packages_dirs():
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.append(user)
    dirs += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(dirs))


def _preload_cuda_libs():
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


def _dist_version():
    try:
        return version("oneflow")
    except Exception:
        return None


def _import_oneflow():
    if not installed("oneflow"):
        raise BackendError("OneFlow is not installed. Install it on Python 3.7-3.10 with "
                           "'pip install oneflow==0.9.0 nvidia-cudnn-cu11==8.5.0.96 nvidia-cublas-cu11==11.10.3.66 "
                           "\"numpy<2\"' (or run 'make setup'), or set YOLO_BACKEND=torch.")
    dist_version = _dist_version()
    if dist_version and not dist_version.startswith("0.9"):
        raise BackendError(f"oneflow=={dist_version} is installed, but this project needs oneflow==0.9.0. On Python "
                           f"{sys.version_info.major}.{sys.version_info.minor} pip only offers the 0.7.0 placeholder "
                           "package; use Python 3.10 ('make setup' builds .venv-oneflow) or set YOLO_BACKEND=torch.")
    missing = _preload_cuda_libs()
    python_sigint = signal.getsignal(signal.SIGINT)
    try:
        import oneflow  # framework: after the CUDA libraries are preloaded
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


# OneFlow's eager runtime hands every op from the Python thread to a scheduler thread, which hands it on to a worker
# thread; both poll with sched_yield while they wait. On a CPU with other work to do (loader workers, a second job)
# each hand-off waits for a time slice: a 3-epoch 64 px yolov5n run that takes 3.5 s alone took 41 s beside three
# busy processes on 2 cores (PyTorch: 7 s), and the yields alone cost 20 s of system CPU in a 24 s coco128 epoch.
# Computing on the scheduler thread, without the yields: 9.7 s beside the same load, the same 3.5 s alone, and that
# epoch 23 s with 24 s of CPU instead of 48. On the CPU only (the GPU path is unmeasured); a value the user set wins.
# The runtime reads these when it starts, hence before the import; loader workers and subprocesses inherit them.
CPU_VM_SETTINGS = {"ONEFLOW_VM_COMPUTE_ON_WORKER_THREAD": "0", "ONEFLOW_VM_ENABLE_SCHEDULE_YIELD": "0"}
if not gpu_seen_here()[0]:
    for _name, _value in CPU_VM_SETTINGS.items():
        os.environ.setdefault(_name, _value)

torch = flow = _import_oneflow()


def tensorboard_graph(model, imgsz):
    raise NotImplementedError("OneFlow 0.9.0 has no TorchScript-style tracer to draw the model graph from "
                              "(scalars and images are written as usual)")


# ----------------------------------------------------------------------------------------------------------------
# Tensors, devices
_WIDER_INTS = {"int16": "int32", "uint16": "int32", "uint32": "int64", "uint64": "int64"}


def from_numpy(a):
    """Integer dtypes OneFlow lacks are widened (values unchanged), so checkpoint buffers of any width load."""
    a = contiguous_array(a)
    wider = _WIDER_INTS.get(a.dtype.name)
    return flow.from_numpy(a.astype(wider) if wider else a)


def to_device(t, dev):
    return t.to(dev)


def wait_for_work(dev=None):
    """OneFlow runs eager ops asynchronously even on the CPU: without this the time lands in whatever first reads
    a result."""
    if hasattr(flow, "_oneflow_internal"):
        flow._oneflow_internal.eager.Sync()
    if dev is not None and is_cuda(dev) and flow.cuda.is_available():
        flow.cuda.synchronize()


def require_pytorch(purpose):
    """A one-line UserError naming the PyTorch environment: checkpoints are the same files under both backends, so
    the user only has to run the same command there."""
    raise NeedsPyTorchError(f"{purpose} needs the PyTorch environment, and this runs under OneFlow: run the same "
                            "command with YOLO_BACKEND=torch .venv-torch/bin/python (a checkpoint trained under "
                            "OneFlow is the same file there).")


def set_deterministic():
    pass  # OneFlow 0.9.0 has no switch for deterministic kernels


def nms_kernel(dev):
    if is_cuda(dev) and hasattr(flow, "nms"):
        return lambda boxes, scores, iou: flow.nms(boxes, scores, iou)  # CUDA kernel only
    return None


class _PreciseBatchNorm2d(flow.nn.BatchNorm2d):
    """OneFlow 0.9's CPU BatchNorm kernel accumulates its training-mode statistics naively in float32 (one pass,
    E[x^2] - E[x]^2, error growing with batch*height*width): yolov5n's raw train-mode outputs then differ from
    PyTorch's by ~1e-2. On the CPU in training mode the output is computed from statistics taken with the
    framework's accurate mean/var reductions (through the inference kernel), while the gradient still comes from
    the fast training kernel (its ~1e-4 relative error in the statistics only perturbs the gradient, which is
    harmless; a hand-written backward was ~15x slower on CPU). Running statistics use the accurate values.
    CUDA and eval mode use the kernel alone."""

    def forward(self, x):
        if not (self.training and self.affine and x.dim() == 4 and not is_cuda(x)):
            return super().forward(x)
        F = flow.nn.functional
        with flow.no_grad():
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
        with flow.no_grad():
            correction = exact - y
        return y + correction  # value: the accurate output; gradient: the kernel's


BatchNorm2d = _PreciseBatchNorm2d


# ----------------------------------------------------------------------------------------------------------------
# Mixed precision: none (no eager GradScaler), so every answer is fp32
def has_amp(device):
    return False


def no_amp_reason():
    return "OneFlow 0.9.0 has no eager GradScaler for AMP"


def cpu_has_native_bf16():
    return False  # no CPU autocast in OneFlow 0.9.0


def amp_dtype(device, request=None):
    """(None, '') by default and for --no-amp; --amp gets fp32 with the reason."""
    if request:
        return None, f"--amp: {no_amp_reason()}; training in fp32"
    return None, ""


def channels_last_pays(device, dtype):
    return False


def autocast(dev, enabled=True, dtype=None):
    return contextlib.nullcontext()


def grad_scaler(dev, enabled=True):
    return _NoScaler()


# ----------------------------------------------------------------------------------------------------------------
# Fused CIoU: the fused_get_* kernel chain (utils/backend/oneflow_ciou.py), CUDA only
def fused_ciou(device):
    if fused_ciou_request() != "plain" and is_cuda(device) and hasattr(flow._C, "fused_get_ciou_result"):
        return "oneflow-fused-kernels", partial(ciou_fused_chain, ops=flow._C)
    return "plain", None


def compiled_ciou():
    return None


def conv2d(conv, x):
    """conv(x): OneFlow's convolutions keep their own gradients."""
    return conv(x)


def bn_silu(bn, act, x):
    """act(bn(x)): OneFlow runs its own kernels."""
    return act(bn(x))


def head_layout(x, na, no):
    """Detect's reshaping of a level map to (bs, na, ny, nx, no); OneFlow's autograd copies its gradient back."""
    bs, _, ny, nx = x.shape
    return x.view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()


def head_reads(pi, idx):
    """The loss's reads of a level map as plain indexing of its fp32 copy (autograd builds the gradient)."""
    pf = pi.float()
    return pf[..., 4], pf.reshape(-1, pf.shape[-1]).index_select(0, idx)


# ----------------------------------------------------------------------------------------------------------------
# Multi-tensor EMA and optimizer: flow._C.multi_tensor_yolov5_weight_update and the optimizers' fused=True, both
# CUDA fp32 only (on the CPU OneFlow has no kernel and would only warn).
def ema_impl(ema_tensors, fused):
    if not fused or not ema_tensors:
        return "loop"
    dev = ema_tensors[0].device
    ok = is_cuda(dev) and hasattr(flow._C, "multi_tensor_yolov5_weight_update") and \
        all(t.dtype == flow.float32 and t.device == dev for t in ema_tensors)
    return "oneflow-multi-tensor" if ok else "loop"


def ema_update_(ema_tensors, model_tensors, d, fused):
    """In place: ema = d * ema + (1 - d) * model for each pair. Call under no_grad. ``fused`` is the flag."""
    model_tensors = check_ema_pairs(ema_tensors, model_tensors)
    if ema_impl(ema_tensors, fused) == "oneflow-multi-tensor":
        if any(m.dtype != flow.float32 for m in model_tensors):
            model_tensors = [m.float() for m in model_tensors]
        flow._C.multi_tensor_yolov5_weight_update(ema_tensors, model_tensors, float(d))
    else:
        ema_loop_(ema_tensors, model_tensors, d)


class RMSprop(flow.optim.Optimizer):
    """torch.optim.RMSprop's update on OneFlow. OneFlow 0.9.0's own RMSprop refuses momentum > 0 (official
    classification builds it with momentum 0.9) and adds eps inside the square root, where torch adds it after.
    State per parameter: square_avg, momentum_buf (OneFlow's name for torch's momentum_buffer), grad_avg when
    centered; the step count in the optimizer's 'step', as OneFlow keeps it (utils/optimizer_layout.py)."""

    def __init__(self, params, lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
        options = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay, "momentum": momentum,
                   "centered": centered}
        super().__init__(params, options)
        for group in self.param_groups:
            for p in group.parameters:
                self._state[p] = {}

    def step(self, closure=None):
        with flow.no_grad():
            loss = closure() if closure is not None else None
            for group in self.param_groups:
                lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
                wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
                for p in group.parameters:
                    if p.grad is None:
                        continue
                    grad = p.grad + p * wd if wd else p.grad
                    state = self._state[p]
                    if "square_avg" not in state:
                        state["square_avg"] = flow.zeros_like(p)
                    square_avg = state["square_avg"]
                    square_avg.mul_(alpha).add_(grad * grad * (1 - alpha))
                    if centered:
                        if "grad_avg" not in state:
                            state["grad_avg"] = flow.zeros_like(p)
                        grad_avg = state["grad_avg"]
                        grad_avg.mul_(alpha).add_(grad * (1 - alpha))
                        avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
                    else:
                        avg = square_avg.sqrt() + eps
                    if momentum > 0:
                        if "momentum_buf" not in state:
                            state["momentum_buf"] = flow.zeros_like(p)
                        buf = state["momentum_buf"]
                        buf.mul_(momentum).add_(grad / avg)
                        p.sub_(buf * lr)
                    else:
                        p.sub_(grad / avg * lr)
            self._state["step"] = self._state["step"] + 1
            return loss


def optimizer_class(name):
    """OneFlow's SGD, Adam and AdamW; RMSprop is the class above."""
    return RMSprop if name == "RMSprop" else getattr(flow.optim, name)


def optimizer_kwargs(name, fused, device):
    """fused=True on CUDA (multi_tensor_sgd/momentum/adam_update). Pass all parameter groups to the constructor:
    OneFlow's fused SGD crashes on groups added later with add_param_group."""
    if not fused:
        return {}
    cls = getattr(flow.optim, name, None)
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}: use SGD, Adam or AdamW")
    return {"fused": True} if is_cuda(device) and accepts(cls, "fused") else {}


def optimizer_impl(optimizer):
    if optimizer.param_groups and group_get(optimizer.param_groups[0], "fused"):
        return "fused"
    return "loop"


def optimizer_variants(device):
    return {}


def clip_grad_norm_(parameters, max_norm, fused):
    """OneFlow 0.9.0 has no multi-tensor norm: the framework's own clipping, flag or not."""
    params = [p for p in parameters if p.grad is not None]
    return flow.nn.utils.clip_grad_norm_(params, max_norm=max_norm)


def all_finite(tensors):
    """OneFlow 0.9.0 has no multi-tensor reduction, and its max() skips NaN: the tensors flattened into one (a copy,
    58 MB for yolov5s' model + EMA), one isfinite().all(), one read (the only host sync). Three kernels instead of
    three per tensor; on the CPU 190 ms a save against 504 ms for the per-tensor form."""
    flat = [t.detach().reshape(-1) for t in tensors if t.is_floating_point() and t.numel()]
    if not flat:
        return True
    flat = [t if t.dtype == flow.float32 else t.float() for t in flat]
    return bool(flow.isfinite(flow.cat(flat)).all())  # SYNC


def optimizer_state_to_native(state_dict):
    return to_oneflow_layout(state_dict)


# ----------------------------------------------------------------------------------------------------------------
# Distributed: the runtime reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE itself (no init call);
# flow.nn.parallel.DistributedDataParallel returns the SAME module with gradient hooks (no .module), broadcasts rank
# 0's parameters once and the buffers before every forward; its collectives have no timeout, so the watchdog
# (utils/distributed/watchdog.py) is what bounds a hang.
def dist_init(device, limit_s):
    pass


def dist_ready():
    return True  # the communicator starts on first use


def dist_barrier():
    flow.comm.barrier()


def dist_broadcast_(t, src=0):
    flow.comm.broadcast(t, src)
    return t


def ddp_wrap(model, device, local_rank):
    return flow.nn.parallel.DistributedDataParallel(model)


def ddp_gpu_follows_local_rank():
    return True  # its collectives require rank i on cuda:<local rank i>
