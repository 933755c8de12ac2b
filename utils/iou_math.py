"""The IoU family's maths, the one home of the CIoU formula: the plain path of utils/iou.py, PyTorch's compiled
path (utils/backend/torch_ciou.py) and OneFlow's fused-kernel chain (utils/backend/oneflow_ciou.py, for corner
input) all run this code. Written with tensor methods only, so it imports no framework and works on either.

Operation for operation the ultralytics formula, so the loss matches the official one; alpha is detached (a
weight, not a path for gradients, as the official code's no_grad block makes it).
"""
import math


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


def bbox_iou_math(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7):
    """IoU (or GIoU / DIoU / CIoU) of box1 against box2, broadcasting, returning (..., 1)."""
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
            v = (4 / math.pi ** 2) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2)
            alpha = (v / (v - iou + (1 + eps))).detach()
            return iou - (rho2 / c2 + v * alpha)
        return iou - rho2 / c2
    c_area = cw * ch + eps
    return iou - (c_area - union) / c_area  # GIoU https://arxiv.org/pdf/1902.09630.pdf


def ciou_math(box1, box2, xywh: bool = True, eps: float = 1e-7):
    """The CIoU alone (what the loss uses and what torch.compile fuses)."""
    return bbox_iou_math(box1, box2, xywh, CIoU=True, eps=eps)
