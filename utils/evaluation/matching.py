"""One image's predictions against its labels, in original image pixels."""
import numpy as np

from utils.boxes import scale_boxes, xywh2xyxy
from utils.inference.steps import to_original
from utils.metrics import match_predictions


def labels_in_pixels(targets, input_hw):
    """The loader's targets (m, 6) [image index, cls, x, y, w, h] normalized to the input -> a float32 numpy copy
    with x, y, w, h in pixels of the letterboxed input (height, width)."""
    from utils.backend import to_numpy  # framework choice: numpy targets need none
    t = (targets if isinstance(targets, np.ndarray) else to_numpy(targets)).astype(np.float32)
    h, w = input_hw
    t[:, 2:] *= np.array((w, h, w, h), np.float32)
    return t


def match_image(pred, labels, im_hw, shape0, ratio_pad, iouv):
    """One image's true positives: pred (n, 6) [xyxy, conf, cls] and labels (m, 5) [cls, xywh] in pixels of the
    letterboxed input of size im_hw are mapped back to the original image (shape0, ratio_pad from the loader) and
    matched at each IoU threshold. Returns correct (n, T) bool, predn (n, 6) and labelsn (m, 5) [cls, xyxy]."""
    predn = to_original(pred, im_hw, shape0, ratio_pad)
    tbox = xywh2xyxy(labels[:, 1:5])
    scale_boxes(im_hw, tbox, shape0, ratio_pad)
    labelsn = np.concatenate((labels[:, 0:1], tbox), 1)
    return match_predictions(predn, labelsn, iouv), predn, labelsn
