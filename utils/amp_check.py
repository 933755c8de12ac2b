"""bf16 autocast on the CPU: whether a run asks for it by default, and the start-up check that may turn it off.

The default (neither --amp nor --no-amp) is one setting, BF16_BY_DEFAULT_ON_NATIVE_CPU, on: a CPU that computes bf16
natively (AVX512-BF16 or AMX, read from its flags by utils/backend) trains with bf16 autocast unless --no-amp, the way
the official trainer turns fp16 on for CUDA; a CPU without native bf16 trains in fp32 (emulated bf16 is slower), as
the official trainer does on every CPU. Turned off, no flag means fp32 on every CPU.

Whenever bf16 autocast is about to be used on the CPU (by default or by --amp), the model runs once on a fixed input
in fp32 and once under autocast, in eval mode and without gradients (no BatchNorm statistics or weights change), as
the official check_amp compares fp32 and AMP outputs on CUDA. When the outputs disagree past TOLERANCE (or the bf16
pass fails or gives non-finite values), training falls back to fp32 with one line saying why.
"""
import numpy as np

from utils import backend
from utils.log import LOGGER

__all__ = ["BF16_BY_DEFAULT_ON_NATIVE_CPU", "TOLERANCE", "default_request", "output_disagreement", "checked_dtype"]

# On because benchmarks/learning_study.py found bf16 learning as fp32 does (yolov5n, 30 epochs, 5 seeds a
# configuration or more; bf16 minus fp32 final mAP50-95 with its 95% Welch interval), in benchmarks/results/:
#   learning_study_coco128_20261127T225137Z.json (from yolov5n.pt, 320 px, 5 + 5 seeds): -0.0004 [-0.0125, +0.0117]
#   learning_study_shapes_20261128T092500Z.json (from scratch, 256 px, 15 + 10 seeds):  -0.0006 [-0.0306, +0.0293]
# Set it to False and no flag means fp32 on every CPU again.
BF16_BY_DEFAULT_ON_NATIVE_CPU = True

# Largest relative L2 difference (per output tensor) between fp32 and bf16-autocast outputs that still counts as
# agreement. bf16 keeps 8 mantissa bits (relative rounding 2^-9, about 0.002 per value); through a YOLOv5's layers
# the outputs of a working bf16 path differ from fp32 by about 0.01; a broken kernel gives differences of order 1.
TOLERANCE = 0.05
CHECK_IMG = 128  # pixels of the fixed input: a multiple of every YOLOv5 stride, cheap at yolov5x too


def default_request(device, request):
    """opt.amp as the run will use it: the flag as given (True: --amp, False: --no-amp), and for no flag (None)
    True only where BF16_BY_DEFAULT_ON_NATIVE_CPU is on and the device is a CPU with native bf16."""
    if request is not None or not BF16_BY_DEFAULT_ON_NATIVE_CPU or backend.is_cuda(device):
        return request
    return True if backend.cpu_has_native_bf16() else None


def fixed_input(img=CHECK_IMG, channels_last=False):
    """The same image every time: smooth colour gradients with a few bright squares (edges for the convolutions),
    float 0-1, shape (1, 3, img, img). Made with numpy so that no RNG stream of the run is consumed."""
    y, x = np.mgrid[0:img, 0:img].astype(np.float32) / img
    im = np.stack([x, y, (x + y) / 2])
    for i, (a, b) in enumerate(((0.2, 0.3), (0.6, 0.1), (0.4, 0.7))):
        r0, c0, side = int(a * img), int(b * img), img // 6
        im[i % 3, r0:r0 + side, c0:c0 + side] = 1.0
    t = backend.from_numpy(np.ascontiguousarray(im[None]))
    return backend.to_channels_last(t) if channels_last else t


def _tensors(out):
    """Every tensor in a model's output (tensors, or lists/tuples of them, nested), in order."""
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return [out] if hasattr(out, "float") else []


def output_disagreement(model, device, dtype, channels_last=False):
    """The largest relative L2 difference between the model's fp32 and autocast(dtype) outputs on the fixed input,
    over its output tensors; inf when the autocast pass gives non-finite values. The model is put in eval mode for
    the two passes and back in its mode after."""
    x = fixed_input(channels_last=channels_last).to(device)
    was_training = model.training
    model.eval()
    try:
        with backend.no_grad():
            ref = _tensors(model(x))
            with backend.autocast(device, enabled=True, dtype=dtype):
                low = _tensors(model(x))
    finally:
        model.train(was_training)
    worst = 0.0
    for a, b in zip(low, ref):
        a, b = a.float(), b.float()
        if not bool(backend.torch.isfinite(a).all()):
            return float("inf")
        worst = max(worst, float((a - b).norm()) / max(float(b.norm()), 1e-12))
    return worst if len(low) == len(ref) and ref else float("inf")


def checked_dtype(model, device, dtype, channels_last=False):
    """dtype when the model's outputs under it agree with fp32 on the fixed input; None (fp32) with one warning line
    otherwise. Only CPU autocast is checked here (CUDA keeps the official behaviour)."""
    if dtype is None or model is None or backend.is_cuda(device):
        return dtype
    name = str(dtype).split(".")[-1]
    try:
        diff = output_disagreement(model, device, dtype, channels_last)
    except Exception as e:  # a kernel missing for this CPU or dtype: the run still trains, in fp32
        LOGGER.warning(f"WARNING ⚠️ AMP check: {name} autocast failed on the CPU ({type(e).__name__}: {e}); "
                       "training in fp32")
        return None
    if diff > TOLERANCE:
        LOGGER.warning(f"WARNING ⚠️ AMP check: {name} autocast outputs differ from fp32 by {diff:.3g} (relative, "
                       f"more than {TOLERANCE}) on a fixed input; training in fp32")
        return None
    LOGGER.info(f"AMP check: {name} autocast agrees with fp32 (relative difference {diff:.3g}) ✅")
    return dtype


def check_amp(model):
    """ultralytics' check_amp: True when fp16 autocast on the model's CUDA device gives the fp32 outputs on the fixed
    input (within TOLERANCE), so a CUDA run may train with AMP; False on the CPU, as ultralytics answers there (this
    project's CPU bf16 is decided by checked_dtype)."""
    device = next(model.parameters()).device
    if not backend.is_cuda(device):
        return False
    try:
        return output_disagreement(model, device, backend.torch.float16) <= TOLERANCE
    except Exception as e:  # no fp16 kernel for some layer: train in fp32, as ultralytics falls back
        LOGGER.warning(f"WARNING ⚠️ AMP check: fp16 autocast failed ({type(e).__name__}: {e}); AMP off")
        return False
