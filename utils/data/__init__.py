"""The data pipeline, one concern per module:

    files.py        which images a path means, image -> label path, EXIF sizes
    labels.py       verify and scan image/label pairs; the one-line label errors
    label_cache.py  the scan saved as labels/<split>.cache (arrays + JSON, never a pickle)
    image_cache.py  --cache ram / disk
    dataset.py      LoadImagesAndLabels: items for training and validation
    mosaic.py       the 4- and 9-image mosaics (fused one-warp path and ultralytics' canvas path)
    rect.py         --rect order and batch shapes
    collate.py      items -> batches (and --quad)
    sampler.py      per-rank shares, per-epoch order, worker seeds
    loader.py       create_dataloader / make_loader
    early_start.py  EarlyStartLoader: a pass begun before the loop asks for it
    media.py        LoadImages, the image/video source of detect.py
    profiling.py    StageTimer, installed from outside to time the dataset's stages

utils/dataloaders.py re-exports the ultralytics names from here.
"""
from utils.data.collate import collate_fn, collate_quad
from utils.data.early_start import EarlyStartLoader
from utils.data.dataset import LoadImagesAndLabels
from utils.data.files import (HELP_URL, IMG_FORMATS, VID_FORMATS, exif_size, exif_transpose, img2label_paths,
                              list_image_files)
from utils.data.label_cache import get_hash
from utils.data.labels import LabelError, verify_image_label
from utils.data.loader import create_dataloader, make_loader
from utils.data.media import LoadImages
from utils.data.profiling import StageTimer
from utils.data.rect import rect_batch_shapes
from utils.data.sampler import SeedWorker, YoloSampler, rank_share

__all__ = ["EarlyStartLoader", "HELP_URL", "IMG_FORMATS", "VID_FORMATS", "LabelError", "LoadImages",
           "LoadImagesAndLabels", "SeedWorker", "StageTimer", "YoloSampler", "collate_fn", "collate_quad",
           "create_dataloader", "exif_size", "exif_transpose", "get_hash", "img2label_paths", "list_image_files",
           "make_loader", "rank_share", "rect_batch_shapes", "verify_image_label"]
