"""Generate 'shapes': a small, learnable, offline detection dataset in the YOLO images/labels layout; with
segments=True (--segments) the labels are the shapes' outlines as polygons (segment/train.py's format), on the same
images.

Six classes, each a unique (shape, colour) pair so both cues separate them; objects of varied size (about 10-40%
of the image side), jittered colour, on textured backgrounds (gradients, noise, grey clutter), with partial
occlusion between objects. Deterministic for a given seed.

    python data/scripts/make_shapes.py --out ../datasets/shapes          # 300 train + 60 val images, 256 px
    python data/scripts/make_shapes.py --out ../datasets/shapes-seg --segments   # polygon labels (segmentation)
    python data/scripts/make_shapes.py --classify --out ../datasets/shapes-cls   # ImageFolder of object crops
    python data/scripts/make_shapes.py --small-objects --out ../datasets/shapes-small  # 640 px canvases, up to 24
                                                   # objects of about 12-32 px each (sliced inference's use case)
data/shapes.yaml and data/shapes-seg.yaml run this automatically (their `download:` entry) when the folder is missing;
`make train-demo TASK=classify` makes the classification variant (train/<class>/*.jpg and val/<class>/*.jpg, one crop
per object).
"""
import argparse
import math
import sys
from pathlib import Path

import cv2
import numpy as np

NAMES = ["red circle", "green square", "blue triangle", "yellow star", "magenta cross", "cyan hexagon"]
HUES = [0, 60, 120, 30, 150, 90]  # OpenCV hue (0-180) of each class: red, green, blue, yellow, magenta, cyan


def _polygon(kind, cx, cy, r, angle):
    """Vertices of a shape of 'radius' r (its bounding box is computed from these)."""
    if kind == "square":
        k, phase = 4, math.pi / 4
    elif kind == "triangle":
        k, phase = 3, -math.pi / 2
    elif kind == "hexagon":
        k, phase = 6, 0.0
    elif kind == "star":
        pts = []
        for i in range(10):
            rr = r if i % 2 == 0 else r * 0.45
            t = angle - math.pi / 2 + i * math.pi / 5
            pts.append((cx + rr * math.cos(t), cy + rr * math.sin(t)))
        return np.array(pts)
    elif kind == "cross":
        a, b = r, r * 0.35
        base = np.array([(-b, -a), (b, -a), (b, -b), (a, -b), (a, b), (b, b), (b, a), (-b, a), (-b, b), (-a, b),
                         (-a, -b), (-b, -b)])
        c, s = math.cos(angle), math.sin(angle)
        return base @ np.array([[c, s], [-s, c]]) + (cx, cy)
    else:
        raise ValueError(kind)
    t = angle + phase + np.arange(k) * 2 * math.pi / k
    return np.stack((cx + r * np.cos(t), cy + r * np.sin(t)), 1)


def _colour(rng, cls):
    hsv = np.uint8([[[(HUES[cls] + rng.integers(-6, 7)) % 180, rng.integers(170, 256), rng.integers(150, 256)]]])
    return tuple(int(v) for v in cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0])


def _background(rng, size):
    """Low-saturation gradient + noise + grey clutter lines and blobs (distractors without class colours)."""
    c0, c1 = rng.integers(40, 220, 3), rng.integers(40, 220, 3)
    grey = rng.integers(60, 200)
    c0 = (0.3 * c0 + 0.7 * grey).astype(np.float32)
    c1 = (0.3 * c1 + 0.7 * rng.integers(60, 200)).astype(np.float32)
    t = np.linspace(0, 1, size, dtype=np.float32)
    g = t[None, :, None] if rng.random() < 0.5 else t[:, None, None]
    im = c0 * (1 - g) + c1 * g + rng.normal(0, rng.uniform(3, 12), (size, size, 3)).astype(np.float32)
    im = np.clip(im, 0, 255).astype(np.uint8)
    for _ in range(rng.integers(0, 6)):  # clutter
        v = int(rng.integers(30, 230))
        p1, p2 = tuple(int(x) for x in rng.integers(0, size, 2)), tuple(int(x) for x in rng.integers(0, size, 2))
        if rng.random() < 0.5:
            cv2.line(im, p1, p2, (v, v, v), int(rng.integers(1, 4)), cv2.LINE_AA)
        else:
            cv2.ellipse(im, p1, (int(rng.integers(5, 30)), int(rng.integers(5, 30))), float(rng.uniform(0, 180)),
                        0, 360, (v, v, v), -1, cv2.LINE_AA)
    return im


def _iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter + 1e-9)


CIRCLE_VERTICES = 32  # a circle's polygon label


SMALL_OBJECTS = dict(size=640, max_objects=24, radius=(0.01, 0.025))  # --small-objects: 12-32 px on 640 px


