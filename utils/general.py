"""ultralytics' grab-bag import path, kept for users' `from utils.general import LOGGER, non_max_suppression, ...`:
every name the official scripts import from it. Each lives in a small module of its own concern; no library module
imports this facade.

    utils/log.py        LOGGER, colorstr, emojis (no framework import)
    utils/paths.py      ROOT, increment_path, get_latest_run, check_file, check_yaml, check_suffix, url2file,
                        file_size, WorkingDirectory
    utils/environment.py  is_colab, is_jupyter, is_kaggle, is_docker, check_online, check_requirements,
                        check_version, check_font, check_imshow, check_git_info, check_git_status, user_config_dir,
                        CONFIG_DIR, DATASETS_DIR, FONT, AUTOINSTALL (nothing installed or fetched unasked)
    utils/run_header.py print_args, git_describe, file_date
    utils/yaml_files.py yaml_load, yaml_save
    utils/img_size.py   make_divisible, check_img_size
    utils/boxes.py      xyxy2xywh, xywh2xyxy, xywhn2xyxy, xyxy2xywhn, xyn2xy, clip_boxes, scale_boxes, clip_segments
    utils/nms.py        non_max_suppression, nms_numpy
    utils/inference/    Profile (profile.py), save_one_txt (label_txt.py)
    utils/evaluation/coco_json.py   coco80_to_coco91_class
    utils/dataset_config.py         check_dataset
    utils/engine/schedule.py        one_cycle
    utils/evolve.py                 print_mutation
    utils/amp_check.py              check_amp
    utils/data/class_weights.py     labels_to_class_weights, labels_to_image_weights
    utils/data/files.py             NUM_THREADS, is_writeable
    utils/data/converters/fetch.py  download; utils/archive_extract.py unzip_file (the dataset-archive rules)
    utils/augmentations.py          segments2boxes, resample_segments, segment2box
    utils/segment/masks.py          scale_segments
    utils/streams.py                clean_str
    utils/torch_utils.py            init_seeds (set_seed), intersect_dicts, RANK
    utils/checkpoint/training.py    strip_optimizer (here with the builder of any task's model)
The rest are a few lines each, here: imread, imwrite, imshow (any file name), get_default_args, methods, TQDM.
"""
import inspect
from pathlib import Path

import cv2  # noqa: F401  (ultralytics users take cv2 from here)
from tqdm import tqdm as TQDM  # noqa: N812  (ultralytics' progress bar name)

from models.from_record import build_any_model
from utils.amp_check import check_amp
from utils.archive_extract import extract_archive
from utils.atomic_files import write_image
from utils.data.converters import fetch as _fetch
from utils.data.files import NUM_THREADS, is_writeable as _is_writeable
from utils.data.media import read_image
from utils.environment import (AUTOINSTALL, CONFIG_DIR, DATASETS_DIR, FONT, check_font, check_git_info,
                               check_git_status, check_imshow, check_online, check_requirements, check_version,
                               is_colab, is_docker, is_jupyter, is_kaggle, user_config_dir)
from utils.evolve import print_mutation
from utils.inference.label_txt import save_one_txt
from utils.inference.profile import Profile
from utils.paths import WorkingDirectory, check_file, check_suffix, check_yaml, file_size, url2file
from utils.run_header import file_date, git_describe, print_args
from utils.segment.masks import scale_segments
from utils.streams import clean_str
from utils.yaml_files import yaml_load, yaml_save
from utils.boxes import clip_boxes, clip_segments, scale_boxes, xyn2xy, xywh2xyxy, xywhn2xyxy, xyxy2xywh, xyxy2xywhn
from utils.evaluation.coco_json import coco80_to_coco91_class
from utils.img_size import check_img_size, make_divisible
from utils.log import LOGGER, colorstr, emojis
from utils.nms import nms_numpy, non_max_suppression
from utils.paths import ROOT, RepoFileNotFound, RunDirError, find_repo_file, get_latest_run, increment_path
from utils.augmentations import resample_segments, segment2box, segments2boxes
from utils.checkpoint import training as _training
from utils.data.class_weights import labels_to_class_weights, labels_to_image_weights
from utils.dataset_config import check_dataset
from utils.engine.schedule import one_cycle
from utils.torch_utils import RANK, intersect_dicts, set_seed as init_seeds


def strip_optimizer(f="best.pt", s=""):
    """ultralytics' call: rewrite checkpoint f (or save it as s) as a final one, the EMA as the model in fp16 without
    the optimizer. A detection, segmentation or classification checkpoint alike."""
    return _training.strip_optimizer(f, s, build_model=build_any_model)

def is_writeable(dir, test=False):
    """Whether files can be written in folder dir (test is accepted: the check always tries a real write)."""
    return _is_writeable(dir)


def download(url, dir=".", unzip=True, delete=True, curl=False, threads=1, retry=3):
    """Fetch url (or a list of them) into dir and unpack .zip/.tar archives there by the dataset-archive rules
    (bounded, no code, nothing outside dir). The caller asked for it; one try, in this thread."""
    _fetch.download(url, dir, unpack=unzip, delete=delete)


def unzip_file(file, path=None, exclude=(".DS_Store", "__MACOSX")):
    """Unpack a zip into path (default: beside it) by the dataset-archive rules; returns the files written."""
    return extract_archive(file, Path(path) if path else Path(file).parent)


def imread(filename, flags=cv2.IMREAD_COLOR):
    """An image as cv2.imread gives it, from any file name; None when it cannot be read (as cv2.imread)."""
    try:
        return read_image(filename, flags)
    except FileNotFoundError:
        return None


def imwrite(filename, img):
    """Write an image (format from the suffix) whole or not at all; True when written."""
    try:
        write_image(filename, img)
        return True
    except OSError:
        return False


def imshow(path, im):
    cv2.imshow(str(path).encode("unicode_escape").decode(), im)


def get_default_args(func):
    """{name: default} of func's parameters that have one."""
    params = inspect.signature(func).parameters.items()
    return {k: v.default for k, v in params if v.default is not inspect.Parameter.empty}


def methods(instance):
    """Names of instance's public methods."""
    return [f for f in dir(instance) if callable(getattr(instance, f)) and not f.startswith("__")]


__all__ = ["AUTOINSTALL", "CONFIG_DIR", "DATASETS_DIR", "FONT", "LOGGER", "NUM_THREADS", "Profile", "RANK", "ROOT",
           "RepoFileNotFound", "RunDirError", "TQDM", "WorkingDirectory", "check_amp", "check_dataset", "check_file",
           "check_font", "check_git_info", "check_git_status", "check_img_size", "check_imshow", "check_online",
           "check_requirements", "check_suffix", "check_version", "check_yaml", "clean_str", "clip_boxes",
           "clip_segments", "coco80_to_coco91_class", "colorstr", "cv2", "download", "emojis", "file_date",
           "file_size", "find_repo_file", "get_default_args", "get_latest_run", "git_describe", "imread", "imshow",
           "imwrite", "increment_path", "init_seeds", "intersect_dicts", "is_colab", "is_docker", "is_jupyter",
           "is_kaggle", "is_writeable", "labels_to_class_weights", "labels_to_image_weights", "make_divisible",
           "methods", "nms_numpy", "non_max_suppression", "one_cycle", "print_args", "print_mutation",
           "resample_segments", "save_one_txt", "scale_boxes", "scale_segments", "segment2box", "segments2boxes",
           "strip_optimizer", "unzip_file", "url2file", "user_config_dir", "xyn2xy", "xywh2xyxy", "xywhn2xyxy",
           "xyxy2xywh", "xyxy2xywhn", "yaml_load", "yaml_save"]
