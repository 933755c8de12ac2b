"""bbox_iou: IoU, GIoU, DIoU and CIoU of matched box pairs, plain and fused (``--bbox_iou_optim``).

The plain path is the ultralytics formula, operation for operation, so the loss matches the official one.
The fused path replaces the ~30 small element-wise kernels of CIoU (each a launch and a round trip through
GPU memory) with a few fused ones:

* OneFlow + CUDA: the ``flow._C.fused_get_*`` chain (``ciou_fused_chain``). The chain is written against an
  ``ops`` namespace so tests can run it with CPU stand-ins of the same signatures: the real kernels exist only
  for CUDA, and a wrong argument order (the coordinate op returns x1, x2, y1, y2 - not x1, y1, x2, y2) would
  otherwise only show on a GPU.
* PyTorch + CUDA: a hand-written Triton kernel pair (utils/ciou_triton.py: forward, and a backward that is the
  hand derivative with autograd's conventions). Fallback, or with YOLO_FUSED_CIOU=compile: the same maths
  through ``torch.compile(dynamic=True)``; inductor fuses forward and backward, and dynamic shapes mean the
  number of matched targets, which changes every step, does not trigger a recompile.
* Anywhere else (CPU): the plain maths, with a one-time notice. GIoU/DIoU/IoU always take the plain path.
"""
import math

from utils.backend import IS_ONEFLOW, IS_TORCH, has_fused_bbox_ops, is_cuda, torch

__all__ = ["bbox_iou", "ciou_fused_chain", "ciou_compiled", "set_fused_default", "fused_backend_name"]

_FUSED_DEFAULT = False  # what fused=None means; train.py flips it for --bbox_iou_optim
_NOTICED = set()


def set_fused_default(flag):
    """Make ``bbox_iou(..., fused=None)`` use the fused CIoU path (what --bbox_iou_optim does)."""
    global _FUSED_DEFAULT
    _FUSED_DEFAULT = bool(flag)


def _notice_once(key, msg):
    if key not in _NOTICED:
        _NOTICED.add(key)
        from utils.general import LOGGER  # late: general imports much more than this module needs
        LOGGER.info(msg)


def _corners_and_sizes(box1, box2, xywh, eps):
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
    (b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2), (w1, h1, w2, h2) = _corners_and_sizes(box1, box2, xywh, eps)
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


def ciou_fused_chain(box1, box2, xywh=True, eps=1e-7, ops=None):
    """CIoU through OneFlow's fused kernels. ``ops`` defaults to ``flow._C``; tests pass CPU stand-ins.

    Signatures (OneFlow 0.9.0): the coordinate op returns b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2,
    and every op after it takes the eight coordinates in that x1, x2 order; fused_get_ciou_result returns
    (ciou, alpha) with alpha already treated as a constant in its backward.
    """
    if ops is None:
        ops = torch._C
    if xywh:
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        coords = ops.fused_get_boundding_boxes_coord(x1, y1, w1, h1, x2, y2, w2, h2)
        b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2 = coords
    else:
        (b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2), (w1, h1, w2, h2) = \
            _corners_and_sizes(box1, box2, False, eps)
    inter = ops.fused_get_intersection_area(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2)
    iou = ops.fused_get_iou(w1, h1, w2, h2, inter, eps)
    c2 = ops.fused_get_convex_diagonal_squared(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2, eps)
    rho2 = ops.fused_get_center_dist(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2)
    v = ops.fused_get_ciou_diagonal_angle(w1, h1, w2, h2, eps)
    return ops.fused_get_ciou_result(v, iou, rho2, c2, eps)[0]


def _ciou_math(box1, box2, xywh: bool, eps: float):
    """The plain CIoU written for torch.compile: alpha detached instead of a no_grad block (same gradients)."""
    (b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2), (w1, h1, w2, h2) = _corners_and_sizes(box1, box2, xywh, eps)
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
    """PyTorch: CIoU through torch.compile with dynamic shapes (compiled on first use, then reused for any N).
    Works on any device inductor supports; bbox_iou only routes CUDA tensors here."""
    global _COMPILED
    if _COMPILED is None:
        _notice_once("compile", "bbox_iou_optim: compiling the fused CIoU (once, dynamic shapes)...")
        _COMPILED = torch.compile(_ciou_math, dynamic=True)
    return _COMPILED(box1, box2, xywh, eps)


def _triton_available():
    """Inductor needs Triton for CUDA code; look for it without importing it (it is large and optional)."""
    import importlib.util
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


_TRITON = None  # the loaded utils.ciou_triton.ciou_triton, or False when it failed to load


def _load_triton_ciou():
    """Guarded, lazy import of the Triton kernel module (triton is optional and large)."""
    global _TRITON
    if _TRITON is None:
        try:
            from utils.ciou_triton import ciou_triton
            _TRITON = ciou_triton
        except Exception as e:  # no triton, or a triton too old for the kernel
            _TRITON = False
            _notice_once("triton", f"bbox_iou_optim: Triton CIoU kernel unavailable ({type(e).__name__}: {e}); "
                                   "using torch.compile")
    return _TRITON or None


def fused_backend_name(device):
    """Which implementation bbox_iou(..., CIoU=True, fused=True) uses for tensors on ``device``:
    'oneflow-fused-kernels', 'triton' (hand-written kernel, PyTorch + CUDA), 'torch-compile' or 'plain'.
    YOLO_FUSED_CIOU=plain|compile|triton overrides the choice for PyTorch + CUDA (plain: a way out anywhere)."""
    import os
    choice = os.environ.get("YOLO_FUSED_CIOU", "").lower()
    if choice == "plain":
        return "plain"
    if has_fused_bbox_ops(device):
        return "oneflow-fused-kernels"
    if IS_TORCH and is_cuda(device) and _triton_available():
        if choice == "compile" and hasattr(torch, "compile"):
            return "torch-compile"
        if _load_triton_ciou() is not None:
            return "triton"
        if hasattr(torch, "compile"):
            return "torch-compile"
    return "plain"


def bbox_iou(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7, fused=None):
    """IoU of box1 (n,4) against box2 (n,4) (or broadcastable shapes), returning (n,1).

    fused=None follows set_fused_default (off unless --bbox_iou_optim). The fused path covers CIoU on same-shaped
    CUDA tensors; every other case (GIoU/DIoU/IoU, broadcasting, CPU) runs the plain maths.
    """
    if fused is None:
        fused = _FUSED_DEFAULT
    if fused and CIoU:
        impl = fused_backend_name(box1.device)
        if impl == "plain":
            _notice_once(("plain", box1.device.type),
                         f"bbox_iou_optim: no fused CIoU kernel for {box1.device.type} tensors on "
                         f"{'OneFlow' if IS_ONEFLOW else 'PyTorch'}; using the plain (identical) maths.")
        elif box1.shape == box2.shape:  # the fused kernels take matched pairs, not broadcasts
            if impl == "oneflow-fused-kernels":
                return ciou_fused_chain(box1, box2, xywh, eps)
            if impl == "triton":
                return _load_triton_ciou()(box1, box2, xywh, eps)
            return ciou_compiled(box1, box2, xywh, eps)
    return _bbox_iou_plain(box1, box2, xywh, GIoU, DIoU, CIoU, eps)
