"""Image augmentations with ultralytics/yolov5 semantics (the same hyp keys mean the same thing).

Speed notes (why the code looks the way it does):
- The random affine is drawn by ``random_affine_matrix`` with exactly the ultralytics distribution, but it is
  returned as a matrix so the mosaic can compose it with each tile's placement and warp every source image
  ONCE, straight into the output (see ``warp_into``), instead of resize -> 2x canvas -> warpPerspective.
- HSV jitter is one ``cv2.transform`` between two colour conversions (no split/LUT/merge), and the second
  conversion can emit RGB directly so the BGR->RGB flip costs nothing.
- Each tile is warped over its own bounding box only (``warp_into``), with the exact matrix: the pixels are
  warpAffine's, where the labels say. (A cv2.resize shortcut for pure scale + translation, ~3x faster per tile,
  placed tiles up to half a pixel off their labels: a silent error in every training image.)

The official names for classification (classify_transforms, CenterCrop, ToTensor, denormalize, IMAGENET_MEAN/STD) and
the optional albumentations pipelines (Albumentations, classify_albumentations) are at the end. This module loads no
framework: ToTensor and classify_transforms ask utils.backend for it when they make a tensor, so the plot helpers
(forked before the framework's import) may import it.
"""
import math
import random
import re

import cv2
import numpy as np

from utils.boxes import xywhn2xyxy, xyxy2xywhn  # noqa: F401  (re-exported for callers that expect them here)
from utils.log import LOGGER, colorstr

GREY = (114, 114, 114)


# ----------------------------------------------------------------------------------------------------------------
# Colour
def augment_hsv(im, hgain=0.5, sgain=0.5, vgain=0.5, to_rgb=False):
    """HSV colour-space augmentation of a BGR image (ultralytics' gains: one uniform(-1, 1, 3) draw scaled by the
    hsv_h/s/v hyps, + 1). Modifies im in place and returns it, or returns a new RGB image when to_rgb.

    ultralytics applies the gains with three 256-entry LUTs: hue (x * g) % 180, sat/val clip(x * g, 0, 255), each
    truncated. Here one cv2.transform does floor(x * g) for all three channels at once (6x faster than the LUTs,
    identical up to float rounding of 1 level): saturation gives the clip, and the hue wrap needs no `% 180`
    because OpenCV's HSV->BGR already wraps hues >= 180 (h * 6/180 >= 6 -> h - 6)."""
    r = np.random.uniform(-1, 1, 3) * [hgain, sgain, vgain] + 1  # random gains (drawn even when all are 0)
    if not (hgain or sgain or vgain):
        return cv2.cvtColor(im, cv2.COLOR_BGR2RGB) if to_rgb else im
    hsv = cv2.cvtColor(im, cv2.COLOR_BGR2HSV)
    m = np.array([[r[0], 0, 0, -0.5], [0, r[1], 0, -0.5], [0, 0, r[2], -0.5]])  # round(x*g - .5) = floor(x*g)
    hsv = cv2.transform(hsv, m)
    if to_rgb:
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR, dst=im)
    return im


