"""A Conv's BatchNorm and SiLU in CPU training as one C kernel (utils/native/bn_silu.c), PyTorch.

In a CPU training step BatchNorm and SiLU are passes over every activation bound by memory traffic. PyTorch runs
them as four kernels that read and write each activation 13 times, and autograd keeps both the BatchNorm input and
its output; the kernel reads and writes 9 times and keeps only the input. It applies where a training Conv's
output is fp32 or bf16 (bf16 autocast, the default on CPUs that compute bf16) channels-last on the CPU (the CPU
default layout) and nothing observes the two modules (hooks, tracing, compiling). YOLO_FUSED_BN_SILU=0 turns it
off; without a C compiler it stays off, after one info line.

Measured with benchmarks/bn_silu.py on a 2-core Zen 4, yolov5s 640 batch 16 (the figures of the results files
named in docs/speed.md): the 57 layers' BatchNorm + SiLU alone 1.7x faster in fp32 and 1.34x in bf16 (there the
kernel is bound by arithmetic, the exp and the conversions, more than by memory), whole forward + backward steps
1.04-1.06x; whole training runs held to AVX2 112.2 s against 118.0 s without it (the official trainer's 173 s),
with peak memory 6,665 against 7,877 MiB (the BatchNorm outputs are no longer kept).

The same maths as torch.nn.BatchNorm2d then nn.SiLU: batch statistics (biased variance for normalising,
unbiased for the running estimate, the module's momentum and eps), num_batches_tracked counted. Not the same bits:
the statistics are summed in double, closer to a float64 reference than PyTorch's channels-last statistics; bf16
values are computed in float32 and rounded once where PyTorch rounds the BatchNorm output before the SiLU
(tests/test_backend/test_bn_silu.py holds the kernel to a float64 reference and to PyTorch's kernels).
"""
import ctypes
import functools
import platform

import torch
from torch.autograd.function import once_differentiable
from torch.nn.modules import module as _module

from utils.log import LOGGER
from utils.native_build import NativeBuildError, load
from utils.settings import FUSED_BN_SILU

