"""ImageFolder classification data as ultralytics' classify scripts read it: root/<class>/<image>, classes are the
sorted folder names, images sorted within each; eval transform = centred square crop resized to imgsz (cv2
INTER_LINEAR), BGR -> RGB, /255, ImageNet mean/std. numpy only; the collate makes framework tensors."""
import os
from pathlib import Path

import cv2
import numpy as np

from utils.backend import from_numpy, torch
from utils.data.loader import make_loader
from utils.errors import UserError

IMAGENET_MEAN = 0.485, 0.456, 0.406  # RGB
IMAGENET_STD = 0.229, 0.224, 0.225
# the extensions torchvision's ImageFolder accepts (what official classification datasets hold)
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class ClassificationDataError(UserError, ValueError):
    pass


def find_classes(root):
    root = Path(root)
    if not root.is_dir():
        raise ClassificationDataError(f"{root}: classification data folder not found (expected {root}/<class>/<image>)")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise ClassificationDataError(f"{root}: no class folders inside (expected {root}/<class>/<image>)")
    return classes


def image_folder_samples(root, classes):
    """[(file, class index)] in ImageFolder's order: classes in order, each folder walked with sorted names."""
    samples = []
    for ci, c in enumerate(classes):
        for dirpath, _, fnames in sorted(os.walk(Path(root) / c, followlinks=True)):
            samples.extend((os.path.join(dirpath, f), ci) for f in sorted(fnames) if f.lower().endswith(IMG_EXTENSIONS))
    if not samples:
        raise ClassificationDataError(f"{root}: no images ({', '.join(IMG_EXTENSIONS)}) in its class folders")
    return samples


def center_crop(im, size):
    """The centred square of side min(h, w), resized to size x size (or (h, w)) with cv2 INTER_LINEAR."""
    h, w = (size, size) if isinstance(size, int) else size
    imh, imw = im.shape[:2]
    m = min(imh, imw)
    top, left = (imh - m) // 2, (imw - m) // 2
    return cv2.resize(im[top:top + m, left:left + m], (w, h), interpolation=cv2.INTER_LINEAR)


def classify_transform(im, size):
    """BGR uint8 HWC -> normalized float32 CHW RGB (the official eval transforms)."""
    x = center_crop(im, size)[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / np.float32(255.0)
    mean = np.array(IMAGENET_MEAN, np.float32).reshape(3, 1, 1)
    std = np.array(IMAGENET_STD, np.float32).reshape(3, 1, 1)
    return np.ascontiguousarray((x - mean) / std)


class ClassificationDataset(torch.utils.data.Dataset):
    """Items (CHW float32 normalized image, class index). augment is not supported yet (evaluation transforms)."""

    def __init__(self, root, imgsz=224, augment=False, cache=False):
        self.root = Path(root)
        self.classes = find_classes(self.root)
        self.samples = image_folder_samples(self.root, self.classes)
        self.imgsz = imgsz
        self.cache_ram = cache is True or cache == "ram"
        self.ims = [None] * len(self.samples)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        f, j = self.samples[i]
        im = self.ims[i]
        if im is None:
            im = cv2.imdecode(np.fromfile(f, np.uint8), cv2.IMREAD_COLOR)
            if im is None:
                raise ClassificationDataError(f"{f}: not a readable image; remove or replace it")
            if self.cache_ram:
                self.ims[i] = im
        return classify_transform(im, self.imgsz), j


def collate_classification(batch):
    ims, labels = zip(*batch)
    return from_numpy(np.stack(ims, 0)), from_numpy(np.array(labels, np.int64))


def create_classification_dataloader(path, imgsz=224, batch_size=16, augment=False, cache=False, rank=-1, workers=8,
                                     shuffle=False, seed=0):
    dataset = ClassificationDataset(path, imgsz=imgsz, augment=augment, cache=cache)
    loader = make_loader(dataset, batch_size, workers=workers, shuffle=shuffle, seed=seed,
                         collate=collate_classification)
    return loader