def make_image(rng, size=256, max_objects=5, segments=False, radius=(0.06, 0.2)):
    """One image and its labels [(cls, xc, yc, w, h) normalized], or with segments [(cls, x1, y1, x2, y2, ...)]:
    each shape's outline, normalized and clipped to the image (the random draws are the same either way, so the
    images are too). radius: the range of an object's radius as a fraction of the image side."""
    im = _background(rng, size)
    boxes, labels = [], []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        for _try in range(20):
            cls = int(rng.integers(0, len(NAMES)))
            r = rng.uniform(*radius) * size
            cx, cy = rng.uniform(r * 0.7, size - r * 0.7, 2)  # may touch the border (cut off a little)
            angle = rng.uniform(0, 2 * math.pi)
            kind = NAMES[cls].split()[1]
            if kind == "circle":
                box = np.array([cx - r, cy - r, cx + r, cy + r])
                pts = None
            else:
                pts = _polygon(kind, cx, cy, r, angle)
                box = np.array([*pts.min(0), *pts.max(0)])
            box = np.clip(box, 0, size)
            if (box[2] - box[0]) < 8 or (box[3] - box[1]) < 8:
                continue
            if all(_iou(box, b) < 0.25 for b in boxes):  # partial occlusion allowed, not full
                break
        else:
            continue
        col = _colour(rng, cls)
        if pts is None:
            cv2.circle(im, (int(round(cx * 16)), int(round(cy * 16))), int(round(r * 16)), col, -1, cv2.LINE_AA, 4)
        else:
            cv2.fillPoly(im, [np.round(pts * 16).astype(np.int32)], col, cv2.LINE_AA, 4)
        if rng.random() < 0.3:  # a darker outline on some objects
            shade = tuple(int(c * 0.5) for c in col)
            if pts is None:
                cv2.circle(im, (int(cx), int(cy)), int(r), shade, 2, cv2.LINE_AA)
            else:
                cv2.polylines(im, [pts.astype(np.int32)], True, shade, 2, cv2.LINE_AA)
        boxes.append(box)
        if segments:
            if pts is None:
                t = np.arange(CIRCLE_VERTICES) * 2 * math.pi / CIRCLE_VERTICES
                pts = np.stack((cx + r * np.cos(t), cy + r * np.sin(t)), 1)
            labels.append((cls, *np.clip(pts / size, 0, 1).reshape(-1)))
            continue
        x1, y1, x2, y2 = box / size
        labels.append((cls, (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1))
    return im, labels


def make_shapes(out, n_train=300, n_val=60, size=256, seed=0, segments=False, max_objects=5, radius=(0.06, 0.2)):
    """Write out/images/{train,val}/*.jpg and out/labels/{train,val}/*.txt (polygon labels with segments). Returns
    the output Path. max_objects, radius: see make_image (SMALL_OBJECTS: large canvases with small objects)."""
    out = Path(out)
    for split, n, s in (("train", n_train, seed), ("val", n_val, seed + 1000003)):
        rng = np.random.default_rng(s)
        (out / "images" / split).mkdir(parents=True, exist_ok=True)
        (out / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            im, labels = make_image(rng, size, max_objects, segments=segments, radius=radius)
            name = f"{split}_{i:05d}"
            cv2.imwrite(str(out / "images" / split / f"{name}.jpg"), im, [cv2.IMWRITE_JPEG_QUALITY, 92])
            with open(out / "labels" / split / f"{name}.txt", "w") as f:
                f.writelines(" ".join([str(c), *(f"{v:.6f}" for v in rest)]) + "\n" for c, *rest in labels)
    return out


def class_folder(name):
    """'red circle' -> 'red_circle' (ImageFolder class folders)."""
    return name.replace(" ", "_")


def make_shapes_cls(out, n_train=120, n_val=40, size=256, seed=0, pad=0.15):
    """Write out/{train,val}/<class>/*.jpg: each object of n_train (n_val) generated scenes cropped with `pad` of
    its size around its box (neighbours and background included, as in a detector's crops). Returns the Path."""
    out = Path(out)
    for split, n, s in (("train", n_train, seed), ("val", n_val, seed + 1000003)):
        rng = np.random.default_rng(s)
        for name in NAMES:
            (out / split / class_folder(name)).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            im, labels = make_image(rng, size)
            for j, (c, x, y, w, h) in enumerate(labels):
                x1, y1 = int(max((x - w / 2 - pad * w) * size, 0)), int(max((y - h / 2 - pad * h) * size, 0))
                x2, y2 = int(min((x + w / 2 + pad * w) * size, size)), int(min((y + h / 2 + pad * h) * size, size))
                crop = im[y1:y2, x1:x2]
                cv2.imwrite(str(out / split / class_folder(NAMES[c]) / f"{split}_{i:05d}_{j}.jpg"), crop,
                            [cv2.IMWRITE_JPEG_QUALITY, 92])
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[2].parent / "datasets" / "shapes"))
    p.add_argument("--train", type=int, default=300)
    p.add_argument("--val", type=int, default=60)
    p.add_argument("--img", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--segments", action="store_true", help="polygon labels (segmentation) instead of boxes")
    p.add_argument("--classify", action="store_true", help="an ImageFolder of object crops (scenes: --train/--val)")
    p.add_argument("--small-objects", action="store_true",
                   help=f"large canvases with small objects: --img {SMALL_OBJECTS['size']} unless given, up to "
                        f"{SMALL_OBJECTS['max_objects']} objects of radius {SMALL_OBJECTS['radius'][0]}-"
                        f"{SMALL_OBJECTS['radius'][1]} of the side")
    a = p.parse_args()
    if a.small_objects:
        size = a.img if "--img" in sys.argv else SMALL_OBJECTS["size"]
        out = make_shapes(a.out, a.train, a.val, size, a.seed, a.segments, SMALL_OBJECTS["max_objects"],
                          SMALL_OBJECTS["radius"])
        print(f"shapes dataset (small objects) written to {out}")
    elif a.classify:
        print(f"shapes-cls dataset written to {make_shapes_cls(a.out, a.train, a.val, a.img, a.seed)}")
    else:
        print(f"shapes dataset written to {make_shapes(a.out, a.train, a.val, a.img, a.seed, a.segments)}")
