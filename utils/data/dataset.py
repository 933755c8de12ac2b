"""The YOLO detection dataset with ultralytics semantics, built for throughput.

Where the time goes (coco128, 640, hyp.scratch-low; benchmarks/loader.py): JPEG decode dominates, so the mosaic is
planned before decoding (utils/data/mosaic.py); HSV is one colour transform whose back-conversion emits RGB; the CHW
batch is written with cv2.split (utils/data/collate.py). Workers persist across epochs; the label scan is cached
(utils/data/label_cache.py) and decoded images can be (utils/data/image_cache.py).
"""
import math
import os
import random
from pathlib import Path

import cv2
import numpy as np

from utils.atomic_files import write_atomically
from utils.augmentations import augment_hsv, letterbox, mixup, random_perspective
from utils.backend import torch
from utils.data.collate import collate_fn, collate_quad
from utils.data.files import HELP_URL, WARN, img2label_paths, list_image_files
from utils.data.image_cache import fill_image_cache, ram_cache_fits, read_npy_cache
from utils.data.label_cache import (CACHE_VERSION, cache_key, cache_path_for, read_cache,
                                    remove_stale_cache_temp_files, write_cache)
from utils.boxes import xywhn2xyxy, xyxy2xywhn
from utils.data.labels import LabelError, check_classes, require_labels, scan_labels
from utils.data.media import read_image
from utils.data.mosaic import MosaicMixin
from utils.data.rect import rect_batch_shapes, rect_order
from utils.data.sampler import rank_share
from utils.log import LOGGER

_CACHE_IMAGES = {True: "ram", "True": "ram", "true": "ram", False: None, "": None}


