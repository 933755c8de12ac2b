"""The training augmentations of ultralytics' classify/train.py (its albumentations pipeline), in numpy and cv2 so
that nothing is installed or downloaded: RandomResizedCrop (scale 0.08-1, aspect 3/4-4/3, cv2 INTER_LINEAR),
horizontal flip (p 0.5), colour jitter (brightness, contrast, saturation 0.4 each, no hue, in a random order).
The ImageNet normalisation comes after, on the device (utils/tasks/classify.py: normalize_images).

Random numbers come from numpy's global generator: the loader seeds it per worker (utils/data/loader.py), and a
resumed run restores it (--workers 0 replays a run bit for bit)."""
import math

import cv2
import numpy as np

SCALE = (0.08, 1.0)  # crop area, as a fraction of the image
RATIO = (0.75, 1.0 / 0.75)  # crop aspect ratio (w / h)
HFLIP = 0.5
JITTER = 0.4  # brightness, contrast and saturation factors drawn from [1 - JITTER, 1 + JITTER]


def random_resized_crop_box(h, w, rng=np.random, scale=SCALE, ratio=RATIO, attempts=10):
    """(top, left, height, width) of a random crop with area in scale x image area and aspect ratio in ratio (log
    uniform); after `attempts` misses, the centred crop clipped to the ratio range (albumentations' rule)."""
    area = h * w
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(attempts):
        target = rng.uniform(*scale) * area
        aspect = math.exp(rng.uniform(*log_ratio))
        cw, ch = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(rng.randint(0, h - ch + 1)), int(rng.randint(0, w - cw + 1)), ch, cw
    in_ratio = w / h
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def _blend(im, other, factor):
    """im * factor + other * (1 - factor), rounded and clipped to uint8 (what each jitter step returns)."""
    return np.clip(im.astype(np.float32) * factor + other * (1.0 - factor) + 0.5, 0, 255).astype(np.uint8)


def colour_jitter(rgb, rng=np.random, strength=JITTER):
    """Brightness, contrast and saturation, each by a factor in [1 - strength, 1 + strength], in a random order."""
    if strength <= 0:
        return rgb
    factors = rng.uniform(1 - strength, 1 + strength, 3)
    for op in rng.permutation(3):
        f = float(factors[op])
        if op == 0:  # brightness: towards black
            rgb = _blend(rgb, np.float32(0.0), f)
        elif op == 1:  # contrast: towards the mean grey level
            rgb = _blend(rgb, np.float32(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).mean()), f)
        else:  # saturation: towards each pixel's grey
            rgb = _blend(rgb, cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)[..., None], f)
    return rgb


def train_transform(bgr, size, rng=np.random):
    """BGR uint8 HWC image -> augmented RGB uint8 CHW (size x size), before normalisation."""
    top, left, ch, cw = random_resized_crop_box(*bgr.shape[:2], rng=rng)
    crop = cv2.resize(bgr[top:top + ch, left:left + cw], (size, size), interpolation=cv2.INTER_LINEAR)
    rgb = crop[:, :, ::-1]
    if rng.random_sample() < HFLIP:
        rgb = rgb[:, ::-1]
    rgb = colour_jitter(np.ascontiguousarray(rgb), rng)
    return np.ascontiguousarray(rgb.transpose(2, 0, 1))