# ----------------------------------------------------------------------------------------------------------------
# Letterbox
def letterbox(im, new_shape=(640, 640), color=GREY, auto=True, scaleFill=False, scaleup=True, stride=32):
    """Resize keeping the aspect ratio and pad to new_shape (to a stride multiple when auto).
    Returns (im, (ratio_w, ratio_h), (dw, dh)) where dw/dh are the padding on ONE side (may be .5)."""
    shape = im.shape[:2]  # (h, w)
    if isinstance(new_shape, int):
        new_shape = (new_shape, new_shape)
    r = min(new_shape[0] / shape[0], new_shape[1] / shape[1])
    if not scaleup:  # only scale down (better val mAP)
        r = min(r, 1.0)
    ratio = r, r
    new_unpad = int(round(shape[1] * r)), int(round(shape[0] * r))
    dw, dh = new_shape[1] - new_unpad[0], new_shape[0] - new_unpad[1]
    if auto:  # minimum rectangle
        dw, dh = np.mod(dw, stride), np.mod(dh, stride)
    elif scaleFill:  # stretch
        dw, dh = 0.0, 0.0
        new_unpad = (new_shape[1], new_shape[0])
        ratio = new_shape[1] / shape[1], new_shape[0] / shape[0]
    dw /= 2
    dh /= 2
    if shape[::-1] != new_unpad:
        im = cv2.resize(im, new_unpad, interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    im = cv2.copyMakeBorder(im, top, bottom, left, right, cv2.BORDER_CONSTANT, value=color)
    return im, ratio, (dw, dh)


# ----------------------------------------------------------------------------------------------------------------
# Random affine / perspective
def random_affine_matrix(in_hw, out_hw, degrees=10, translate=0.1, scale=0.1, shear=10, perspective=0.0):
    """Draw ultralytics' random perspective matrix M (3x3) mapping an input of size in_hw=(h, w) to an output of
    size out_hw. Same draws in the same order as ultralytics (P, R+scale, S, T), so the distribution is identical.
    Returns (M, s) where s is the drawn scale (used by the box candidate filter)."""
    height, width = out_hw
    C = np.eye(3)
    C[0, 2] = -in_hw[1] / 2  # x translation (pixels)
    C[1, 2] = -in_hw[0] / 2  # y translation (pixels)

    P = np.eye(3)
    P[2, 0] = random.uniform(-perspective, perspective)  # x perspective (about y)
    P[2, 1] = random.uniform(-perspective, perspective)  # y perspective (about x)

    R = np.eye(3)
    a = random.uniform(-degrees, degrees)
    s = random.uniform(1 - scale, 1 + scale)
    R[:2] = cv2.getRotationMatrix2D(angle=a, center=(0, 0), scale=s)

    S = np.eye(3)
    S[0, 1] = math.tan(random.uniform(-shear, shear) * math.pi / 180)  # x shear (deg)
    S[1, 0] = math.tan(random.uniform(-shear, shear) * math.pi / 180)  # y shear (deg)

    T = np.eye(3)
    T[0, 2] = random.uniform(0.5 - translate, 0.5 + translate) * width  # x translation (pixels)
    T[1, 2] = random.uniform(0.5 - translate, 0.5 + translate) * height  # y translation (pixels)

    return T @ S @ R @ P @ C, s  # order of operations (right to left) is IMPORTANT


def transform_boxes(boxes, M, out_hw):
    """Map xyxy boxes (n, 4) through M (3x3) and return the clipped axis-aligned xyxy boxes of the 4 corners."""
    n = len(boxes)
    if n == 0:
        return np.zeros((0, 4), np.float32)
    xy = np.ones((n * 4, 3))
    xy[:, :2] = boxes[:, [0, 1, 2, 3, 0, 3, 2, 1]].reshape(n * 4, 2)  # x1y1, x2y2, x1y2, x2y1
    xy = xy @ M.T
    xy = (xy[:, :2] / xy[:, 2:3] if M[2, 0] or M[2, 1] else xy[:, :2]).reshape(n, 8)
    x, y = xy[:, [0, 2, 4, 6]], xy[:, [1, 3, 5, 7]]
    new = np.concatenate((x.min(1), y.min(1), x.max(1), y.max(1))).reshape(4, n).T
    new[:, [0, 2]] = new[:, [0, 2]].clip(0, out_hw[1])
    new[:, [1, 3]] = new[:, [1, 3]].clip(0, out_hw[0])
    return new


def transform_segments(segments, M, out_hw):
    """Map polygon segments through M; returns (boxes xyxy clipped, segments transformed)."""
    segments = resample_segments(segments)
    n = len(segments)
    new = np.zeros((n, 4))
    out = []
    for i, segment in enumerate(segments):
        xy = np.ones((len(segment), 3))
        xy[:, :2] = segment
        xy = xy @ M.T
        xy = xy[:, :2] / xy[:, 2:3] if M[2, 0] or M[2, 1] else xy[:, :2]
        new[i] = segment2box(xy, out_hw[1], out_hw[0])
        out.append(xy)
    return new, out


def random_perspective(im, targets=(), segments=(), degrees=10, translate=0.1, scale=0.1, shear=10, perspective=0.0,
                       border=(0, 0), return_segments=False):
    """ultralytics' random_perspective: targets (n, 5) [cls, x1, y1, x2, y2] in pixels. Returns (im, targets), and
    with return_segments the kept targets' transformed polygons as a third value (segmentation training)."""
    height = im.shape[0] + border[0] * 2
    width = im.shape[1] + border[1] * 2
    M, s = random_affine_matrix(im.shape[:2], (height, width), degrees, translate, scale, shear, perspective)
    if (border[0] != 0) or (border[1] != 0) or (M != np.eye(3)).any():  # image changed
        if perspective:
            im = cv2.warpPerspective(im, M, dsize=(width, height), borderValue=GREY)
        else:  # affine
            im = cv2.warpAffine(im, M[:2], dsize=(width, height), borderValue=GREY)
    targets = np.asarray(targets, dtype=np.float64).reshape(-1, 5) if len(targets) else np.zeros((0, 5))
    n = len(targets)
    kept = []
    if n:
        use_segments = any(x.any() for x in segments) and len(segments) == n
        if use_segments:
            new, moved = transform_segments(segments, M, (height, width))
        else:
            new = transform_boxes(targets[:, 1:5], M, (height, width))
        i = box_candidates(box1=targets[:, 1:5].T * s, box2=new.T, area_thr=0.01 if use_segments else 0.10)
        targets = targets[i]
        targets[:, 1:5] = new[i]
        if return_segments:  # box labels: the transformed boxes' outlines stand in for polygons
            kept = [moved[j] for j in np.flatnonzero(i)] if use_segments else \
                [b[[0, 1, 2, 1, 2, 3, 0, 3]].reshape(4, 2) for b in targets[:, 1:5]]
    return (im, targets, kept) if return_segments else (im, targets)


def box_candidates(box1, box2, wh_thr=2, ar_thr=100, area_thr=0.1, eps=1e-16):
    """Keep boxes (box1 before, box2 after augmentation, both (4, n)) that stay > wh_thr px wide and high, keep
    > area_thr of their (scaled) area and have an aspect ratio < ar_thr."""
    w1, h1 = box1[2] - box1[0], box1[3] - box1[1]
    w2, h2 = box2[2] - box2[0], box2[3] - box2[1]
    ar = np.maximum(w2 / (h2 + eps), h2 / (w2 + eps))
    return (w2 > wh_thr) & (h2 > wh_thr) & (w2 * h2 / (w1 * h1 + eps) > area_thr) & (ar < ar_thr)


def warp_into(out, src, A, transparent=True):
    """Warp src by the 2x3 affine A into `out` (modified in place), touching only the bounding box of the
    transformed src: the cost is proportional to the visible area, not to the output size. The pixels are those
    of cv2.warpAffine over the whole output (within one grey level of its fixed-point rounding): a tile lands
    exactly where its labels, transformed by the same matrix, say it is. Returns True when anything was drawn."""
    h, w = src.shape[:2]
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], dtype=np.float64) @ A.T
    H, W = out.shape[:2]
    x0, y0 = max(int(math.floor(corners[:, 0].min())), 0), max(int(math.floor(corners[:, 1].min())), 0)
    x1, y1 = min(int(math.ceil(corners[:, 0].max())), W), min(int(math.ceil(corners[:, 1].max())), H)
    if x1 <= x0 or y1 <= y0:
        return False
    A = A.copy()
    A[0, 2] -= x0
    A[1, 2] -= y0
    roi = out[y0:y1, x0:x1]
    cv2.warpAffine(src, A, (x1 - x0, y1 - y0), dst=roi, flags=cv2.INTER_LINEAR,
                   borderMode=cv2.BORDER_TRANSPARENT if transparent else cv2.BORDER_CONSTANT, borderValue=GREY)
    return True


