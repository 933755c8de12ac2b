"""The fused CIoU on PyTorch: the hand-written Triton kernel pair (torch_ciou_triton.py) when it loads, else the
plain maths through ``torch.compile(dynamic=True)``: inductor fuses forward and backward, and dynamic shapes mean the
number of matched targets, which changes every step, does not trigger a recompile. torch_backend.fused_ciou chooses;
this module is imported only then (triton is large and optional)."""
import math

import torch

from utils.iou import corners_and_sizes, notice_once


def _ciou_math(box1, box2, xywh: bool, eps: float):
    """The plain CIoU written for torch.compile: alpha detached instead of a no_grad block (same gradients)."""
    corners, (w1, h1, w2, h2) = corners_and_sizes(box1, box2, xywh, eps)
    b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2 = corners
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * \
            (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
    ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
    c2 = cw.pow(2) + ch.pow(2) + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4
    v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    alpha = (v / (v - iou + (1 + eps))).detach()
    return iou - (rho2 / c2 + v * alpha)


_COMPILED = None


def ciou_compiled(box1, box2, xywh=True, eps=1e-7):
    """CIoU through torch.compile with dynamic shapes (compiled on first use, then reused for any N). Works on any
    device inductor supports; the fused path only routes CUDA tensors here."""
    global _COMPILED
    if _COMPILED is None:
        notice_once("compile", "bbox_iou_optim: compiling the fused CIoU (once, dynamic shapes)...")
        _COMPILED = torch.compile(_ciou_math, dynamic=True)
    return _COMPILED(box1, box2, xywh, eps)


_TRITON = None  # the loaded torch_ciou_triton.ciou_triton, or False when it failed to load


def load_triton_ciou():
    """The Triton CIoU, or None when triton is missing or too old for the kernel (said once)."""
    global _TRITON
    if _TRITON is None:
        try:
            from utils.backend.torch_ciou_triton import ciou_triton
            _TRITON = ciou_triton
        except Exception as e:
            _TRITON = False
            notice_once("triton", f"bbox_iou_optim: Triton CIoU kernel unavailable ({type(e).__name__}: {e}); "
                                  "using torch.compile")
    return _TRITON or None
