"""ultralytics' import path for the polygon-aware augmentations, kept for users' scripts:
`from utils.segment.augmentations import mixup, random_perspective`. No library module imports this facade; the
work is detection's, which carries polygons already (the polygon dataset, utils/segment/dataset.py, calls it):

    utils/augmentations.py   mixup (image and labels; the polygons are joined here), random_perspective
                             (return_segments=True: the kept instances' polygons, resampled to 1000 points)

The random draws are the official ones in the official order, so a seeded run warps as the official one does.
"""
import numpy as np

from utils.augmentations import mixup as _mixup
from utils.augmentations import random_perspective as _random_perspective

_POINTS = 1000  # what resample_segments gives each polygon before the warp (the official shape (n, 1000, 2))


def mixup(im, labels, segments, im2, labels2, segments2):
    """MixUp of two images with their labels and polygons: (im, labels, segments) joined, beta(32, 32) ratio."""
    im, labels = _mixup(im, labels, im2, labels2)
    joined = [*segments, *segments2]
    if len({np.shape(s) for s in joined}) > 1:  # polygons of different lengths: one array cannot hold them
        return im, labels, joined               # (official np.concatenate raises there; a list loses nothing)
    return im, labels, np.array(joined)


def random_perspective(im, targets=(), segments=(), degrees=10, translate=0.1, scale=0.1, shear=10, perspective=0.0,
                       border=(0, 0)):
    """Warp an image, its targets (n, 5) [cls, xyxy pixels] and their polygons (n, k, 2) in pixels. Returns (im,
    targets kept, their polygons as one (kept, 1000, 2) array); with no targets the polygons are [], as official.
    Box labels (no polygon per target) are warped as boxes and get their outlines as polygons."""
    n = len(targets)
    im, targets, kept = _random_perspective(im, targets, segments, degrees=degrees, translate=translate, scale=scale,
                                            shear=shear, perspective=perspective, border=border, return_segments=True)
    if not n:
        return im, targets, []
    return im, targets, np.stack(kept) if kept else np.zeros((0, _POINTS, 2))


__all__ = ["mixup", "random_perspective"]
