"""--save-json: predictions as a COCO results file and, when pycocotools and the COCO annotations are there, the
official COCO mAPs computed from it."""
import json
import os
from pathlib import Path

import numpy as np

from utils.atomic_files import write_text
from utils.boxes import xyxy2xywh
from utils.log import LOGGER


def coco80_to_coco91_class():
    """COCO's 80 training classes -> the category ids (1..90, with gaps) of the official annotation files."""
    return [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33,
            34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61,
            62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]


def is_coco_dataset(data):
    """True for the COCO val2017 split (data['val'] ends in coco/val2017.txt): class ids then map to COCO's 91."""
    return isinstance(data.get("val"), str) and data["val"].endswith(f"coco{os.sep}val2017.txt")


def save_one_json(predn, jdict, path, class_map):
    """Append COCO results entries {image_id, category_id, bbox [x, y, w, h] top-left, score} for one image's
    detections predn (n, 6) [xyxy, conf, cls] in original pixels; image_id is the file stem (an int when numeric)."""
    image_id = int(path.stem) if path.stem.isnumeric() else path.stem
    box = xyxy2xywh(predn[:, :4].astype(np.float64))
    box[:, :2] -= box[:, 2:] / 2  # centre -> top-left corner
    for p, b in zip(predn.tolist(), box.tolist()):
        jdict.append({"image_id": image_id, "category_id": class_map[int(p[5])],
                      "bbox": [round(x, 3) for x in b], "score": round(p[4], 5)})


class CocoPredictions:
    """Collects the COCO results entries of a validation run, writes <name>_predictions.json into save_dir and
    scores it with pycocotools against anno_json (restricted to the evaluated images on COCO itself)."""

    def __init__(self, save_dir, name="", is_coco=False, anno_json=None):
        self.file = Path(save_dir) / f"{name}_predictions.json"
        self.is_coco, self.anno_json = is_coco, Path(anno_json) if anno_json else None
        self.class_map = coco80_to_coco91_class() if is_coco else list(range(1000))
        self.jdict = []

    @classmethod
    def for_dataset(cls, data, save_dir, weights=None):
        """The writer val.py uses: the file named after the weights, annotations at <path>/annotations/."""
        w = Path(weights[0] if isinstance(weights, (list, tuple)) else weights).stem if weights else ""
        anno_json = Path(data.get("path", "../coco")) / "annotations" / "instances_val2017.json"
        return cls(save_dir, w, is_coco_dataset(data), anno_json)

    def add(self, predn, path):
        save_one_json(predn, self.jdict, Path(path), self.class_map)

    # pycocotools' evaluations of the file, in order; save_and_evaluate returns (mAP50-95, mAP50) of each
    kinds = ("bbox",)

    def save_and_evaluate(self, im_files=()):
        """Write the JSON file; return pycocotools' (mAP50-95, mAP50) of each of `kinds`, one after the other, or None
        when it cannot run (no entries, no annotations file, no pycocotools), saying why."""
        if not self.jdict:
            return None
        LOGGER.info(f"\nSaving {self.file}...")
        write_text(self.file, json.dumps(self.jdict))  # whole or not at all: pycocotools reads it back next
        if self.anno_json is None or not self.anno_json.is_file():
            LOGGER.info(f"No COCO annotations at {self.anno_json}: predictions saved, pycocotools evaluation skipped.")
            return None
        try:
            from pycocotools.coco import COCO  # optional, --save-json only (and it loads matplotlib)
            from pycocotools.cocoeval import COCOeval  # optional, as above
        except ImportError:
            LOGGER.info("pycocotools is not installed ('pip install pycocotools'): COCO evaluation skipped.")
            return None
        try:
            anno = COCO(str(self.anno_json))
            pred = anno.loadRes(str(self.file))
            stats = []
            for kind in self.kinds:
                ev = COCOeval(anno, pred, kind)
                if self.is_coco:
                    ev.params.imgIds = [int(Path(x).stem) for x in im_files]  # only the images evaluated here
                ev.evaluate()
                ev.accumulate()
                ev.summarize()
                stats.extend(ev.stats[:2])
            return tuple(float(x) for x in stats)
        except Exception as e:  # a malformed annotations file or results the API refuses: the mAPs above stand
            LOGGER.info(f"pycocotools unable to run: {e}")
            return None