# ----------------------------------------------------------------------------------------------------------------
# Mixup, copy-paste, cutout
def mixup(im, labels, im2, labels2):
    """MixUp (https://arxiv.org/pdf/1710.09412.pdf) with ultralytics' beta(32, 32) ratio."""
    r = np.random.beta(32.0, 32.0)
    im = (im * r + im2 * (1 - r)).astype(np.uint8)
    labels = np.concatenate((labels, labels2), 0)
    return im, labels


def bbox_ioa(box1, box2, eps=1e-7):
    """Intersection over box2 area: box1 (4,), box2 (n, 4) xyxy -> (n,)."""
    b1_x1, b1_y1, b1_x2, b1_y2 = box1
    b2_x1, b2_y1, b2_x2, b2_y2 = box2.T
    inter = (np.minimum(b1_x2, b2_x2) - np.maximum(b1_x1, b2_x1)).clip(0) * \
            (np.minimum(b1_y2, b2_y2) - np.maximum(b1_y1, b2_y1)).clip(0)
    return inter / ((b2_x2 - b2_x1) * (b2_y2 - b2_y1) + eps)


def copy_paste(im, labels, segments, p=0.5):
    """Copy-paste (https://arxiv.org/abs/2012.07177): paste left-right flipped copies of segmented objects that do
    not overlap an existing box by more than 30%. labels (n, 5) [cls, xyxy] pixels, segments list of (m, 2)."""
    n = len(segments)
    if p and n:
        h, w, c = im.shape
        im_new = np.zeros(im.shape, np.uint8)
        for j in random.sample(range(n), k=round(p * n)):
            l, s = labels[j], segments[j]
            box = w - l[3], l[2], w - l[1], l[4]
            ioa = bbox_ioa(box, labels[:, 1:5])
            if (ioa < 0.30).all():
                labels = np.concatenate((labels, [[l[0], *box]]), 0)
                segments.append(np.concatenate((w - s[:, 0:1], s[:, 1:2]), 1))
                cv2.drawContours(im_new, [segments[j].astype(np.int32)], -1, (1, 1, 1), cv2.FILLED)
        result = cv2.flip(im, 1)  # augment segments (flip left-right)
        i = cv2.flip(im_new, 1).astype(bool)
        im[i] = result[i]
    return im, labels, segments


