"""ultralytics' import path for the data pipeline, which lives in the utils/data package (see its __init__ for the
module map): `from utils.dataloaders import create_dataloader, LoadImagesAndLabels, LoadImages, ...` keeps working."""
from utils.data import (HELP_URL, IMG_FORMATS, VID_FORMATS, LabelError, LoadImages, LoadImagesAndLabels, SeedWorker,
                        StageTimer, YoloSampler, collate_fn, collate_quad, create_dataloader, exif_size,
                        exif_transpose, get_hash, img2label_paths, list_image_files, make_loader, rank_share,
                        rect_batch_shapes, verify_image_label)
from utils.data.files import is_writeable
from utils.data.image_cache import disk_cache_dir, npy_path
from utils.data.label_cache import CACHE_VERSION, cache_path_for
from utils.streams import LoadStreams

__all__ = ["CACHE_VERSION", "HELP_URL", "IMG_FORMATS", "VID_FORMATS", "LabelError", "LoadImages",
           "LoadImagesAndLabels", "LoadStreams", "SeedWorker", "StageTimer", "YoloSampler", "cache_path_for", "collate_fn",
           "collate_quad", "create_dataloader", "disk_cache_dir", "exif_size", "exif_transpose", "get_hash",
           "img2label_paths", "is_writeable", "list_image_files", "make_loader", "npy_path", "rank_share",
           "rect_batch_shapes", "verify_image_label"]
