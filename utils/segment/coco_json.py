"""segment/val.py --save-json: each detection as a COCO results entry with its box and its mask as RLE
(pycocotools.mask.encode), and pycocotools' `bbox` and `segm` evaluations of the file, as the official script."""
import json
from pathlib import Path

import numpy as np

from utils.evaluation.coco_json import CocoPredictions, save_one_json
from utils.log import LOGGER


def mask_rle(mask):
    """A (h, w) 0/1 mask -> COCO RLE {'size': [h, w], 'counts': str}, JSON-ready."""
    from pycocotools.mask import encode  # optional dependency: --save-json only
    rle = encode(np.asfortranarray(mask[:, :, None], dtype=np.uint8))[0]
    rle["counts"] = rle["counts"].decode("utf-8")
    return rle


class CocoSegPredictions(CocoPredictions):
    """CocoPredictions whose entries also carry 'segmentation' (RLE at the original image size)."""

    def add(self, predn, path, masks=None):
        """predn (n, 6) [xyxy, conf, cls] in original pixels; masks (n, h0, w0) 0/1 on the original image."""
        first = len(self.jdict)
        save_one_json(predn, self.jdict, Path(path), self.class_map)
        if masks is not None:
            for entry, m in zip(self.jdict[first:], masks):
                entry["segmentation"] = mask_rle(m)

    def save_and_evaluate(self, im_files=()):
        """Write the JSON file; return pycocotools' (box mAP50-95, box mAP50, mask mAP50-95, mask mAP50), or None
        when it cannot run (no entries, no annotations file, no pycocotools), saying why."""
        if not self.jdict:
            return None
        LOGGER.info(f"\nEvaluating pycocotools mAP... saving {self.file}...")
        with open(self.file, "w") as f:
            json.dump(self.jdict, f)
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
            for kind in ("bbox", "segm"):
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
