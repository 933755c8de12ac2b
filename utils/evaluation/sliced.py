"""val.py --slice: each validation image read at its own size, predicted tile by tile (utils/inference/slicing.py)
and scored by the same DetectionEvaluator as the plain pass; with --save-json, COCO's AP by object size.

    evaluator = evaluator_for_dataset(data, model.names, save_dir)
    metrics = run_sliced_validation(sliced, dataset, evaluator)      # dataset: a LoadImagesAndLabels

val.py runs it through validation_for(settings, run_validation), which stands in for its validation loop.

The predictions are already in original pixels, so each image is handed to the evaluator as its own input (gain 1,
no padding) with its labels normalized to it."""
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from utils import signals
from utils.atomic_files import write_text
from utils.data.media import read_image
from utils.evaluation.evaluator import TABLE_HEADER
from utils.evaluation.coco_sizes import ap_by_size
from utils.inference.profile import Profile, ms_per_image
from utils.log import LOGGER


def _targets(labels):
    """A LoadImagesAndLabels label array (m, 5) [cls, xywh normalized] -> the loader's targets (m, 6) for image 0."""
    labels = np.asarray(labels, np.float32).reshape(-1, 5)
    return np.concatenate((np.zeros((len(labels), 1), np.float32), labels), 1)


def run_sliced_validation(sliced, dataset, evaluator, progress=True):
    """Every image of dataset (its im_files and labels) through sliced (a SlicedPredictor), scored by evaluator.
    Returns ((P, R, mAP50, mAP50-95, 0, 0, 0), per-class mAP50-95, (0, inference, merge) ms per image): what val.run
    returns (no losses: the tiles are not the labels' images)."""
    prof = Profile(device=sliced.device), Profile(device=sliced.device)
    files = list(dataset.im_files)
    it = tqdm(range(len(files)), desc=TABLE_HEADER, bar_format="{l_bar}{bar:10}{r_bar}", file=sys.stdout) if progress \
        else range(len(files))
    for i in it:
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        im0 = read_image(files[i])
        h, w = im0.shape[:2]
        with prof[0]:
            raw = sliced.predict_raw(im0)
        with prof[1]:
            det = sliced.merge(raw)
        evaluator.update([det], _targets(dataset.labels[i]), [((h, w), ((1.0, 1.0), (0.0, 0.0)))], (h, w),
                         [files[i]])
    metrics = evaluator.compute()
    t = (0.0, *ms_per_image(prof, metrics.seen)[:2])
    LOGGER.info("Speed: %.1fms sliced inference, %.1fms merge per image" % t[1:])
    evaluator.evaluate_coco(metrics, files)
    return metrics.results([0.0, 0.0, 0.0]), metrics.maps(), t


def report_ap_by_size(evaluator, dataset, save_dir):
    """--save-json on a dataset without COCO annotations: its labels as COCO ground truth (written beside the
    predictions), scored by pycocotools, whose summary (AP and AR overall and for small, medium and large objects)
    is printed and written to <save_dir>/ap_by_size.json. Returns the stats by name, or None when there is nothing
    to score."""
    coco = getattr(evaluator, "coco", None)
    if coco is None or coco.is_coco or not coco.file.is_file():
        return None
    stats = ap_by_size(coco.file, dataset.im_files, dataset.labels, dataset.shapes, evaluator.names,
                       Path(save_dir) / "labels_coco.json")
    if stats is not None:
        write_text(Path(save_dir) / "ap_by_size.json", json.dumps(stats, indent=1) + "\n")
    return stats


def validation_for(settings, plain):
    """What val.py runs in place of plain (its validation loop, run_validation): the same call, plain or, with
    settings (a utils.tiles.SliceSettings), sliced; then with --save-json on a dataset without COCO annotations the
    AP by object size (report_ap_by_size). speed_shape's last value is the inference size."""
    def validate(model, dataloader, evaluator, conf_thres=0.001, iou_thres=0.6, max_det=300, speed_shape=None,
                 **options):
        if settings is None:
            results = plain(model, dataloader, evaluator, conf_thres=conf_thres, iou_thres=iou_thres,
                            max_det=max_det, speed_shape=speed_shape, **options)
        else:
            from utils.inference.slicing import SlicedPredictor
            imgsz = speed_shape[-1] if speed_shape else 640
            sliced = SlicedPredictor(model, imgsz, settings, conf_thres=conf_thres, iou_thres=iou_thres,
                                     agnostic=evaluator.single_cls, max_det=max_det, multi_label=True)
            results = run_sliced_validation(sliced, dataloader.dataset, evaluator)
        report_ap_by_size(evaluator, dataloader.dataset, evaluator.save_dir)
        return results
    return validate
