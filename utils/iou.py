"""bbox_iou: IoU, GIoU, DIoU and CIoU of matched box pairs, plain and fused (``--bbox_iou_optim``).

The plain path is the ultralytics formula, operation for operation, so the loss matches the official one.
The fused path replaces the ~30 small element-wise kernels of CIoU (each a launch and a round trip through
GPU memory) with a few fused ones, which the backend provides (``backend.fused_ciou``):

* OneFlow + CUDA: the ``flow._C.fused_get_*`` chain (utils/backend/oneflow_ciou.py).
* PyTorch + CUDA: a hand-written Triton kernel pair (utils/backend/torch_ciou_triton.py: forward, and a backward
  that is the hand derivative with autograd's conventions). Fallback, or with YOLO_FUSED_CIOU=compile: the same
  maths through ``torch.compile(dynamic=True)`` (utils/backend/torch_ciou.py).
* Anywhere else (CPU): the plain maths, with a one-time notice. GIoU/DIoU/IoU always take the plain path.

The loss asks once, when it is built, for the CIoU function to call (``ciou_function``); ``bbox_iou(fused=True)``
asks on each call, for direct use.
"""
import math
from functools import partial

from utils import backend
from utils.backend import torch
from utils.backend_choice import BACKEND_NAMES

__all__ = ["bbox_iou", "ciou_function", "fused_backend_name", "corners_and_sizes"]

_NOTICED = set()


def notice_once(key, msg):
    if key not in _NOTICED:
        _NOTICED.add(key)
        from utils.general import LOGGER  # late: general imports much more than this module needs
        LOGGER.info(msg)


def corners_and_sizes(box1, box2, xywh, eps):
    """Return (b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2), (w1, h1, w2, h2) as ultralytics does."""
    if xywh:  # centre, size -> corners
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1 = (x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_)
        b2 = (x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_)
    else:  # corners; heights clamped so the CIoU aspect term never divides by zero
        b1_x1, b1_y1, b1_x2, b1_y2 = box1.chunk(4, -1)
        b2_x1, b2_y1, b2_x2, b2_y2 = box2.chunk(4, -1)
        w1, h1 = b1_x2 - b1_x1, (b1_y2 - b1_y1).clamp(eps)
        w2, h2 = b2_x2 - b2_x1, (b2_y2 - b2_y1).clamp(eps)
        b1 = (b1_x1, b1_x2, b1_y1, b1_y2)
        b2 = (b2_x1, b2_x2, b2_y1, b2_y2)
    return b1 + b2, (w1, h1, w2, h2)


def _bbox_iou_plain(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7):
    corners, (w1, h1, w2, h2) = corners_and_sizes(box1, box2, xywh, eps)
    b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2 = corners
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * \
            (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    if not (CIoU or DIoU or GIoU):
        return iou
    cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)  # smallest enclosing box
    ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
    if CIoU or DIoU:  # https://arxiv.org/abs/1911.08287v1
        c2 = cw.pow(2) + ch.pow(2) + eps  # enclosing diagonal squared
        rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4  # centre dist^2
        if CIoU:
            v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
            with torch.no_grad():  # alpha is a weight, not a path for gradients (as in the official code)
                alpha = v / (v - iou + (1 + eps))
            return iou - (rho2 / c2 + v * alpha)
        return iou - rho2 / c2
    c_area = cw * ch + eps
    return iou - (c_area - union) / c_area  # GIoU https://arxiv.org/pdf/1902.09630.pdf


def fused_backend_name(device):
    """Which implementation the fused CIoU uses for tensors on ``device``: 'oneflow-fused-kernels', 'triton'
    (PyTorch + CUDA), 'torch-compile' or 'plain'. YOLO_FUSED_CIOU=plain|compile|triton overrides the choice for
    PyTorch + CUDA (plain: a way out anywhere)."""
    return backend.fused_ciou(device)[0]


def ciou_function(device, fused):
    """The CIoU of matched pairs, fn(box1, box2, xywh=True, eps=1e-7) -> (n, 1), for boxes on ``device``, chosen
    once: the backend's fused implementation when ``fused`` (the --bbox_iou_optim flag) and one exists there,
    else the plain maths (with a one-time notice when the flag asked for more)."""
    if fused:
        _, fn = backend.fused_ciou(device)
        if fn is not None:
            return partial(_matched_pairs, fn)
        dev_type = getattr(device, "type", str(device))
        notice_once(("plain", dev_type), f"bbox_iou_optim: no fused CIoU kernel for {dev_type} tensors on "
                                         f"{BACKEND_NAMES[backend.BACKEND]}; using the plain (identical) maths.")
    return _ciou_plain


def _ciou_plain(box1, box2, xywh=True, eps=1e-7):
    return _bbox_iou_plain(box1, box2, xywh, CIoU=True, eps=eps)


def _matched_pairs(fused_fn, box1, box2, xywh=True, eps=1e-7):
    """The fused kernels take matched pairs, not broadcasts: other shapes take the plain maths."""
    if box1.shape == box2.shape:
        return fused_fn(box1, box2, xywh, eps)
    return _ciou_plain(box1, box2, xywh, eps)


def bbox_iou(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7, fused=False):
    """IoU of box1 (n,4) against box2 (n,4) (or broadcastable shapes), returning (n,1).

    fused=True: CIoU through ``ciou_function`` (same-shaped tensors on a device with a fused kernel); every other
    case (GIoU/DIoU/IoU, broadcasting, CPU) runs the plain maths.
    """
    if fused and CIoU:
        return ciou_function(box1.device, True)(box1, box2, xywh, eps)
    return _bbox_iou_plain(box1, box2, xywh, GIoU, DIoU, CIoU, eps)
