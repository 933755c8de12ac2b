"""ultralytics' import path for the data pipeline, which lives in the utils/data package (see its __init__ for the
module map): `from utils.dataloaders import create_dataloader, LoadImagesAndLabels, LoadImages, ...` keeps working.
Also official's classification loader (utils/classify/dataset.py: create_classification_dataloader,
ClassificationDataset), InfiniteDataLoader and PIN_MEMORY (utils/data/loader.py), SmartDistributedSampler
(utils/data/sampler.py), letterbox (utils/augmentations.py) and LoadScreenshots (utils/data/media.py: screen capture
is not supported, making one raises StreamError)."""
from utils.data import (HELP_URL, IMG_FORMATS, VID_FORMATS, LabelError, LoadImages, LoadImagesAndLabels, SeedWorker,
                        StageTimer, YoloSampler, collate_fn, collate_quad, create_dataloader, exif_size,
                        exif_transpose, get_hash, img2label_paths, list_image_files, make_loader, rank_share,
                        rect_batch_shapes, verify_image_label)
from utils.augmentations import letterbox
from utils.classify.dataset import ClassificationDataset, create_classification_dataloader
from utils.data.files import is_writeable
from utils.data.image_cache import disk_cache_dir, npy_path
from utils.data.label_cache import CACHE_VERSION, cache_path_for
from utils.data.loader import PIN_MEMORY, InfiniteDataLoader
from utils.data.media import LoadScreenshots
from utils.data.sampler import SmartDistributedSampler
from utils.streams import LoadStreams

__all__ = ["CACHE_VERSION", "HELP_URL", "IMG_FORMATS", "PIN_MEMORY", "VID_FORMATS", "ClassificationDataset",
           "InfiniteDataLoader", "LabelError", "LoadImages", "LoadImagesAndLabels", "LoadScreenshots", "LoadStreams",
           "SeedWorker", "SmartDistributedSampler", "StageTimer", "YoloSampler", "cache_path_for", "collate_fn",
           "collate_quad", "create_classification_dataloader", "create_dataloader", "disk_cache_dir", "exif_size",
           "exif_transpose", "get_hash", "img2label_paths", "is_writeable", "letterbox", "list_image_files",
           "make_loader", "npy_path", "rank_share", "rect_batch_shapes", "verify_image_label"]
