"""Training precision: --amp/--no-amp turned into an autocast dtype, an input layout and a loss scaler.

Default (neither flag): fp16 autocast with a GradScaler on CUDA under PyTorch (the official choice); bf16 autocast on
a CPU with native bf16 (AVX512-BF16 or AMX), as --amp gives it; fp32 elsewhere. --amp: the same on CUDA; on a CPU
with native bf16, bf16 autocast with no loss scaling (bf16 has fp32's exponent range); the weights, gradients,
optimizer and EMA stay fp32 and the loss is computed in fp32. Where neither applies (OneFlow, a CPU without native
bf16) --amp falls back to fp32 with a one-line warning. --no-amp: fp32 everywhere. The input layout is the backend's
choice for the device (channels_last on the CPU under PyTorch, in fp32 and bf16 alike; YOLO_CHANNELS_LAST=0 keeps
NCHW). The bf16 default (one setting, with the learning study that supports it) and the start-up check of CPU
autocast against fp32 on a fixed input (fp32, with one line, when they disagree): utils/amp_check.py.
"""
from utils import amp_check, backend
from utils.log import LOGGER

__all__ = ["training_precision"]


def training_precision(device, request=None, model=None):
    """-> (autocast dtype or None for fp32, channels_last input?, scaler) for training on ``device``; request is
    opt.amp (None, True or False); model, when given, is checked under CPU autocast before it is chosen."""
    dtype, note = backend.amp_dtype(device, amp_check.default_request(device, request))
    if note:
        LOGGER.warning(f"WARNING ⚠️ {note}")
    elif backend.no_amp_reason():
        LOGGER.info(f"{backend.BACKEND} backend: training in fp32 ({backend.no_amp_reason()})")
    dtype = amp_check.checked_dtype(model, device, dtype, backend.channels_last_pays(device, dtype))
    channels_last = backend.channels_last_pays(device, dtype)
    if dtype is not None and not backend.is_cuda(device):
        LOGGER.info(f"AMP: {str(dtype).split('.')[-1]} autocast on the CPU (fp32 weights)"
                    f"{', channels_last input' if channels_last else ''}")
    return dtype, channels_last, backend.grad_scaler(device, enabled=dtype is not None)
