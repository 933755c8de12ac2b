"""The fused CIoU on PyTorch: the hand-written Triton kernel pair (torch_ciou_triton.py) when it loads, else the
plain maths (utils/iou_math.py) through ``torch.compile(dynamic=True)``: inductor fuses forward and backward, and
dynamic shapes mean the number of matched targets, which changes every step, does not trigger a recompile.
torch_backend.fused_ciou chooses; triton (large and optional) is imported only then."""
import torch

from utils.iou_math import ciou_math
from utils.log import notice_once

_COMPILED = None


def ciou_compiled(box1, box2, xywh=True, eps=1e-7):
    """CIoU through torch.compile with dynamic shapes (compiled on first use, then reused for any N). Works on any
    device inductor supports; the fused path only routes CUDA tensors here."""
    global _COMPILED
    if _COMPILED is None:
        notice_once("compile", "bbox_iou_optim: compiling the fused CIoU (once, dynamic shapes)...")
        _COMPILED = torch.compile(ciou_math, dynamic=True)
    return _COMPILED(box1, box2, xywh, eps)


_TRITON = None  # the loaded torch_ciou_triton.ciou_triton, or False when it failed to load


def load_triton_ciou():
    """The Triton CIoU, or None when triton is missing or too old for the kernel (said once)."""
    global _TRITON
    if _TRITON is None:
        try:
            from utils.backend.torch_ciou_triton import ciou_triton  # optional dependency: triton
            _TRITON = ciou_triton
        except Exception as e:
            _TRITON = False
            notice_once("triton", f"bbox_iou_optim: Triton CIoU kernel unavailable ({type(e).__name__}: {e}); "
                                  "using torch.compile")
    return _TRITON or None