# ----------------------------------------------------------------------------------------------------------------
# Segments
def segment2box(segment, width=640, height=640):
    """One polygon (n, 2) -> xyxy box of its points inside the image (zeros when none is)."""
    x, y = segment.T
    inside = (x >= 0) & (y >= 0) & (x <= width) & (y <= height)
    x, y = x[inside], y[inside]
    return np.array([x.min(), y.min(), x.max(), y.max()]) if any(x) else np.zeros(4)


def segments2boxes(segments):
    """Polygons [(n, 2), ...] -> (m, 4) xywh boxes."""
    boxes = []
    for s in segments:
        x, y = s.T
        boxes.append([x.min(), y.min(), x.max(), y.max()])
    boxes = np.array(boxes).reshape(-1, 4)
    out = boxes.copy()
    out[:, 0] = (boxes[:, 0] + boxes[:, 2]) / 2
    out[:, 1] = (boxes[:, 1] + boxes[:, 3]) / 2
    out[:, 2] = boxes[:, 2] - boxes[:, 0]
    out[:, 3] = boxes[:, 3] - boxes[:, 1]
    return out


def resample_segments(segments, n=1000):
    """Interpolate each polygon to n points (closed)."""
    out = []
    for s in segments:
        s = np.concatenate((s, s[0:1, :]), axis=0)
        x = np.linspace(0, len(s) - 1, n)
        xp = np.arange(len(s))
        out.append(np.concatenate([np.interp(x, xp, s[:, i]) for i in range(2)]).reshape(2, -1).T)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Classification (official names; utils/classify/dataset.py's evaluation items are classify_transform's numbers)
