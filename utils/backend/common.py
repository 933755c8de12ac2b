"""Helpers both per-backend modules use that need no framework: they act on the tensors and devices they are given
(or on numpy arrays and strings), so the same code serves OneFlow and PyTorch objects."""
import importlib.util
import inspect
import os

import numpy as np

from utils.settings import FUSED_CIOU


def is_cuda(x):
    """True when a tensor or device lives on a CUDA GPU."""
    dev = x.device if hasattr(x, "device") else x
    return "cuda" in str(dev)


def to_numpy(t):
    return t.detach().cpu().numpy()


def contiguous_array(a):
    """a as a C-contiguous numpy array that keeps a 0-d shape 0-d (np.ascontiguousarray alone makes it (1,))."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def installed(name):
    """Whether a module can be imported, found without importing it (triton, torchvision are large and optional)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def fused_ciou_request():
    """The user's override of the fused CIoU choice, YOLO_FUSED_CIOU=plain|compile|triton ('' when unset)."""
    return FUSED_CIOU.get()


def check_ema_pairs(ema_tensors, model_tensors):
    """The EMA and the model must hold the same floating tensors, pair by pair; returns the model's, detached
    (OneFlow's state_dict() values are not)."""
    if len(ema_tensors) != len(model_tensors):
        raise ValueError(f"EMA has {len(ema_tensors)} floating tensors, the model {len(model_tensors)}")
    return [m.detach() for m in model_tensors]


def ema_loop_(ema_tensors, model_tensors, d):
    """ema = d * ema + (1 - d) * model, one tensor at a time (the official update)."""
    for e, m in zip(ema_tensors, model_tensors):
        e.mul_(d).add_(m.to(e.dtype), alpha=1 - d)


def group_get(group, key):
    """A parameter group's setting: PyTorch groups are dicts, OneFlow's ParamGroup has __getitem__ only."""
    try:
        return group[key]
    except (KeyError, AttributeError, TypeError):
        return None


def accepts(cls, arg):
    """Whether a class's constructor takes the keyword ``arg`` (optimizers grew fused/foreach over versions)."""
    try:
        return arg in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def read_proc_cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty when the file is not there)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def onednn_isa_cap():
    """The instruction set the user capped oneDNN at (its ONEDNN_MAX_CPU_ISA, formerly DNNL_MAX_CPU_ISA), upper
    case, or '' when uncapped."""
    return (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().upper()


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
