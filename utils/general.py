"""ultralytics' grab-bag import path, kept for users' `from utils.general import LOGGER, non_max_suppression, ...`.
Each name lives in a small module of its own concern; no library module imports this facade.

    utils/log.py        LOGGER, colorstr, notice_once (no framework import)
    utils/paths.py      ROOT, increment_path, find_repo_file, RunDirError, RepoFileNotFound
    utils/img_size.py   make_divisible, check_img_size
    utils/boxes.py      xyxy2xywh, xywh2xyxy, xywhn2xyxy, xyxy2xywhn, xyn2xy, clip_boxes, scale_boxes
    utils/nms.py        non_max_suppression, nms_numpy
    utils/evaluation/coco_json.py   coco80_to_coco91_class
"""
from utils.boxes import clip_boxes, scale_boxes, xyn2xy, xywh2xyxy, xywhn2xyxy, xyxy2xywh, xyxy2xywhn
from utils.evaluation.coco_json import coco80_to_coco91_class
from utils.img_size import check_img_size, make_divisible
from utils.log import LOGGER, colorstr
from utils.nms import nms_numpy, non_max_suppression
from utils.paths import ROOT, RepoFileNotFound, RunDirError, find_repo_file, increment_path

__all__ = ["LOGGER", "ROOT", "RepoFileNotFound", "RunDirError", "check_img_size", "clip_boxes", "coco80_to_coco91_class",
           "colorstr", "find_repo_file", "increment_path", "make_divisible", "nms_numpy", "non_max_suppression",
           "scale_boxes", "xyn2xy", "xywh2xyxy", "xywhn2xyxy", "xyxy2xywh", "xyxy2xywhn"]
