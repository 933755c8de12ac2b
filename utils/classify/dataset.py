"""ImageFolder classification data as ultralytics' classify scripts read it: root/<class>/<image>, classes are the
sorted folder names, images sorted within each (utils/classify/folders.py: hidden folders are never classes, and a
split is labelled with the run's one class list by folder name); eval transform = centred square crop resized to
imgsz (cv2 INTER_LINEAR), BGR -> RGB, /255, ImageNet mean/std; training transform = utils/classify/augment.py.
numpy only; the collate makes framework tensors.

The trainer's loaders (training_loader) yield uint8 RGB images, normalised on the device by the task
(utils/tasks/classify.py), as the detection loaders do: a quarter of the bytes through the workers' queues.
classify/val.py's loader yields the normalised float images.

A bad image (unreadable, empty, not decodable) or cache stops with one line naming the file, also when a DataLoader
worker meets it (utils/classify/errors.py); --cache disk: utils/classify/npy_cache.py."""
from pathlib import Path

import cv2
import numpy as np

from utils.augmentations import IMAGENET_MEAN, IMAGENET_STD, center_crop, classify_transform  # noqa: F401
from utils.backend import from_numpy, torch
from utils.classify.augment import train_transform
from utils.classify.errors import ClassificationDataError
from utils.classify.folders import (IMG_EXTENSIONS, find_classes, image_folder_samples, missing_class_folders,
                                    warn_missing_classes)
from utils.classify.npy_cache import NpyImageCache
from utils.data.files import NotRegularFileError, open_regular_file
from utils.data.loader import make_loader
from utils.distributed import DistContext

__all__ = ("IMG_EXTENSIONS", "ClassificationDataError", "ClassificationDataset", "find_classes",
           "image_folder_samples", "read_image", "training_loader", "create_classification_dataloader")

CACHE_CHOICES = (None, False, True, "ram", "disk")


def read_image(f):
    """The BGR uint8 image in file f, or one line naming it: it may be raised in a DataLoader worker, and the
    entry script prints it as is (utils/classify/errors.py)."""
    try:
        with open_regular_file(f) as fh:  # the listing skipped FIFOs; one swapped in since is refused, not read
            buf = np.fromfile(fh, np.uint8)
    except NotRegularFileError as e:
        raise ClassificationDataError(f"{e.strerror}; it cannot be read as an image") from None
    except OSError as e:
        raise ClassificationDataError(f"{f}: cannot read image ({e.strerror or e}); remove or replace it") from None
    if not buf.size:
        raise ClassificationDataError(f"{f}: empty file (0 bytes), not an image; remove or replace it")
    try:
        im = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    except cv2.error:  # some decoders raise on damaged data instead of returning None
        im = None
    if im is None:
        raise ClassificationDataError(f"{f}: not a readable image ({buf.size} bytes OpenCV cannot decode); remove or "
                                      "replace it")
    return im


def center_crop_uint8(im, size):
    """BGR uint8 HWC -> the evaluation crop as RGB uint8 CHW (classify_transform before its /255 and mean/std)."""
    return np.ascontiguousarray(center_crop(im, size)[:, :, ::-1].transpose(2, 0, 1))


