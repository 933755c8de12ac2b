"""ultralytics' formulation of the training item, step by step: the reference that the production loader
(utils/data) is compared with, by the tests (same draws -> same labels, nearly the same pixels) and by
benchmarks/loader.py --classic (how much the fused path saves).

It differs from LoadImagesAndLabels in exactly the places the fast path changed: the mosaic always pastes tiles
into a 2s canvas and warps the whole canvas; HSV uses ultralytics' three lookup tables on BGR; flips are numpy views
and the BGR->RGB CHW copy comes last; full-size images are read with cv2.imread.
"""
import random
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from utils.data.dataset import LoadImagesAndLabels  # noqa: E402


def augment_hsv_lut(im, hgain=0.5, sgain=0.5, vgain=0.5):
    """ultralytics' HSV jitter: one uniform(-1, 1, 3) draw scaled by the gains, + 1, applied to a BGR image in place
    through three 256-entry lookup tables (hue wraps at 180, saturation and value clip at 255)."""
    r = np.random.uniform(-1, 1, 3) * [hgain, sgain, vgain] + 1
    if hgain or sgain or vgain:
        x = np.arange(0, 256, dtype=r.dtype)
        lut = np.empty((1, 256, 3), np.uint8)
        lut[0, :, 0] = ((x * r[0]) % 180).astype(np.uint8)
        lut[0, :, 1] = np.clip(x * r[1], 0, 255).astype(np.uint8)
        lut[0, :, 2] = np.clip(x * r[2], 0, 255).astype(np.uint8)
        hsv = cv2.LUT(cv2.cvtColor(im, cv2.COLOR_BGR2HSV), lut)
        cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR, dst=im)
    return im


class ClassicLoadImagesAndLabels(LoadImagesAndLabels):
    """LoadImagesAndLabels computed the way ultralytics/yolov5 computes it (same arguments, same items)."""

    fused_mosaic = False

    def _read_file(self, f, reduce=1):
        if reduce != 1:  # never asked for: source_image serves the fused mosaic only
            return super()._read_file(f, reduce)
        im = cv2.imread(f)
        if im is None:
            raise FileNotFoundError(f"Image Not Found {f}")
        return im

    def augment_colour(self, im):
        """Stays BGR (flip_and_format converts)."""
        hyp = self.hyp
        return augment_hsv_lut(im, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"])

    def flip_and_format(self, im, labels):
        if not self.augment:
            return super().flip_and_format(im, labels)
        hyp = self.hyp
        if random.random() < hyp["flipud"]:
            im = np.flipud(im)
            if len(labels):
                labels[:, 2] = 1 - labels[:, 2]
        if random.random() < hyp["fliplr"]:
            im = np.fliplr(im)
            if len(labels):
                labels[:, 1] = 1 - labels[:, 1]
        return np.ascontiguousarray(im.transpose((2, 0, 1))[::-1]).transpose(1, 2, 0), labels  # a CHW copy
