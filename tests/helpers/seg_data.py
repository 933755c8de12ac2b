"""A tiny polygon dataset for the segmentation training tests: a few coco128-seg images (symlinked from ../shared)
with a data YAML, and the COCO instances JSON of their polygons for --save-json."""
import json
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
STEMS = ("000000000009", "000000000025", "000000000030", "000000000034")


def make_tiny_seg(shared_dir, d, stems=STEMS):
    """d/images/train + d/labels/train (symlinks) and d/data.yaml (train = val, coco128-seg's names). Returns the
    YAML path."""
    d = Path(d)
    src = Path(shared_dir) / "data" / "coco128-seg"
    for kind, ext in (("images", "jpg"), ("labels", "txt")):
        (d / kind / "train").mkdir(parents=True, exist_ok=True)
        for s in stems:
            (d / kind / "train" / f"{s}.{ext}").symlink_to(src / kind / "train2017" / f"{s}.{ext}")
    names = (ROOT / "data" / "coco128-seg.yaml").read_text().split("names:", 1)[1].split("\n\n")[0]
    y = d / "data.yaml"
    y.write_text(f"path: {d}\ntrain: images/train\nval: images/train\nnames:{names}\n")
    return y


def write_coco_annotations(d):
    """d/annotations/instances_val2017.json from d's polygon labels (image id = file stem, category id = class)."""
    d = Path(d)
    images, anns = [], []
    for im in sorted((d / "images" / "train").glob("*.jpg")):
        h, w = cv2.imread(str(im)).shape[:2]
        images.append({"id": int(im.stem), "file_name": im.name, "height": h, "width": w})
        for line in (d / "labels" / "train" / f"{im.stem}.txt").read_text().splitlines():
            v = [float(x) for x in line.split()]
            xy = np.array(v[1:]).reshape(-1, 2) * (w, h)
            (x1, y1), (x2, y2) = xy.min(0), xy.max(0)
            anns.append({"id": len(anns) + 1, "image_id": int(im.stem), "category_id": int(v[0]), "iscrowd": 0,
                         "segmentation": [xy.reshape(-1).tolist()], "bbox": [x1, y1, x2 - x1, y2 - y1],
                         "area": float(cv2.contourArea(xy.astype(np.float32)))})
    f = d / "annotations" / "instances_val2017.json"
    f.parent.mkdir(exist_ok=True)
    f.write_text(json.dumps({"images": images, "annotations": anns,
                             "categories": [{"id": i, "name": str(i)} for i in range(80)]}))
    return f