IMAGENET_MEAN = 0.485, 0.456, 0.406  # RGB
IMAGENET_STD = 0.229, 0.224, 0.225


def center_crop(im, size):
    """The centred square of side min(h, w), resized to size x size (or (h, w)) with cv2 INTER_LINEAR."""
    h, w = (size, size) if isinstance(size, int) else size
    imh, imw = im.shape[:2]
    m = min(imh, imw)
    top, left = (imh - m) // 2, (imw - m) // 2
    return cv2.resize(im[top:top + m, left:left + m], (w, h), interpolation=cv2.INTER_LINEAR)


def classify_transform(im, size):
    """BGR uint8 HWC -> normalized float32 CHW RGB numpy (the official eval transforms: crop, /255, mean/std)."""
    x = center_crop(im, size)[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / np.float32(255.0)
    mean = np.array(IMAGENET_MEAN, np.float32).reshape(3, 1, 1)
    std = np.array(IMAGENET_STD, np.float32).reshape(3, 1, 1)
    return np.ascontiguousarray((x - mean) / std)


class CenterCrop:
    """CenterCrop(size)(im): center_crop as a callable, official's name (size: int or (h, w))."""

    def __init__(self, size=640):
        self.h, self.w = (size, size) if isinstance(size, int) else size

    def __call__(self, im):
        return center_crop(im, (self.h, self.w))


class ToTensor:
    """ToTensor(half)(im): BGR uint8 HWC numpy -> RGB CHW float tensor in [0, 1] (fp16 with half)."""

    def __init__(self, half=False):
        self.half = half

    def __call__(self, im):
        from utils.backend import from_numpy  # framework choice: this module loads none (see the docstring)
        x = from_numpy(np.ascontiguousarray(im.transpose(2, 0, 1)[::-1]))
        x = x.half() if self.half else x.float()
        return x / 255.0


class ClassifyTransforms:
    """What classify_transforms(size) returns: BGR uint8 HWC -> normalized float32 CHW tensor, classify_transform's
    numbers (official: Compose([CenterCrop(size), ToTensor(), Normalize(IMAGENET_MEAN, IMAGENET_STD)]))."""

    def __init__(self, size):
        self.size = size

    def __call__(self, im):
        from utils.backend import from_numpy  # framework choice: this module loads none (see the docstring)
        return from_numpy(classify_transform(im, self.size))

    def __repr__(self):
        return f"ClassifyTransforms(CenterCrop({self.size}), ToTensor(), Normalize({IMAGENET_MEAN}, {IMAGENET_STD}))"


def classify_transforms(size=224):
    """The official evaluation transforms of a classifier as one callable (see ClassifyTransforms)."""
    if not isinstance(size, int):  # official asserts this too: a (h, w) crop would not be square
        raise TypeError(f"classify_transforms size {size} must be an integer, not {type(size).__name__}")
    return ClassifyTransforms(size)


def denormalize(x, mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """Undo the ImageNet normalisation of a BCHW RGB batch in place (tensor or numpy): x * std + mean."""
    for i in range(3):
        x[:, i] = x[:, i] * std[i] + mean[i]
    return x


# ----------------------------------------------------------------------------------------------------------------
# Optional albumentations pipelines (official: used only when the package is installed; it is not a dependency)
def _albumentations():
    """(module, major version) of an installed albumentations >= 1.0.3; ImportError when it is missing."""
    import albumentations as A  # optional dependency: official's pipelines run only when it is installed
    version = tuple(int(p) for p in re.findall(r"\d+", A.__version__)[:3])
    if version < (1, 0, 3):
        raise ValueError(f"albumentations>=1.0.3 is required, found {A.__version__}")
    return A, version[0]


class Albumentations:
    """Official's optional detection augmentations (blur, median blur, grey, CLAHE at p=0.01, as its list). Without
    albumentations installed `transform` is None and a call returns (im, labels) unchanged, as official."""

    def __init__(self, size=640):
        self.transform = None
        prefix = colorstr("albumentations: ")
        try:
            A, major = _albumentations()
            crop = dict(size=(size, size)) if major >= 2 else dict(height=size, width=size)  # 2.x renamed it
            quality = dict(quality_range=(75, 100)) if major >= 2 else dict(quality_lower=75)
            T = [A.RandomResizedCrop(**crop, scale=(0.8, 1.0), ratio=(0.9, 1.11), p=0.0), A.Blur(p=0.01),
                 A.MedianBlur(p=0.01), A.ToGray(p=0.01), A.CLAHE(p=0.01), A.RandomBrightnessContrast(p=0.0),
                 A.RandomGamma(p=0.0), A.ImageCompression(**quality, p=0.0)]
            self.transform = A.Compose(T, bbox_params=A.BboxParams(format="yolo", label_fields=["class_labels"]))
            LOGGER.info(prefix + ", ".join(f"{x}".replace("always_apply=False, ", "") for x in T if x.p))
        except ImportError:  # not installed: no augmentation, as official
            pass
        except Exception as e:  # a version it cannot build: said, then no augmentation
            LOGGER.info(f"{prefix}{e}")

    def __call__(self, im, labels, p=1.0):
        """labels: (n, 5) [cls, x, y, w, h] normalized; with probability p the pipeline runs on both."""
        if self.transform and random.random() < p:
            new = self.transform(image=im, bboxes=labels[:, 1:], class_labels=labels[:, 0])
            im, labels = new["image"], np.array([[c, *b] for c, b in zip(new["class_labels"], new["bboxes"])])
        return im, labels


def classify_albumentations(augment=True, size=224, scale=(0.08, 1.0), ratio=(0.75, 1.0 / 0.75), hflip=0.5, vflip=0.0,
                            jitter=0.4, mean=IMAGENET_MEAN, std=IMAGENET_STD, auto_aug=False):
    """Official's albumentations classification transforms (an A.Compose ending in Normalize and ToTensorV2), or,
    without the package, a warning and None, as official (this project's own training transforms are
    utils/classify/augment.py and need no package)."""
    prefix = colorstr("albumentations: ")
    try:
        A, major = _albumentations()
        from albumentations.pytorch import ToTensorV2  # optional dependency, as the line above
        if augment:
            crop = dict(size=(size, size)) if major >= 2 else dict(height=size, width=size)
            T = [A.RandomResizedCrop(**crop, scale=scale, ratio=ratio)]
            if auto_aug:
                LOGGER.info(f"{prefix}auto augmentations are currently not supported")
            else:
                T += [A.HorizontalFlip(p=hflip)] if hflip > 0 else []
                T += [A.VerticalFlip(p=vflip)] if vflip > 0 else []
                T += [A.ColorJitter(*(float(jitter),) * 3, 0)] if jitter > 0 else []  # no hue jitter
        else:  # a fixed crop for evaluation
            T = [A.SmallestMaxSize(max_size=size), A.CenterCrop(height=size, width=size)]
        T += [A.Normalize(mean=mean, std=std), ToTensorV2()]
        LOGGER.info(prefix + ", ".join(f"{x}".replace("always_apply=False, ", "") for x in T if x.p))
        return A.Compose(T)
    except ImportError:
        LOGGER.warning(f"{prefix}not found, install with `pip install albumentations` (recommended)")
    except Exception as e:
        LOGGER.info(f"{prefix}{e}")
    return None
