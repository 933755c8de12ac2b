"""Helpers whose code is the same on OneFlow and PyTorch, written once against the chosen framework. Imported by
utils/backend/__init__.py after the framework is chosen (so ``torch`` below is that framework); project code imports
these names from utils.backend."""
import numpy as np

from utils.backend import BACKEND, F, nn, torch
from utils.backend.common import is_cuda, to_numpy

__all__ = ["is_cuda", "to_numpy", "cuda_available", "cuda_device_count", "device", "select_device", "set_cuda_device",
           "synchronize", "memory_reserved_gb", "can_report_cuda_memory", "cuda_memory", "empty_cuda_cache",
           "cudnn_benchmark_enabled", "manual_seed", "get_rng_state", "set_rng_state", "no_grad", "inference_mode",
           "to_channels_last", "convert_sync_batchnorm", "MultiheadAttentionFallback", "MultiheadAttention"]


# ----------------------------------------------------------------------------------------------------------------
# Devices
def cuda_available():
    return bool(torch.cuda.is_available())


def cuda_device_count():
    return torch.cuda.device_count() if cuda_available() else 0


def device(spec="cpu"):
    return torch.device(spec)


def select_device(spec="", batch_size=0):
    """'' (first GPU if any, else CPU), 'cpu', '0', '0,1', 'cuda:1' -> a device. Several ids keep the first: each
    DDP rank picks its own with its local rank. Raises ValueError with a message for a GPU that is not there."""
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


def set_cuda_device(index):
    """Make cuda:index this process's current GPU (DDP: each rank on its own)."""
    if hasattr(torch.cuda, "set_device"):
        torch.cuda.set_device(index)


def synchronize(dev=None):
    if dev is not None and is_cuda(dev) and cuda_available():
        torch.cuda.synchronize()


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
# RNG, autograd modes, layouts
def manual_seed(seed):
    torch.manual_seed(seed)
    if cuda_available():
        torch.cuda.manual_seed_all(seed)


def get_rng_state():
    """The framework's CPU RNG state as a numpy uint8 array (saved in checkpoints for exact resume)."""
    return to_numpy(torch.get_rng_state())


def set_rng_state(state):
    torch.set_rng_state(torch.from_numpy(np.ascontiguousarray(np.asarray(state, dtype=np.uint8))))


def no_grad():
    return torch.no_grad()


def inference_mode():
    """no_grad on both: tensors made under torch.inference_mode cannot enter autograd later (EMA validation)."""
    return torch.no_grad()


def to_channels_last(x):
    """A 4-D batch in channels_last memory format (same values); unchanged where the framework has none."""
    fmt = getattr(torch, "channels_last", None)
    return x.contiguous(memory_format=fmt) if fmt is not None and x.dim() == 4 else x


def convert_sync_batchnorm(model):
    """BatchNorm layers -> SyncBatchNorm (CUDA only under both frameworks; utils/distributed refuses it on CPU)."""
    return nn.SyncBatchNorm.convert_sync_batchnorm(model)


# ----------------------------------------------------------------------------------------------------------------
# Attention for a framework that has none
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