SINGLE_THREAD_BELOW = 1 << 16  # elements: below this, waking the kernel's helper thread costs more than it saves
_P, _L, _I, _D = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_double
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def isa_flags():
    """Compiler flags for the instruction set PyTorch's own kernels use here (ATEN_CPU_CAPABILITY included)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ()
    cap = torch.backends.cpu.get_cpu_capability()
    if cap.startswith("AVX512"):
        return ("-mavx2", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl")
    return ("-mavx2", "-mfma") if cap == "AVX2" else ()


@functools.lru_cache(maxsize=1)
def kernel_library():
    """The built kernel with its signatures, or None (and one info line) where it cannot be built."""
    try:
        lib = load("bn_silu", isa_flags())
    except NativeBuildError as e:
        LOGGER.info(f"fused BatchNorm+SiLU off, PyTorch's kernels run: {e}")
        return None
    lib.bn_silu_forward.argtypes = [_P, _I, _L, _L, _P, _P, _P, _P, _D, _D, _P, _P, _I]
    lib.bn_silu_backward.argtypes = [_P, _I, _L, _L, _P, _L, _P, _P, _P, _P, _P, _I, _I]
    lib.bn_silu_forward.restype = lib.bn_silu_backward.restype = _I
    return lib


def _threads(numel):
    return 1 if numel < SINGLE_THREAD_BELOW else torch.get_num_threads()


def _row_stride(t):
    """The distance in elements between rows (pixels) of a 4-D tensor whose channels are contiguous and whose rows
    are evenly spaced (channels-last, or a channel slice of a wider channels-last tensor); else None."""
    n, c, h, w = t.shape
    sn, sc, sh, sw = t.stride()
    if sc != 1 and c > 1:
        return None
    gs = sw if w > 1 else (sh if h > 1 else (sn if n > 1 else c))
    ok = gs >= c and (w == 1 or sw == gs) and (h == 1 or sh == w * gs) and (n == 1 or sn == h * w * gs)
    return gs if ok else None


def _is_bf16(t):
    return int(t.dtype == torch.bfloat16)


def _check(rc, what):
    if rc == -2:
        raise MemoryError(f"fused BatchNorm+SiLU {what}: out of memory")
    if rc != 0:
        raise RuntimeError(f"fused BatchNorm+SiLU {what}: kernel error {rc}")


KERNEL_DTYPES = (torch.float32, torch.bfloat16)  # activations the kernel reads and writes; per channel, float32


class BatchNormSiLU(torch.autograd.Function):
    """silu(batch_norm(x, training=True)) over an fp32 or bf16 channels-last CPU tensor (float32 weights and
    statistics); updates the running statistics."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        lib = kernel_library()
        n, c, h, w = x.shape
        rows = n * h * w
        out = torch.empty_like(x, memory_format=torch.channels_last)
        # mean, 1/std, scale, shift (the backward recomputes the normalised input); float32 whatever the default dtype
        stats = torch.empty(4, c, dtype=torch.float32)
        _check(lib.bn_silu_forward(x.data_ptr(), _is_bf16(x), rows, c, weight.data_ptr(), bias.data_ptr(),
                                   running_mean.data_ptr(), running_var.data_ptr(), float(momentum), float(eps),
                                   out.data_ptr(), stats.data_ptr(), _threads(x.numel())), "forward")
        ctx.save_for_backward(x, weight, stats)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight, stats = ctx.saved_tensors
        n, c, h, w = x.shape
        need = ctx.needs_input_grad
        grad = grad.to(x.dtype)
        gs = _row_stride(grad)
        if gs is None:
            grad, gs = grad.contiguous(memory_format=torch.channels_last), c
        dx = torch.empty_like(x, memory_format=torch.channels_last)  # also the kernel's scratch: always needed
        dw, db = torch.empty(c, dtype=torch.float32), torch.empty(c, dtype=torch.float32)
        _check(kernel_library().bn_silu_backward(x.data_ptr(), _is_bf16(x), n * h * w, c, grad.data_ptr(), gs,
                                                 weight.data_ptr(), stats.data_ptr(), dx.data_ptr(), dw.data_ptr(),
                                                 db.data_ptr(), int(need[0]), _threads(x.numel())), "backward")
        return dx if need[0] else None, dw if need[1] else None, db if need[2] else None, None, None, None, None


def _observed(*modules):
    """Whether a hook (the modules' own or a global one) would see these modules run."""
    return (any(getattr(_module, name, None) for name in _GLOBAL_HOOKS)
            or any(getattr(m, name, None) for m in modules for name in _MODULE_HOOKS))


def fused_applies(bn, act, x):
    """Whether act(bn(x)) can run as the fused kernel: a training torch BatchNorm2d (affine, running statistics,
    a momentum, float32 parameters) and nn.SiLU, x an fp32 or bf16 channels-last CPU tensor with at least 2 values
    per channel, no hooks, no tracer or compiler watching, and the setting on."""
    return (type(bn) is torch.nn.BatchNorm2d and type(act) is torch.nn.SiLU and bn.training and bn.affine
            and bn.track_running_stats and bn.momentum is not None
            and x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and x.dim() == 4
            and x.is_contiguous(memory_format=torch.channels_last) and x.shape[0] * x.shape[2] * x.shape[3] > 1
            and bn.weight.dtype == torch.float32 and bn.running_mean.dtype == torch.float32
            and not _observed(bn, act) and not torch.jit.is_tracing() and not torch.compiler.is_compiling()
            and FUSED_BN_SILU.get() and kernel_library() is not None)


def bn_silu(bn, act, x):
    """act(bn(x)) for a model's Conv: the fused kernel where it applies (fused_applies), else the modules."""
    if not fused_applies(bn, act, x):
        return act(bn(x))
    bn.num_batches_tracked.add_(1)
    return BatchNormSiLU.apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.momentum, bn.eps)
