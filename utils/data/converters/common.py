"""What the converters share: pixel boxes to YOLO rows, label files written whole, and ultralytics' autosplit."""
import random
from pathlib import Path

import numpy as np

from utils.data.files import IMG_FORMATS


def xyxy_to_yolo(box, w, h, clip=False):
    """Pixel corners (x1, y1, x2, y2) -> normalised (x_center, y_center, width, height). clip: first clamp the
    corners into the image (as ultralytics' xyxy2xywhn(clip=True))."""
    x1, y1, x2, y2 = (float(v) for v in box)
    if clip:
        x1, x2 = min(max(x1, 0.0), w), min(max(x2, 0.0), w)
        y1, y2 = min(max(y1, 0.0), h), min(max(y2, 0.0), h)
    return (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h


def xywh_to_yolo(box, w, h, clip=False):
    """Pixel (left, top, width, height), the COCO/VisDrone box -> normalised (x_center, y_center, width, height)."""
    x, y, bw, bh = (float(v) for v in box)
    return xyxy_to_yolo((x, y, x + bw, y + bh), w, h, clip=clip)


def yolo_row(cls, xywh, decimals=6):
    return f"{int(cls)} " + " ".join(f"{v:.{decimals}f}" for v in xywh) + "\n"


def write_label_files(rows_by_file):
    """{label path: [rows]} -> the files, each written whole (parent folders made)."""
    for path, rows in rows_by_file.items():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(rows))
    return len(rows_by_file)


def read_labels(path):
    """A YOLO label file as an (n, 5) float array (for checks and tests)."""
    text = Path(path).read_text().split()
    return np.array(text, dtype=np.float64).reshape(-1, 5)


def image_files(folder):
    return sorted(p for p in Path(folder).rglob("*.*") if p.suffix[1:].lower() in IMG_FORMATS)


def autosplit(images, weights=(0.9, 0.1, 0.0)):
    """Split the images under `images` into autosplit_{train,val,test}.txt beside it, the way ultralytics'
    autosplit does (sorted files, random.Random(0).choices over the weights), so the same images land in the
    same split. Lines are './<images name>/<file>' relative to the lists' folder. Returns the three counts."""
    images = Path(images)
    files = image_files(images)
    which = random.Random(0).choices([0, 1, 2], weights=weights, k=len(files))
    names = ("autosplit_train.txt", "autosplit_val.txt", "autosplit_test.txt")
    lines = [[], [], []]
    for i, f in zip(which, files):
        lines[i].append(f"./{f.relative_to(images.parent).as_posix()}\n")
    for name, rows in zip(names, lines):
        target = images.parent / name
        target.unlink(missing_ok=True)
        if rows:
            target.write_text("".join(rows))
    return tuple(len(r) for r in lines)
