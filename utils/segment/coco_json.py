"""segment/val.py --save-json: each detection as a COCO results entry with its box and its mask as RLE
(pycocotools.mask.encode), and pycocotools' `bbox` and `segm` evaluations of the file, as the official script."""
from pathlib import Path

import numpy as np

from utils.evaluation.coco_json import CocoPredictions, save_one_json


def mask_rle(mask):
    """A (h, w) 0/1 mask -> COCO RLE {'size': [h, w], 'counts': str}, JSON-ready."""
    from pycocotools.mask import encode  # optional dependency: --save-json only
    rle = encode(np.asfortranarray(mask[:, :, None], dtype=np.uint8))[0]
    rle["counts"] = rle["counts"].decode("utf-8")
    return rle


class CocoSegPredictions(CocoPredictions):
    """CocoPredictions whose entries also carry 'segmentation' (RLE at the original image size), evaluated as boxes
    and as masks: save_and_evaluate returns (box mAP50-95, box mAP50, mask mAP50-95, mask mAP50)."""

    kinds = ("bbox", "segm")

    def add(self, predn, path, masks=None):
        """predn (n, 6) [xyxy, conf, cls] in original pixels; masks (n, h0, w0) 0/1 on the original image."""
        first = len(self.jdict)
        save_one_json(predn, self.jdict, Path(path), self.class_map)
        if masks is not None:
            for entry, m in zip(self.jdict[first:], masks):
                entry["segmentation"] = mask_rle(m)
