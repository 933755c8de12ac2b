"""ultralytics' grab-bag import path, kept for users' `from utils.general import LOGGER, non_max_suppression, ...`.
Each name lives in a small module of its own concern; no library module imports this facade.

    utils/log.py        LOGGER, colorstr, notice_once (no framework import)
    utils/paths.py      ROOT, increment_path, find_repo_file, get_latest_run, RunDirError, RepoFileNotFound
    utils/img_size.py   make_divisible, check_img_size
    utils/boxes.py      xyxy2xywh, xywh2xyxy, xywhn2xyxy, xyxy2xywhn, xyn2xy, clip_boxes, scale_boxes
    utils/nms.py        non_max_suppression, nms_numpy
    utils/evaluation/coco_json.py   coco80_to_coco91_class
    utils/dataset_config.py         check_dataset
    utils/engine/schedule.py        one_cycle
    utils/data/class_weights.py     labels_to_class_weights, labels_to_image_weights
    utils/augmentations.py          segments2boxes, resample_segments
    utils/torch_utils.py            init_seeds (set_seed), intersect_dicts
    utils/checkpoint/training.py    strip_optimizer (here with the builder of any task's model)
"""
from models.from_record import build_any_model
from utils.boxes import clip_boxes, scale_boxes, xyn2xy, xywh2xyxy, xywhn2xyxy, xyxy2xywh, xyxy2xywhn
from utils.evaluation.coco_json import coco80_to_coco91_class
from utils.img_size import check_img_size, make_divisible
from utils.log import LOGGER, colorstr
from utils.nms import nms_numpy, non_max_suppression
from utils.paths import ROOT, RepoFileNotFound, RunDirError, find_repo_file, get_latest_run, increment_path
from utils.augmentations import resample_segments, segments2boxes
from utils.checkpoint import training as _training
from utils.data.class_weights import labels_to_class_weights, labels_to_image_weights
from utils.dataset_config import check_dataset
from utils.engine.schedule import one_cycle
from utils.torch_utils import intersect_dicts, set_seed as init_seeds


def strip_optimizer(f="best.pt", s=""):
    """ultralytics' call: rewrite checkpoint f (or save it as s) as a final one, the EMA as the model in fp16 without
    the optimizer. A detection, segmentation or classification checkpoint alike."""
    return _training.strip_optimizer(f, s, build_model=build_any_model)

__all__ = ["LOGGER", "ROOT", "RepoFileNotFound", "RunDirError", "check_dataset", "check_img_size", "clip_boxes",
           "coco80_to_coco91_class", "colorstr", "find_repo_file", "get_latest_run", "increment_path", "init_seeds",
           "intersect_dicts", "labels_to_class_weights", "labels_to_image_weights", "make_divisible", "nms_numpy",
           "non_max_suppression", "one_cycle", "resample_segments", "scale_boxes", "segments2boxes", "strip_optimizer",
           "xyn2xy", "xywh2xyxy", "xywhn2xyxy", "xyxy2xywh", "xyxy2xywhn"]
