"""bbox_iou: IoU, GIoU, DIoU and CIoU of matched box pairs, plain and fused (``--bbox_iou_optim``).

The plain path is the ultralytics formula, operation for operation (utils/iou_math.py, its one home), so the loss
matches the official one.
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
from functools import partial

from utils import backend
from utils.backend_choice import BACKEND_NAMES
from utils.iou_math import bbox_iou_math, ciou_math
from utils.log import notice_once

__all__ = ["bbox_iou", "ciou_function", "fused_backend_name"]


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


_ciou_plain = ciou_math  # the plain maths (utils/iou_math.py), shared with both backends' fused paths


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
    return bbox_iou_math(box1, box2, xywh, GIoU, DIoU, CIoU, eps)
