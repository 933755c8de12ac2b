"""Box conversions between corner (xyxy), centre (xywh) and normalized forms, clipping, and scaling back from a
letterboxed image. They work on numpy arrays and framework tensors alike and import no framework."""
import numpy as np


def _clone(x):
    return x.clone() if hasattr(x, "clone") else np.copy(x)


def xyxy2xywh(x):
    y = _clone(x)
    y[..., 0] = (x[..., 0] + x[..., 2]) / 2
    y[..., 1] = (x[..., 1] + x[..., 3]) / 2
    y[..., 2] = x[..., 2] - x[..., 0]
    y[..., 3] = x[..., 3] - x[..., 1]
    return y


def xywh2xyxy(x):
    y = _clone(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2
    y[..., 1] = x[..., 1] - x[..., 3] / 2
    y[..., 2] = x[..., 0] + x[..., 2] / 2
    y[..., 3] = x[..., 1] + x[..., 3] / 2
    return y


def xywhn2xyxy(x, w=640, h=640, padw=0, padh=0):
    y = _clone(x)
    y[..., 0] = w * (x[..., 0] - x[..., 2] / 2) + padw
    y[..., 1] = h * (x[..., 1] - x[..., 3] / 2) + padh
    y[..., 2] = w * (x[..., 0] + x[..., 2] / 2) + padw
    y[..., 3] = h * (x[..., 1] + x[..., 3] / 2) + padh
    return y


def xyxy2xywhn(x, w=640, h=640, clip=False, eps=0.0):
    if clip:
        x = _clone(x)
        clip_boxes(x, (h - eps, w - eps))
    y = _clone(x)
    y[..., 0] = ((x[..., 0] + x[..., 2]) / 2) / w
    y[..., 1] = ((x[..., 1] + x[..., 3]) / 2) / h
    y[..., 2] = (x[..., 2] - x[..., 0]) / w
    y[..., 3] = (x[..., 3] - x[..., 1]) / h
    return y


def xyn2xy(x, w=640, h=640, padw=0, padh=0):
    y = _clone(x)
    y[..., 0] = w * x[..., 0] + padw
    y[..., 1] = h * x[..., 1] + padh
    return y


def clip_boxes(boxes, shape):
    """Clip xyxy boxes in place to an image of shape (h, w)."""
    if isinstance(boxes, np.ndarray):
        boxes[..., [0, 2]] = boxes[..., [0, 2]].clip(0, shape[1])
        boxes[..., [1, 3]] = boxes[..., [1, 3]].clip(0, shape[0])
    else:
        boxes[..., 0].clamp_(0, shape[1])
        boxes[..., 1].clamp_(0, shape[0])
        boxes[..., 2].clamp_(0, shape[1])
        boxes[..., 3].clamp_(0, shape[0])
    return boxes


def clip_segments(segments, shape):
    """Clip polygon points (..., 2) xy in place to an image of shape (h, w)."""
    if isinstance(segments, np.ndarray):
        segments[..., 0] = segments[..., 0].clip(0, shape[1])
        segments[..., 1] = segments[..., 1].clip(0, shape[0])
    else:
        segments[..., 0].clamp_(0, shape[1])
        segments[..., 1].clamp_(0, shape[0])
    return segments


def scale_boxes(img1_shape, boxes, img0_shape, ratio_pad=None):
    """Map xyxy boxes from a letterboxed image of shape img1_shape back to the original img0_shape."""
    if ratio_pad is None:
        gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
        pad = (img1_shape[1] - img0_shape[1] * gain) / 2, (img1_shape[0] - img0_shape[0] * gain) / 2
    else:
        gain = ratio_pad[0][0]
        pad = ratio_pad[1]
    boxes[..., [0, 2]] -= pad[0]
    boxes[..., [1, 3]] -= pad[1]
    boxes[..., :4] /= gain
    clip_boxes(boxes, img0_shape)
    return boxes
