"""COCO's AP by object size for any YOLO-format dataset: its labels written as COCO ground truth and a --save-json
predictions file scored against them by pycocotools, which prints its twelve-line summary (AP at 0.5:0.95, 0.5,
0.75, then AP small / medium / large: objects under 32^2, up to 96^2, over 96^2 pixels of area; then AR).

The ground truth uses the image ids and category ids that utils/evaluation/coco_json.py gives the predictions (the
file stem, an int when numeric; the class index), so the two files line up."""
import json
from pathlib import Path

import numpy as np

from utils.atomic_files import write_text
from utils.log import LOGGER

STAT_NAMES = ("AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large",
              "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large")  # COCOeval.stats, in order


def image_id(path):
    stem = Path(path).stem
    return int(stem) if stem.isnumeric() else stem


def labels_as_coco(im_files, labels, shapes, names):
    """COCO ground truth (dict) from YOLO labels: labels[i] (m, 5) [cls, xywh normalized]; shapes[i] (w, h)."""
    images, annotations = [], []
    for f, lb, (w, h) in zip(im_files, labels, shapes):
        iid = image_id(f)
        images.append({"id": iid, "file_name": Path(f).name, "width": int(w), "height": int(h)})
        for c, x, y, bw, bh in np.asarray(lb, np.float64).reshape(-1, 5):
            bw, bh = bw * w, bh * h
            annotations.append({"id": len(annotations) + 1, "image_id": iid, "category_id": int(c),
                                "bbox": [(x * w) - bw / 2, (y * h) - bh / 2, bw, bh], "area": bw * bh,
                                "iscrowd": 0})
    categories = [{"id": int(k), "name": str(v)} for k, v in dict(names).items()]
    return {"images": images, "annotations": annotations, "categories": categories}


def ap_by_size(pred_json, im_files, labels, shapes, names, gt_json):
    """Write the labels as COCO ground truth to gt_json, score pred_json (a COCO results file) against it with
    pycocotools (its summary printed) and return {STAT_NAMES: value}; None, saying why, where it cannot run."""
    try:
        from pycocotools.coco import COCO  # optional, --save-json only
        from pycocotools.cocoeval import COCOeval  # optional, as above
    except ImportError:
        LOGGER.info("pycocotools is not installed ('pip install pycocotools'): AP by object size skipped.")
        return None
    if not json.loads(Path(pred_json).read_text()):
        LOGGER.info(f"{pred_json} holds no predictions: AP by object size skipped.")
        return None
    write_text(gt_json, json.dumps(labels_as_coco(im_files, labels, shapes, names)))
    LOGGER.info(f"\nCOCO AP by object size, against the labels as COCO ground truth ({gt_json}):")
    gt = COCO(str(gt_json))
    ev = COCOeval(gt, gt.loadRes(str(pred_json)), "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    return {k: float(v) for k, v in zip(STAT_NAMES, ev.stats)}
