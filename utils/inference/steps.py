"""The per-image steps every inference path shares (detect.py, val.py, Detector, AutoShape): images in, boxes in
original pixels out. Non-maximum suppression between them is utils.nms.non_max_suppression."""
import numpy as np

from utils.backend import channels_last_pays, from_numpy, to_channels_last, to_numpy, torch
from utils.boxes import scale_boxes


def preprocess(im, device, half=False):
    """Letterboxed uint8 RGB image(s), CHW or BCHW, numpy or tensor -> (b, 3, h, w) float tensor in [0, 1] on
    device (float16 with half), channels_last where the backend says that layout is faster (the CPU; same values)."""
    x = from_numpy(im) if isinstance(im, np.ndarray) else im
    x = x.to(device)
    x = x[None] if x.ndim == 3 else x
    if channels_last_pays(x.device, torch.float16 if half else torch.float32):
        x = to_channels_last(x)  # reordered while it is still 1-byte pixels; the conversions below keep the layout
    x = x.half() if half else x.float()
    return x / 255  # not in place: .float() of a float tensor is the caller's own tensor


def to_original(det, input_hw, im0_shape, ratio_pad=None):
    """Detections (n, 6) [xyxy, conf, cls] on the letterboxed input of size input_hw -> a float32 numpy copy with
    the boxes in original image pixels, clipped to it. ratio_pad: the loader's ((gain_h, gain_w), (pad_w, pad_h))
    when it letterboxed the image; None recomputes them from the two shapes (centred padding)."""
    det = (det if isinstance(det, np.ndarray) else to_numpy(det)).astype(np.float32)  # astype copies
    if len(det):
        scale_boxes(input_hw, det[:, :4], im0_shape, ratio_pad)
    return det