class LoadImagesAndLabels(MosaicMixin, torch.utils.data.Dataset):
    """YOLO detection dataset. Items are (im CHW RGB uint8 numpy, labels (n, 6) float32 numpy [0, cls, xywhn],
    path, shapes) and collate_fn turns a list of them into framework tensors."""

    cache_version = CACHE_VERSION
    # The methods that make an item, by stage: utils.data.profiling.StageTimer times them (benchmarks/loader.py).
    STAGES = {"load_image": "read/decode", "source_image": "read/decode", "load_mosaic": "mosaic",
              "load_mosaic9": "mosaic", "warp_tile": "perspective", "canvas_perspective": "perspective",
              "load_letterboxed": "letterbox/perspective", "augment_colour": "hsv", "flip_and_format": "flip/format"}
    collate_fn = staticmethod(collate_fn)
    collate_fn4 = staticmethod(collate_quad)

    def __init__(self, path, img_size=640, batch_size=16, augment=False, hyp=None, rect=False, image_weights=False,
                 cache_images=False, single_cls=False, stride=32, pad=0.0, min_items=0, prefix="", rank=0, seed=0,
                 world_size=1, shuffle=True):  # official's positional order up to seed; this project's after it
        self.img_size = img_size
        self.augment = augment
        self.hyp = hyp or {}
        self.image_weights = image_weights
        self.rect = False if image_weights else rect
        self.mosaic = self.augment and not self.rect  # load 4 images at a time into a mosaic (only during training)
        self.mosaic_border = [-img_size // 2, -img_size // 2]
        self.stride = stride
        self.path = path
        self.prefix = prefix

        self._read_labels(path, prefix, augment)
        if min_items:  # drop images with fewer than min_items labels
            keep = [i for i, x in enumerate(self.labels) if len(x) >= min_items]
            LOGGER.info(f"{prefix}{len(self.im_files) - len(keep)}/{len(self.im_files)} images filtered from dataset")
            self._reorder(np.array(keep, dtype=int))

        n = len(self.shapes)
        self.batch = np.arange(n) // batch_size  # batch index of each image (rect shapes are per batch)
        self.n = n
        self.indices = np.arange(n)

        if single_cls:
            for x in self.labels:
                x[:, 0] = 0

        if self.rect:  # sort by aspect ratio, one letterbox shape per batch
            irect, ar = rect_order(self.shapes, self.orientations)
            self._reorder(irect)
            self.batch_shapes = rect_batch_shapes(ar, batch_size, img_size, stride, pad)
        else:
            self.batch_shapes = None

        # DDP: this rank's fixed share (the sampler computes the same one). Mosaic partners come from it and
        # --cache holds only it.
        self.indices = rank_share(n, world_size, rank, seed, None if shuffle else batch_size)

        self._start_image_cache(cache_images, prefix)

    def _read_labels(self, path, prefix, augment):
        """The images under path that can be used, with their labels, shapes, orientations and segments (through
        the label cache); the unusable ones were named in warnings."""
        self.im_files = list_image_files(path, prefix)
        self.label_files = img2label_paths(self.im_files)
        scan = self._labels_cache()
        if not scan["files"]:
            raise LabelError(f"{prefix}None of the {len(self.im_files)} images in {path} could be used (each one is "
                             f"named in a warning above): fix or replace them. {HELP_URL}")
        if augment:
            require_labels(scan["labels"], path, Path(self.label_files[0]).parent, prefix)
        self.labels = [np.asarray(x, dtype=np.float32).reshape(-1, 5) for x in scan["labels"]]
        self.shapes = np.array(scan["shapes"], dtype=np.int64).reshape(-1, 2)  # (w, h) as displayed (EXIF applied)
        self.orientations = np.array(scan["orientations"], dtype=np.uint8)
        self.segments = list(scan["segments"])
        self.im_files = list(scan["files"])
        self.label_files = img2label_paths(self.im_files)

    def _start_image_cache(self, cache_images, prefix):
        """Image caches: ram keeps resized decoded images, disk keeps them as .npy at the training size."""
        self.ims = [None] * self.n
        self.npy_files = [None] * self.n
        cache_images = _CACHE_IMAGES.get(cache_images, cache_images)
        if cache_images == "ram" and not self.check_cache_ram(prefix=prefix):
            cache_images = None
        self.cache = cache_images
        if cache_images:
            fill_image_cache(self, cache_images)

    # ---- labels --------------------------------------------------------------------------------------------
    def _reorder(self, idx):
        self.im_files = [self.im_files[i] for i in idx]
        self.label_files = [self.label_files[i] for i in idx]
        self.labels = [self.labels[i] for i in idx]
        self.segments = [self.segments[i] for i in idx]
        self.shapes = self.shapes[idx]
        self.orientations = self.orientations[idx]

    def _labels_cache(self):
        """The label scan, from the cache file when it describes exactly these files, else scanned and saved."""
        # beside the labels of the first image that exists: a list naming a missing file elsewhere writes nothing there
        first = next((lb for lb, im in zip(self.label_files, self.im_files) if os.path.isfile(im)), self.label_files[0])
        prefix, path = self.prefix, cache_path_for([first])
        remove_stale_cache_temp_files(path)
        key = cache_key(self.label_files + self.im_files)
        scan = read_cache(path, key, self.im_files, prefix)
        hit = scan is not None
        if not hit:
            scan = scan_labels(self.im_files, self.label_files, prefix)
            if scan["files"]:  # no image usable: nothing to cache, and no file beside folders the list only names
                write_cache(path, scan, key, prefix)
        nf, nm, ne, nc, n = scan["results"]
        LOGGER.info(f"{prefix}{'Scanned cache' if hit else 'Scanning'} '{path.with_suffix('')}'... {nf} images, "
                    f"{nm + ne} backgrounds, {nc} corrupt")
        for m in scan["msgs"]:  # one line per dropped or repaired file, every run
            LOGGER.warning(m)
        if nf == 0:
            LOGGER.warning(f"{prefix}{WARN} No labels found in {path.parent}. {HELP_URL}")
        self.cache_file = path
        self.cache_hit = hit
        self.label_msgs = list(scan["msgs"])
        self.scan_results = tuple(scan["results"])
        return scan

    def check_classes(self, nc):
        """Stop with a message naming the label file and line when a class id is >= nc."""
        check_classes(self.labels, self.label_files, self.im_files, nc, self.prefix)

    # ---- images --------------------------------------------------------------------------------------------
    def resized_shape(self, i):
        """(h, w) of image i after load_image's resize (the longest side to img_size), without reading it."""
        w0, h0 = self.shapes[i]
        r = self.img_size / max(h0, w0)
        if r == 1:
            return int(h0), int(w0)
        return math.ceil(h0 * r), math.ceil(w0 * r)

    def _read_file(self, f, reduce=1):
        """Decode an image file to BGR (EXIF orientation applied, like cv2.imread), at 1/reduce size."""
        flags = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
                 8: cv2.IMREAD_REDUCED_COLOR_8}[reduce]
        # np.fromfile + imdecode is ~20% faster than cv2.imread here (measured) and handles non-ASCII paths
        return read_image(f, flags)

    def load_image(self, i):
        """ultralytics' load_image: BGR image with its longest side resized to img_size. Returns
        (im, (h0, w0), (h, w)). Served from the RAM or disk cache when there is one."""
        w0, h0 = (int(x) for x in self.shapes[i])
        im = self.ims[i]
        if im is not None:
            return im, (h0, w0), im.shape[:2]
        fn = self.npy_files[i]
        if fn is not None and os.path.exists(fn):
            im = read_npy_cache(fn, self.resized_shape(i))
            if im is not None:
                return im, (h0, w0), im.shape[:2]
        im = self._read_file(self.im_files[i])
        h0, w0 = im.shape[:2]  # the decoded size (EXIF-rotated like the label cache's)
        r = self.img_size / max(h0, w0)
        if r != 1:
            interp = cv2.INTER_LINEAR if (self.augment or r > 1) else cv2.INTER_AREA
            im = cv2.resize(im, (math.ceil(w0 * r), math.ceil(h0 * r)), interpolation=interp)
        if fn is not None and not os.path.exists(fn):  # a damaged cache file was removed above: rebuild it
            try:
                write_atomically(fn, lambda fh: np.save(fh, im))
            except OSError as e:  # a full disk: train on from the decoded image, the next epoch tries again
                LOGGER.warning(f"WARNING: cannot rewrite --cache disk file {fn} ({e.strerror or e})")
        return im, (h0, w0), im.shape[:2]

    def source_image(self, i, max_scale):
        """The cheapest decoded image for a warp whose largest linear scale from the ORIGINAL image is max_scale:
        a cached resized image when there is one, else the file decoded at 1/2, 1/4 or 1/8 when the warp
        shrinks that much anyway (libjpeg's DCT scaling, no quality lost at the output size)."""
        if self.ims[i] is not None or self.npy_files[i] is not None:
            # a cached image: load_image is the one reader of caches (a damaged .npy is checked, named in one
            # warning, decoded again from the image and rewritten there), never np.load here
            return self.load_image(i)[0]
        f = self.im_files[i]
        reduce = 1
        if f.lower().endswith((".jpg", ".jpeg")):
            while reduce < 8 and max_scale * reduce * 2 <= 1.0:
                reduce *= 2
        return self._read_file(f, reduce)

    def check_cache_ram(self, safety_margin=0.1, prefix=""):
        """True when the resized images fit in available memory with a margin (exact sizes from the label cache)."""
        b = sum(h * w * 3 for h, w in (self.resized_shape(i) for i in self.indices))
        return ram_cache_fits(b, safety_margin, prefix)

    # ---- items ---------------------------------------------------------------------------------------------
    def __len__(self):
        return len(self.im_files)

    def __getitem__(self, index):
        """index is a dataset index: the sampler already applied `indices` (image weights) so that persistent
        workers never see a stale copy of them."""
        hyp = self.hyp
        if self.mosaic and random.random() < hyp.get("mosaic", 0.0):
            im, labels = self.load_mosaic(index)
            shapes = None
            if random.random() < hyp.get("mixup", 0.0):
                im, labels = mixup(im, labels, *self.load_mosaic(random.choice(self.indices)))
        else:
            im, labels, shapes = self.load_letterboxed(index)
        labels = np.asarray(labels, dtype=np.float32).reshape(-1, 5)
        if len(labels):
            labels[:, 1:5] = xyxy2xywhn(labels[:, 1:5], w=im.shape[1], h=im.shape[0], clip=True, eps=1e-3)
        rgb = self.augment_colour(im) if self.augment else cv2.cvtColor(im, cv2.COLOR_BGR2RGB)
        rgb, labels = self.flip_and_format(rgb, labels)
        labels_out = np.zeros((len(labels), 6), np.float32)
        labels_out[:, 1:] = labels
        return rgb.transpose(2, 0, 1), labels_out, self.im_files[index], shapes

    def load_letterboxed(self, index):
        """One image letterboxed to its batch shape (--rect) or img_size, randomly warped when augmenting:
        (im BGR, labels (n, 5) [cls, xyxy pixels], shapes for mapping boxes back to the original)."""
        hyp = self.hyp
        im, (h0, w0), (h, w) = self.load_image(index)
        shape = self.batch_shapes[self.batch[index]] if self.rect else self.img_size
        im, ratio, pad = letterbox(im, shape, auto=False, scaleup=self.augment)
        shapes = (h0, w0), ((h / h0, w / w0), pad)
        labels = self.labels[index].copy()
        if labels.size:
            labels[:, 1:] = xywhn2xyxy(labels[:, 1:], ratio[0] * w, ratio[1] * h, padw=pad[0], padh=pad[1])
        if self.augment:
            im, labels = random_perspective(im, labels, degrees=hyp["degrees"], translate=hyp["translate"],
                                            scale=hyp["scale"], shear=hyp["shear"], perspective=hyp["perspective"])
        return im, labels, shapes

    def augment_colour(self, im):
        """HSV jitter of a BGR image; returns it as RGB (the back-conversion emits RGB, so the flip is free)."""
        hyp = self.hyp
        return augment_hsv(im, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"], to_rgb=True)

    def flip_and_format(self, rgb, labels):
        """Random up-down and left-right flips of an RGB image and its [cls, xywhn] labels (when augmenting)."""
        if not self.augment:
            return rgb, labels
        hyp = self.hyp
        if random.random() < hyp["flipud"]:
            rgb = cv2.flip(rgb, 0)
            if len(labels):
                labels[:, 2] = 1 - labels[:, 2]
        if random.random() < hyp["fliplr"]:
            rgb = cv2.flip(rgb, 1)
            if len(labels):
                labels[:, 1] = 1 - labels[:, 1]
        return rgb, labels