class ClassificationDataset(torch.utils.data.Dataset):
    """Items (image, class index). The image is CHW float32 normalised (the training transforms with augment, else
    the evaluation ones), or with raw=True RGB uint8 CHW before normalisation, for the trainer.
    Positional arguments in official order: (root, augment, imgsz, cache).
    classes: the run's one class list (the training split's folders, or a model's names), which root's folders are
    matched to by name (utils/classify/folders.py), `source` saying where it comes from; None: root's own folders.
    cache: 'ram' (or True) keeps decoded images in memory; 'disk' keeps a keyed .npy per image
    (utils/classify/npy_cache.py)."""

    def __init__(self, root, augment=False, imgsz=224, cache=False, raw=False, classes=None, source=None):
        self.root = Path(root)
        if classes is None:
            self.classes = find_classes(self.root)
        else:
            self.classes = list(classes)
            source = source or "the training classes"
            warn_missing_classes(self.root, missing_class_folders(self.root, self.classes, source), source)
        self.samples = image_folder_samples(self.root, self.classes)
        self.imgsz = imgsz
        self.augment, self.raw = bool(augment), bool(raw)
        if cache not in CACHE_CHOICES:
            raise ClassificationDataError(f"--cache {cache}: give ram or disk (or leave --cache out)")
        self.cache_ram = cache is True or cache == "ram"
        self.disk_cache = NpyImageCache() if cache == "disk" else None
        self.ims = [None] * len(self.samples)

    def __len__(self):
        return len(self.samples)

    def load_image(self, i):
        f = self.samples[i][0]
        im = self.ims[i]
        if im is not None:
            return im
        if self.disk_cache is not None:
            return self.disk_cache.load(f, read_image)
        im = read_image(f)
        if self.cache_ram:
            self.ims[i] = im
        return im

    def __getitem__(self, i):
        f, j = self.samples[i]
        im = self.load_image(i)
        if self.augment:
            im = train_transform(im, self.imgsz)
            return (im if self.raw else normalize_uint8(im)), j
        if self.raw:
            return center_crop_uint8(im, self.imgsz), j
        return classify_transform(im, self.imgsz), j


def normalize_uint8(im):
    """RGB uint8 CHW -> the normalised float32 CHW classify_transform makes (/255, ImageNet mean and std)."""
    mean = np.array(IMAGENET_MEAN, np.float32).reshape(3, 1, 1)
    std = np.array(IMAGENET_STD, np.float32).reshape(3, 1, 1)
    return (im.astype(np.float32) / np.float32(255.0) - mean) / std


def collate_classification(batch):
    ims, labels = zip(*batch)
    return from_numpy(np.stack(ims, 0)), from_numpy(np.array(labels, np.int64))


def collate_training(batch):
    """(uint8 images, class indices, paths, None): the batch layout the training loop unpacks (detection's shapes
    slot unused)."""
    ims, labels, paths = zip(*batch)
    return from_numpy(np.stack(ims, 0)), from_numpy(np.array(labels, np.int64)), list(paths), None


class _WithPaths(torch.utils.data.Dataset):
    """The dataset's items with their file paths (the trainer's batch plots name the classes from them)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        return (*self.dataset[i], self.dataset.samples[i][0])

    def __getattr__(self, name):
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)


def training_loader(path, imgsz=224, batch_size=64, augment=False, cache=False, workers=8, shuffle=False, seed=0,
                    rank=0, world_size=1, classes=None, source=None):
    """(loader, dataset) for the trainer: uint8 RGB batches (collate_training); this rank's share under DDP.
    classes, source: the run's class list and where it comes from (see ClassificationDataset)."""
    dataset = ClassificationDataset(path, imgsz=imgsz, augment=augment, cache=cache, raw=True, classes=classes,
                                    source=source)
    loader = make_loader(_WithPaths(dataset), batch_size, workers=workers, shuffle=shuffle, seed=seed,
                         rank=max(rank, 0), world_size=world_size, collate=collate_training)
    return loader, dataset


def create_classification_dataloader(path, imgsz=224, batch_size=16, augment=True, cache=False, rank=-1, workers=8,
                                     shuffle=True, seed=0, classes=None, source=None):
    """Official's loader of normalised (images, class indices) batches, with its defaults (augment, shuffle). rank:
    -1 one process, else this process's share of the launcher's job (official SmartDistributedSampler's role)."""
    dataset = ClassificationDataset(path, imgsz=imgsz, augment=augment, cache=cache, classes=classes, source=source)
    dist = DistContext() if rank == -1 else DistContext.from_env()
    return make_loader(dataset, batch_size, workers=workers, shuffle=shuffle, seed=seed, rank=dist.rank,
                       world_size=dist.world_size, collate=collate_classification)
