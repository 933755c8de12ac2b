"""The models' convolutions in training, with the weight gradient of the large ones from NCHW copies where oneDNN
runs AVX2 kernels (PyTorch).

Training feeds channels_last batches on the CPU (channels_last_pays), so every convolution's backward gets
channels_last tensors. Where oneDNN has no AVX-512 kernels (an AVX2-only CPU such as AMD Zen 3, or oneDNN held to
AVX2 with ONEDNN_MAX_CPU_ISA) its channels_last weight gradient of a 3x3 convolution takes a slower path than the
NCHW one for large layers. For those, conv2d computes that one gradient from NCHW copies of the input and the
output gradient; the forward and the input gradient stay channels_last. Same maths, another summation order (the
official trainer's NCHW weight gradient is the one computed so).

Measured with benchmarks/conv_grad.py on a 2-core Zen 4 with oneDNN held to AVX2, batch 16: every 3x3 layer of
yolov5s at 640 px (about 7.5 GFLOP of weight gradient each) 1.03x-1.39x faster with the copies included, and every
layer of yolov5n at 320 px (0.5-0.9 GFLOP) 0.65x-1.14x, mostly slower; the image batch's first convolution (no input
gradient to split from) 0.6x. Hence the threshold between the two and the input-gradient condition below. With
AVX-512 kernels the split was slower (yolov5s 640 0.96x), so it stays off there.
"""
import functools

import torch

from utils.backend.common import onednn_isa_cap, read_proc_cpu_flags
from utils.settings import NCHW_WEIGHT_GRAD

MIN_WEIGHT_GRAD_FLOPS = 4e9  # between the largest layer measured slower (0.9e9) and the smallest faster (7.5e9)
_AVX2_CAPS = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2"}  # oneDNN caps below its AVX-512 kernels


class ConvNCHWWeightGrad(torch.autograd.Function):
    """conv2d (no bias) whose weight gradient is computed from NCHW copies; forward and input gradient as given."""

    @staticmethod
    def forward(ctx, x, weight, stride, padding, dilation, groups):
        ctx.save_for_backward(x, weight)
        ctx.conf = (list(stride), list(padding), list(dilation), False, [0, 0], groups)
        return torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.aten.convolution_backward(grad, x, weight, None, *ctx.conf, [True, False, False])[0]
        if ctx.needs_input_grad[1]:
            grad_w = torch.ops.aten.convolution_backward(grad.contiguous(), x.contiguous(), weight, None, *ctx.conf,
                                                         [False, True, False])[1]
        return grad_x, grad_w, None, None, None, None


@functools.lru_cache(maxsize=1)
def _onednn_runs_avx2_kernels():
    """True on an x86 CPU with AVX2 and without AVX-512 (its flags; unknown flags count as no), or with oneDNN capped
    below AVX-512. Read once per process."""
    flags = read_proc_cpu_flags()
    return onednn_isa_cap() in _AVX2_CAPS or ("avx2" in flags and "avx512f" not in flags)


def nchw_weight_grad_on():
    """YOLO_NCHW_WEIGHT_GRAD: 1 on, 0 off; unset, on where oneDNN runs AVX2 kernels."""
    forced = NCHW_WEIGHT_GRAD.get()
    return _onednn_runs_avx2_kernels() if forced is None else forced


def weight_grad_flops(conv, x, out_hw):
    n, cin = x.shape[0], x.shape[1]
    kh, kw = conv.kernel_size
    return 2.0 * n * conv.out_channels * out_hw[0] * out_hw[1] * (cin // conv.groups) * kh * kw


def _split_pays(conv, x):
    # cheapest and most often decisive first: every model convolution passes here (CUDA and AVX-512 CPUs leave at once)
    if x.is_cuda or not nchw_weight_grad_on() or not torch.is_grad_enabled():
        return False
    if not (x.requires_grad and conv.weight.requires_grad and x.dim() == 4) or torch.is_autocast_enabled("cpu"):
        return False
    if conv.kernel_size == (1, 1) or conv.bias is not None or conv.padding_mode != "zeros":
        return False
    if not isinstance(conv.padding, tuple) or not x.is_contiguous(memory_format=torch.channels_last):
        return False
    out_hw = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, p, d, k, s in
              zip(x.shape[2:], conv.padding, conv.dilation, conv.kernel_size, conv.stride)]
    return weight_grad_flops(conv, x, out_hw) >= MIN_WEIGHT_GRAD_FLOPS


def conv2d(conv, x):
    """conv(x) for a model's nn.Conv2d, the weight gradient of large CPU training convolutions from NCHW copies
    where that measured faster (module docstring)."""
    if _split_pays(conv, x):
        return ConvNCHWWeightGrad.apply(x, conv.weight, conv.stride, conv.padding, conv.dilation, conv.groups)
    return conv(x)
