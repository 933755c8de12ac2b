"""Datasets and loaders with ultralytics/yolov5 semantics, built for throughput.

Where the time goes and what is done about it (measured on coco128, 640, hyp.scratch-low, see benchmarks/loader.py):
- JPEG decode dominates: the mosaic reads 4 images per sample. The mosaic is PLANNED from the cached image sizes
  before anything is decoded, so tiles that end up outside the output are never read, and an image that will be
  shrunk >= 2x is decoded at 1/2, 1/4 or 1/8 resolution by libjpeg (cv2.IMREAD_REDUCED_COLOR_*).
- ultralytics resizes each tile, pastes it into a 2x (1280^2) canvas and then warps the whole canvas. Here the
  placement and the random affine are composed into ONE matrix per tile and each tile is warped once, straight
  into its part of the 640^2 output (when perspective == 0; otherwise the classic path runs).
- HSV is one 3-channel LUT and the back-conversion emits RGB; CHW layout is produced with cv2.split into the
  batch buffer. Workers persist across epochs; the label cache (*.cache) is built once, in parallel.
"""
import glob
import hashlib
import math
import os
import random
import threading
import time
from itertools import repeat
from multiprocessing.pool import ThreadPool
from pathlib import Path

import cv2
import numpy as np
from PIL import ExifTags, Image, ImageFile, ImageOps

from utils.augmentations import (augment_hsv, augment_hsv_lut, box_candidates, copy_paste, letterbox, mixup,
                                 random_affine_matrix, random_perspective, segments2boxes, transform_boxes,
                                 transform_segments, warp_into)
from utils.backend import from_numpy, get_rank, get_world_size, torch
from utils.general import LOGGER, xywhn2xyxy, xyn2xy, xyxy2xywhn

IMG_FORMATS = "bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm"
VID_FORMATS = "asf", "avi", "gif", "m4v", "mkv", "mov", "mp4", "mpeg", "mpg", "ts", "wmv"
NUM_THREADS = min(8, max(1, os.cpu_count() - 1))
CACHE_VERSION = "yolov5-fast-1"
WARN = "WARNING ⚠️"
HELP_URL = "See https://docs.ultralytics.com/yolov5/tutorials/train_custom_data"

_ORIENTATION = next((k for k, v in ExifTags.TAGS.items() if v == "Orientation"), 274)


# ----------------------------------------------------------------------------------------------------------------
# Files, labels, label cache
def img2label_paths(img_paths):
    """/images/ -> /labels/ and the extension -> .txt (last /images/ in the path, like ultralytics)."""
    sa, sb = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return [sb.join(x.rsplit(sa, 1)).rsplit(".", 1)[0] + ".txt" for x in img_paths]


def get_hash(paths):
    """One hash over file names and sizes: changes when a file is added, removed, renamed or resized."""
    size = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    h = hashlib.sha256(str(size).encode())
    h.update("".join(paths).encode())
    return h.hexdigest()


def exif_size(img):
    """PIL image size (w, h) after its EXIF rotation."""
    s = img.size
    try:
        rotation = img.getexif().get(_ORIENTATION)
        if rotation in (6, 8):  # 90 or 270 degrees
            s = (s[1], s[0])
    except Exception:
        pass
    return s


def list_image_files(path, prefix=""):
    """A folder (recursive), a .txt list of images (relative to the list's folder), a glob, or a list of those."""
    files = []
    for p in path if isinstance(path, (list, tuple)) else [path]:
        p = Path(p)
        if p.is_dir():
            files += glob.glob(str(p / "**" / "*.*"), recursive=True)
        elif p.is_file():
            parent = str(p.parent) + os.sep
            with open(p) as t:
                lines = t.read().strip().splitlines()
            files += [x.replace("./", parent, 1) if x.startswith("./") else x for x in lines if x.strip()]
        elif any(c in str(p) for c in "*?["):
            files += glob.glob(str(p), recursive=True)
        else:
            raise FileNotFoundError(f"{prefix}{p} does not exist")
    files = sorted(x.replace("/", os.sep) for x in files if x.split(".")[-1].lower() in IMG_FORMATS)
    if not files:
        raise FileNotFoundError(f"{prefix}No images found in {path}. Supported formats are {IMG_FORMATS}. {HELP_URL}")
    return files


_PIL_TRUNCATED_LOCK = threading.Lock()


def _restore_jpeg(im_file):
    """Re-save a JPEG that lacks its end marker (truncated): PIL decodes what is there (OpenCV refuses such files),
    EXIF-rotated, written back at quality 100, 4:4:4, atomically, like ultralytics."""
    with _PIL_TRUNCATED_LOCK:  # PIL's switch is global: set it only around this decode
        old = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = True
        try:
            im = ImageOps.exif_transpose(Image.open(im_file))
            im.load()
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = old
    tmp = f"{im_file}.{os.getpid()}.tmp"
    im.save(tmp, "JPEG", subsampling=0, quality=100)
    os.replace(tmp, im_file)


def verify_image_label(args):
    """Check one image/label pair. Returns (im_file, labels (n,5), shape (w,h), segments, nm, nf, ne, nc, msg);
    im_file is None when the pair is dropped, and msg then names the reason."""
    im_file, lb_file, prefix = args
    nm, nf, ne, nc, msg, segments = 0, 0, 0, 0, "", []
    try:
        im = Image.open(im_file)
        im.verify()  # PIL verify
        shape = exif_size(im)
        assert (shape[0] > 9) & (shape[1] > 9), f"image size {shape} <10 pixels"
        assert im.format.lower() in IMG_FORMATS, f"invalid image format {im.format}"
        if im.format.lower() in ("jpg", "jpeg"):
            with open(im_file, "rb") as f:
                f.seek(-2, 2)
                if f.read() != b"\xff\xd9":  # truncated JPEG: re-save it whole
                    try:
                        if not (is_writeable(os.path.dirname(im_file)) and os.access(im_file, os.W_OK)
                                and os.stat(im_file).st_mode & 0o222):
                            raise PermissionError("read-only")
                        _restore_jpeg(im_file)
                        msg = f"{prefix}{WARN} {im_file}: corrupt JPEG restored and saved"
                    except OSError as e:  # read-only data: usable only if OpenCV decodes it as it is
                        if cv2.imdecode(np.fromfile(im_file, np.uint8), cv2.IMREAD_COLOR) is None:
                            raise ValueError(f"truncated JPEG that could not be restored ({e})") from e
                        msg = f"{prefix}{WARN} {im_file}: corrupt JPEG (no end marker), could not restore ({e}); using it"
        if os.path.isfile(lb_file):
            nf = 1
            with open(lb_file) as f:
                rows = [x.split() for x in f.read().strip().splitlines() if len(x.strip())]
            if any(len(x) > 6 for x in rows):  # polygons: class x1 y1 x2 y2 ...
                classes = np.array([x[0] for x in rows], dtype=np.float32)
                segments = [np.array(x[1:], dtype=np.float32).reshape(-1, 2) for x in rows]
                lb = np.concatenate((classes.reshape(-1, 1), segments2boxes(segments)), 1)
            lb = np.array(rows, dtype=np.float32) if not segments else lb.astype(np.float32)
            nl = len(lb)
            if nl:
                assert lb.ndim == 2 and lb.shape[1] == 5, \
                    f"labels require 5 columns, {lb.shape[1] if lb.ndim == 2 else 'ragged'} columns detected"
                assert np.isfinite(lb).all(), "non-finite label values"
                assert (lb >= 0).all(), f"negative label values {lb[lb < 0]}"
                assert (lb[:, 1:] <= 1).all(), f"non-normalized or out of bounds coordinates {lb[:, 1:][lb[:, 1:] > 1]}"
                _, i = np.unique(lb, axis=0, return_index=True)
                if len(i) < nl:  # duplicate rows
                    i = np.sort(i)
                    lb = lb[i]
                    if segments:
                        segments = [segments[x] for x in i]
                    msg = f"{prefix}{WARN} {im_file}: {nl - len(i)} duplicate labels removed"
            else:
                ne = 1  # label file empty: a background image
                lb = np.zeros((0, 5), dtype=np.float32)
        else:
            nm = 1  # label missing: a background image
            lb = np.zeros((0, 5), dtype=np.float32)
        return im_file, lb, shape, segments, nm, nf, ne, nc, msg
    except Exception as e:
        nc = 1
        msg = f"{prefix}{WARN} {im_file}: ignoring corrupt image/label: {e}"
        return None, None, None, None, nm, nf, ne, nc, msg


def is_writeable(d):
    """A folder we may write to: os.access, and also its mode bits, because root passes os.access on folders
    that are marked read-only (shared data must never be modified)."""
    try:
        return os.access(d, os.W_OK) and bool(os.stat(d).st_mode & 0o222)
    except OSError:
        return False


def cache_path_for(label_files):
    """labels/train2017/*.txt -> labels/train2017.cache (next to the labels, like ultralytics)."""
    return Path(label_files[0]).parent.with_suffix(".cache")


def load_cache(path, hash_):
    try:
        cache = np.load(str(path), allow_pickle=True).item()
        if cache.get("version") == CACHE_VERSION and cache.get("hash") == hash_:
            return cache
    except Exception:
        pass
    return None


def save_cache(path, x, prefix=""):
    """Write atomically; a read-only label folder gives one warning and training goes on without the file."""
    try:
        if not is_writeable(path.parent):
            raise PermissionError(f"'{path.parent}' is read-only")
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npy")
        np.save(str(tmp), x)
        os.replace(tmp, path)
        LOGGER.info(f"{prefix}New cache created: {path}")
        return True
    except OSError as e:
        LOGGER.warning(f"{prefix}{WARN} Cache directory {path.parent} is not writeable: {e}")
        return False


def build_label_cache(im_files, label_files, prefix=""):
    """Verify every pair in parallel; returns the cache dict (also holding the per-file warnings)."""
    x = {"msgs": []}
    nm = nf = ne = nc = 0
    with ThreadPool(NUM_THREADS) as pool:
        for im_file, lb, shape, segments, nm_f, nf_f, ne_f, nc_f, msg in pool.imap(
                verify_image_label, zip(im_files, label_files, repeat(prefix))):
            nm, nf, ne, nc = nm + nm_f, nf + nf_f, ne + ne_f, nc + nc_f
            if im_file:
                x[im_file] = [lb, shape, segments]
            if msg:
                x["msgs"].append(msg)
    x["results"] = nf, nm, ne, nc, len(im_files)
    x["hash"] = get_hash(label_files + im_files)
    x["version"] = CACHE_VERSION
    return x


# ----------------------------------------------------------------------------------------------------------------
# Image caches
def _mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def disk_cache_dir(im_dir):
    """The folder for .npy caches of images in im_dir: im_dir itself when writable, else a per-folder user cache."""
    im_dir = Path(im_dir)
    if is_writeable(im_dir):
        return im_dir
    base = Path(os.environ.get("YOLO_CACHE_DIR", Path.home() / ".cache" / "yolov5"))
    return base / "npy" / hashlib.sha1(str(im_dir.resolve()).encode()).hexdigest()[:16]


def npy_path(im_file, img_size):
    """The .npy for one image at one training size. The name carries the image's mtime and size, so an edited
    image gets a new cache file and the old one is never read again."""
    st = os.stat(im_file)
    key = hashlib.sha1(f"{st.st_mtime_ns}-{st.st_size}-{img_size}".encode()).hexdigest()[:10]
    p = Path(im_file)
    return disk_cache_dir(p.parent) / f"{p.stem}.{img_size}.{key}.npy"


class StageTimer:
    """Accumulates seconds per named stage (benchmarks/loader.py turns it on; off costs one `if`)."""

    def __init__(self, clock=time.perf_counter):
        self.t = {}
        self.n = 0
        self.now = clock  # time.thread_time gives CPU seconds: robust when other processes share the cores

    def add(self, name, t0):
        t1 = self.now()
        self.t[name] = self.t.get(name, 0.0) + t1 - t0
        return t1


# ----------------------------------------------------------------------------------------------------------------
# Dataset
def rect_batch_shapes(ar_sorted, batch_size, img_size, stride, pad):
    """Letterbox shape (h, w) of each --rect batch: images sorted by aspect ratio h/w go batch_size at a time, and
    each batch is shaped to fit its most extreme ratio, then rounded up to the stride with `pad` strides spare."""
    bi = np.arange(len(ar_sorted)) // batch_size
    shapes = []
    for b in range(bi[-1] + 1 if len(ar_sorted) else 0):
        ari = ar_sorted[bi == b]
        mini, maxi = ari.min(), ari.max()
        shapes.append([maxi, 1] if maxi < 1 else ([1, 1 / mini] if mini > 1 else [1, 1]))
    return np.ceil(np.array(shapes, dtype=float).reshape(-1, 2) * img_size / stride + pad).astype(int) * stride


class LoadImagesAndLabels(torch.utils.data.Dataset):
    """YOLO detection dataset. Items are (im CHW RGB uint8 numpy, labels (n, 6) float32 numpy [0, cls, xywhn],
    path, shapes) and collate_fn turns a list of them into framework tensors."""

    cache_version = CACHE_VERSION

    def __init__(self, path, img_size=640, batch_size=16, augment=False, hyp=None, rect=False, image_weights=False,
                 cache_images=False, single_cls=False, stride=32, pad=0.0, min_items=0, prefix="", fused=True,
                 rank=0, world_size=1, seed=0, shuffle=True):
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
        # fused: the one-warp mosaic and the fast HSV/decode/layout (falls back to the classic mosaic where it cannot
        # apply). fused=False runs ultralytics' formulation step by step: the reference for tests and benchmarks.
        self.fused = fused
        self.profile = None  # a StageTimer to measure stages (benchmarks/loader.py)

        self.im_files = list_image_files(path, prefix)
        self.label_files = img2label_paths(self.im_files)
        cache = self._labels_cache()
        [cache.pop(k) for k in ("hash", "version", "msgs", "results")]
        labels, shapes, self.segments = zip(*cache.values()) if cache else ((), (), ())
        nl = len(np.concatenate(labels, 0)) if labels else 0
        if nl == 0 and augment:
            raise ValueError(f"{prefix}All labels empty in {path}, can not start training. {HELP_URL}")
        self.labels = [np.asarray(x, dtype=np.float32).reshape(-1, 5) for x in labels]
        self.shapes = np.array(shapes, dtype=np.int64).reshape(-1, 2)  # (w, h)
        self.im_files = list(cache.keys())
        self.label_files = img2label_paths(self.im_files)
        self.segments = list(self.segments)

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
            s = self.shapes
            ar = s[:, 1] / s[:, 0]  # h / w
            # stable: images of equal aspect ratio keep file order, so the batches (and their padding, which
            # moves mAP by up to 0.008 on coco128) are the same under numpy 1 (OneFlow) and numpy 2 (PyTorch);
            # numpy's default quicksort orders such ties differently between versions and CPUs
            irect = ar.argsort(kind="stable")
            self._reorder(irect)
            self.batch_shapes = rect_batch_shapes(ar[irect], batch_size, img_size, stride, pad)
        else:
            self.batch_shapes = None

        # DDP: this rank's fixed share (the sampler computes the same one). Mosaic partners come from it and
        # --cache holds only it.
        self.indices = rank_share(n, world_size, rank, seed, None if shuffle else batch_size)

        # Image caches: ram keeps resized decoded images, disk keeps them as .npy at the training size
        self.ims = [None] * n
        self.npy_files = [None] * n
        cache_images = {True: "ram", "True": "ram", "true": "ram", False: None, "": None}.get(cache_images, cache_images)
        if cache_images == "ram" and not self.check_cache_ram(prefix=prefix):
            cache_images = None
        self.cache = cache_images
        if cache_images:
            self._fill_image_cache(cache_images)

    # ---- labels --------------------------------------------------------------------------------------------
    def _reorder(self, idx):
        self.im_files = [self.im_files[i] for i in idx]
        self.label_files = [self.label_files[i] for i in idx]
        self.labels = [self.labels[i] for i in idx]
        self.segments = [self.segments[i] for i in idx]
        self.shapes = self.shapes[idx]

    def _labels_cache(self):
        prefix = self.prefix
        path = cache_path_for(self.label_files)
        hash_ = get_hash(self.label_files + self.im_files)
        cache = load_cache(path, hash_) if path.exists() else None
        exists = cache is not None
        if cache is None:
            cache = build_label_cache(self.im_files, self.label_files, prefix)
            save_cache(path, cache, prefix)
        nf, nm, ne, nc, n = cache["results"]
        LOGGER.info(f"{prefix}{'Scanned cache' if exists else 'Scanning'} '{path.with_suffix('')}'... {nf} images, "
                    f"{nm + ne} backgrounds, {nc} corrupt")
        for m in cache["msgs"]:  # one line per dropped or repaired file, every run
            LOGGER.warning(m)
        if nf == 0:
            LOGGER.warning(f"{prefix}{WARN} No labels found in {path.parent}. {HELP_URL}")
        self.cache_file = path
        self.cache_hit = exists
        self.label_msgs = list(cache["msgs"])
        self.scan_results = cache["results"]
        return dict(cache)

    def check_classes(self, nc):
        """Stop with a message naming the file and line when a class id is >= nc."""
        for lb, im_file, lb_file in zip(self.labels, self.im_files, self.label_files):
            if len(lb) and lb[:, 0].max() >= nc:
                bad = lb[:, 0].max()
                line = "?"
                try:
                    with open(lb_file) as f:
                        for j, row in enumerate(f, 1):
                            parts = row.split()
                            if parts and float(parts[0]) >= nc:
                                line = j
                                break
                except OSError:
                    pass
                raise ValueError(f"{self.prefix}Label class {int(bad)} exceeds nc={nc} in {lb_file}, line {line} "
                                 f"(image {im_file}). Possible class labels are 0-{nc - 1}.")

    # ---- images --------------------------------------------------------------------------------------------
    def resized_shape(self, i):
        """(h, w) of image i after load_image's resize (the longest side to img_size), without reading it."""
        w0, h0 = self.shapes[i]
        r = self.img_size / max(h0, w0)
        if r == 1:
            return int(h0), int(w0)
        return math.ceil(h0 * r), math.ceil(w0 * r)

    def _read_file(self, f, reduce=1):
        flags = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
                 8: cv2.IMREAD_REDUCED_COLOR_8}[reduce]
        if not self.fused and reduce == 1:
            im = cv2.imread(f)  # the reference path reads like ultralytics
            if im is None:
                raise FileNotFoundError(f"Image Not Found {f}")
            return im
        # np.fromfile + imdecode is ~20% faster than cv2.imread here (measured) and handles non-ASCII paths
        try:
            im = cv2.imdecode(np.fromfile(f, np.uint8), flags)
        except (OSError, ValueError):
            im = None
        if im is None:
            raise FileNotFoundError(f"Image Not Found {f}")
        return im

    def load_image(self, i):
        """ultralytics' load_image: BGR image with its longest side resized to img_size. Returns
        (im, (h0, w0), (h, w)). Served from the RAM or disk cache when there is one."""
        w0, h0 = (int(x) for x in self.shapes[i])
        im = self.ims[i]
        if im is not None:
            return im, (h0, w0), im.shape[:2]
        fn = self.npy_files[i]
        if fn is not None and os.path.exists(fn):
            im = np.load(fn)
            return im, (h0, w0), im.shape[:2]
        im = self._read_file(self.im_files[i])
        h0, w0 = im.shape[:2]  # the decoded size (EXIF-rotated like the label cache's)
        r = self.img_size / max(h0, w0)
        if r != 1:
            interp = cv2.INTER_LINEAR if (self.augment or r > 1) else cv2.INTER_AREA
            im = cv2.resize(im, (math.ceil(w0 * r), math.ceil(h0 * r)), interpolation=interp)
        return im, (h0, w0), im.shape[:2]

    def source_image(self, i, max_scale):
        """The cheapest decoded image for a warp whose largest linear scale from the ORIGINAL image is max_scale:
        a cached resized image when there is one, else the file decoded at 1/2, 1/4 or 1/8 when the warp
        shrinks that much anyway (libjpeg's DCT scaling, no quality lost at the output size)."""
        im = self.ims[i]
        if im is None and self.npy_files[i] is not None and os.path.exists(self.npy_files[i]):
            im = np.load(self.npy_files[i])
        if im is not None:
            return im
        f = self.im_files[i]
        reduce = 1
        if f.lower().endswith((".jpg", ".jpeg")):
            while reduce < 8 and max_scale * reduce * 2 <= 1.0:
                reduce *= 2
        return self._read_file(f, reduce)

    def check_cache_ram(self, safety_margin=0.1, prefix=""):
        """True when the resized images fit in available memory with a margin (exact sizes from the label cache)."""
        b = sum(h * w * 3 for h, w in (self.resized_shape(i) for i in self.indices))
        avail = _mem_available()
        if avail is None:
            return True
        ok = b * (1 + safety_margin) < avail
        if not ok:
            LOGGER.warning(f"{prefix}{WARN} {b / (1 << 30):.2f}GB RAM required (+{safety_margin:.0%} margin), "
                           f"{avail / (1 << 30):.2f}GB available: not caching images in RAM")
        else:
            LOGGER.info(f"{prefix}Caching images ({b / (1 << 30):.2f}GB of {avail / (1 << 30):.1f}GB available RAM)")
        return ok

    def _fill_image_cache(self, kind):
        def work(i):
            if kind == "disk":
                f = npy_path(self.im_files[i], self.img_size)
                if not f.exists():
                    f.parent.mkdir(parents=True, exist_ok=True)
                    im = self.load_image(i)[0]
                    for old in f.parent.glob(f"{Path(self.im_files[i]).stem}.*.npy"):  # stale sizes/versions
                        old.unlink(missing_ok=True)
                    tmp = f.with_name(f.name + f".{os.getpid()}.tmp.npy")
                    np.save(str(tmp), im)
                    os.replace(tmp, f)
                self.npy_files[i] = str(f)
                return os.path.getsize(f)
            self.ims[i] = self.load_image(i)[0]
            return self.ims[i].nbytes

        with ThreadPool(NUM_THREADS) as pool:
            b = sum(pool.imap(work, [int(i) for i in self.indices]))
        LOGGER.info(f"{self.prefix}Cached {len(self.indices)} images ({b / 1e9:.2f}GB {kind})")

    # ---- items ---------------------------------------------------------------------------------------------
    def __len__(self):
        return len(self.im_files)

    def __getitem__(self, index):
        """index is a dataset index: the sampler already applied `indices` (image weights) so that persistent
        workers never see a stale copy of them."""
        hyp, prof = self.hyp, self.profile
        mosaic = self.mosaic and random.random() < hyp.get("mosaic", 0.0)
        rgb = None
        if mosaic:
            im, labels = self.load_mosaic(index)
            shapes = None
            if random.random() < hyp.get("mixup", 0.0):
                im, labels = mixup(im, labels, *self.load_mosaic(random.choice(self.indices)))
        else:
            t0 = prof.now() if prof else 0
            im, (h0, w0), (h, w) = self.load_image(index)
            if prof:
                t0 = prof.add("read/decode", t0)
            shape = self.batch_shapes[self.batch[index]] if self.rect else self.img_size
            im, ratio, pad = letterbox(im, shape, auto=False, scaleup=self.augment)
            shapes = (h0, w0), ((h / h0, w / w0), pad)
            labels = self.labels[index].copy()
            if labels.size:
                labels[:, 1:] = xywhn2xyxy(labels[:, 1:], ratio[0] * w, ratio[1] * h, padw=pad[0], padh=pad[1])
            if self.augment:
                im, labels = random_perspective(im, labels, degrees=hyp["degrees"], translate=hyp["translate"],
                                                scale=hyp["scale"], shear=hyp["shear"],
                                                perspective=hyp["perspective"])
            if prof:
                prof.add("letterbox/perspective", t0)

        t0 = prof.now() if prof else 0
        nl = len(labels)
        labels = np.asarray(labels, dtype=np.float32).reshape(-1, 5)
        if nl:
            labels[:, 1:5] = xyxy2xywhn(labels[:, 1:5], w=im.shape[1], h=im.shape[0], clip=True, eps=1e-3)
        if self.augment and not self.fused:  # ultralytics' formulation, step by step (reference for the benchmark)
            augment_hsv_lut(im, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"])
            if prof:
                t0 = prof.add("hsv", t0)
            if random.random() < hyp["flipud"]:
                im = np.flipud(im)
                if nl:
                    labels[:, 2] = 1 - labels[:, 2]
            if random.random() < hyp["fliplr"]:
                im = np.fliplr(im)
                if nl:
                    labels[:, 1] = 1 - labels[:, 1]
            rgb = np.ascontiguousarray(im.transpose((2, 0, 1))[::-1]).transpose(1, 2, 0)  # a CHW copy, as a view
        elif self.augment:
            rgb = augment_hsv(im, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"], to_rgb=True)
            if prof:
                t0 = prof.add("hsv", t0)
            if random.random() < hyp["flipud"]:
                rgb = cv2.flip(rgb, 0)
                if nl:
                    labels[:, 2] = 1 - labels[:, 2]
            if random.random() < hyp["fliplr"]:
                rgb = cv2.flip(rgb, 1)
                if nl:
                    labels[:, 1] = 1 - labels[:, 1]
        if rgb is None:
            rgb = cv2.cvtColor(im, cv2.COLOR_BGR2RGB)
        labels_out = np.zeros((nl, 6), np.float32)
        labels_out[:, 1:] = labels
        if prof:
            prof.add("flip/format", t0)
            prof.n += 1
        return rgb.transpose(2, 0, 1), labels_out, self.im_files[index], shapes

    # ---- mosaic --------------------------------------------------------------------------------------------
    def _mosaic_layout(self, indices, s, xc, yc):
        """ultralytics' 4-tile placement in the 2s x 2s canvas: per tile (index, (h, w), canvas rect a, tile rect b)."""
        out = []
        for k, index in enumerate(indices):
            h, w = self.resized_shape(index)
            if k == 0:  # top left
                x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
                x1b, y1b, x2b, y2b = w - (x2a - x1a), h - (y2a - y1a), w, h
            elif k == 1:  # top right
                x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, s * 2), yc
                x1b, y1b, x2b, y2b = 0, h - (y2a - y1a), min(w, x2a - x1a), h
            elif k == 2:  # bottom left
                x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(s * 2, yc + h)
                x1b, y1b, x2b, y2b = w - (x2a - x1a), 0, w, min(y2a - y1a, h)
            else:  # bottom right
                x1a, y1a, x2a, y2a = xc, yc, min(xc + w, s * 2), min(s * 2, yc + h)
                x1b, y1b, x2b, y2b = 0, 0, min(w, x2a - x1a), min(y2a - y1a, h)
            out.append((index, (h, w), (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b)))
        return out

    def _mosaic_labels(self, layout):
        labels4, segments4 = [], []
        for index, (h, w), (x1a, y1a, _, _), (x1b, y1b, _, _) in layout:
            padw, padh = x1a - x1b, y1a - y1b
            labels, segments = self.labels[index].copy(), [x.copy() for x in self.segments[index]]
            if labels.size:
                labels[:, 1:] = xywhn2xyxy(labels[:, 1:], w, h, padw, padh)
                segments = [xyn2xy(x, w, h, padw, padh) for x in segments]
            labels4.append(labels)
            segments4.extend(segments)
        labels4 = np.concatenate(labels4, 0)
        for x in (labels4[:, 1:], *segments4):
            np.clip(x, 0, 2 * self.img_size, out=x)
        return labels4, segments4

    def load_mosaic(self, index):
        """4-mosaic + random affine with ultralytics semantics. Fast path: plan, then one warp per visible tile."""
        hyp, s, prof = self.hyp, self.img_size, self.profile
        t0 = prof.now() if prof else 0
        yc, xc = (int(random.uniform(-x, 2 * s + x)) for x in self.mosaic_border)  # mosaic center x, y
        indices = [index] + random.choices(self.indices, k=3)
        random.shuffle(indices)
        layout = self._mosaic_layout(indices, s, xc, yc)
        labels4, segments4 = self._mosaic_labels(layout)
        use_copy_paste = hyp.get("copy_paste", 0.0) and len(segments4)
        if not self.fused or hyp.get("perspective", 0.0) or use_copy_paste:
            if prof:
                prof.add("mosaic", t0)
            return self._mosaic_classic(layout, labels4, segments4)

        # Same draws as random_perspective on the 2s canvas with border -s/2: output s x s
        M, scale = random_affine_matrix((2 * s, 2 * s), (s, s), degrees=hyp["degrees"], translate=hyp["translate"],
                                        scale=hyp["scale"], shear=hyp["shear"], perspective=0.0)
        out = np.full((s, s, 3), 114, dtype=np.uint8)
        sv = np.linalg.svd(M[:2, :2], compute_uv=False).max()  # the largest stretch of the affine
        if prof:
            t0 = prof.add("mosaic", t0)
        for index, (h, w), (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b) in layout:
            # Skip tiles whose canvas rect lands entirely outside the output (never decoded)
            rect = np.array([[x1a, y1a, 1], [x2a, y1a, 1], [x1a, y2a, 1], [x2a, y2a, 1]], dtype=np.float64) @ M[:2].T
            if rect[:, 0].max() <= 0 or rect[:, 1].max() <= 0 or rect[:, 0].min() >= s or rect[:, 1].min() >= s:
                continue
            w0, h0 = self.shapes[index]
            src = self.source_image(index, sv * w / w0)
            if prof:
                t0 = prof.add("read/decode", t0)
            hs, ws = src.shape[:2]
            fx, fy = ws / w, hs / h  # decoded pixels per resized pixel
            # the tile's visible part in decoded-image pixels (integer crop; sub-pixel slack is invisible)
            cx1, cy1 = int(math.floor(x1b * fx)), int(math.floor(y1b * fy))
            cx2, cy2 = min(int(math.ceil(x2b * fx)), ws), min(int(math.ceil(y2b * fy)), hs)
            crop = src[cy1:cy2, cx1:cx2]
            # decoded crop pixel -> canvas: x = (u + cx1) / fx + (x1a - x1b); canvas -> output: M
            A = np.array([[1 / fx, 0, cx1 / fx + x1a - x1b], [0, 1 / fy, cy1 / fy + y1a - y1b], [0, 0, 1]])
            warp_into(out, crop, (M @ A)[:2])
            if prof:
                t0 = prof.add("perspective", t0)

        n = len(labels4)
        if n:  # boxes exactly as random_perspective makes them (from the polygons when every box has one)
            use_segments = len(segments4) == n and any(x.any() for x in segments4)
            if use_segments:
                new, _ = transform_segments(segments4, M, (s, s))
            else:
                new = transform_boxes(labels4[:, 1:5].astype(np.float64), M, (s, s))
            i = box_candidates(box1=labels4[:, 1:5].T * scale, box2=new.T, area_thr=0.01 if use_segments else 0.10)
            labels4 = labels4[i]
            labels4[:, 1:5] = new[i]
        if prof:
            prof.add("mosaic", t0)
        return out, labels4

    def _mosaic_classic(self, layout, labels4, segments4):
        """ultralytics' path: paste resized tiles into a 2s canvas, copy-paste, then random_perspective."""
        hyp, s, prof = self.hyp, self.img_size, self.profile
        t0 = prof.now() if prof else 0
        img4 = np.full((s * 2, s * 2, 3), 114, dtype=np.uint8)
        for index, _, (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b) in layout:
            im = self.load_image(index)[0]
            img4[y1a:y2a, x1a:x2a] = im[y1b:y2b, x1b:x2b]
        if prof:
            t0 = prof.add("read/decode", t0)
        img4, labels4, segments4 = copy_paste(img4, labels4, segments4, p=hyp.get("copy_paste", 0.0))
        if prof:
            t0 = prof.add("mosaic", t0)
        img4, labels4 = random_perspective(img4, labels4, segments4, degrees=hyp["degrees"],
                                           translate=hyp["translate"], scale=hyp["scale"], shear=hyp["shear"],
                                           perspective=hyp["perspective"], border=self.mosaic_border)
        if prof:
            prof.add("perspective", t0)
        return img4, labels4

    def load_mosaic9(self, index):
        """ultralytics' 9-image mosaic (optional; same placement rules), then random_perspective."""
        hyp, s = self.hyp, self.img_size
        indices = [index] + random.choices(self.indices, k=8)
        random.shuffle(indices)
        hp, wp = -1, -1
        labels9, segments9 = [], []
        img9 = np.full((s * 3, s * 3, 3), 114, dtype=np.uint8)
        for i, index in enumerate(indices):
            img, _, (h, w) = self.load_image(index)
            if i == 0:  # center
                h0, w0 = h, w
                c = s, s, s + w, s + h
            elif i == 1:  # top
                c = s, s - h, s + w, s
            elif i == 2:  # top right
                c = s + wp, s - h, s + wp + w, s
            elif i == 3:  # right
                c = s + w0, s, s + w0 + w, s + h
            elif i == 4:  # bottom right
                c = s + w0, s + hp, s + w0 + w, s + hp + h
            elif i == 5:  # bottom
                c = s + w0 - w, s + h0, s + w0, s + h0 + h
            elif i == 6:  # bottom left
                c = s + w0 - wp - w, s + h0, s + w0 - wp, s + h0 + h
            elif i == 7:  # left
                c = s - w, s + h0 - h, s, s + h0
            else:  # top left
                c = s - w, s + h0 - hp - h, s, s + h0 - hp
            padx, pady = c[:2]
            x1, y1, x2, y2 = (max(x, 0) for x in c)
            labels, segments = self.labels[index].copy(), [x.copy() for x in self.segments[index]]
            if labels.size:
                labels[:, 1:] = xywhn2xyxy(labels[:, 1:], w, h, padx, pady)
                segments = [xyn2xy(x, w, h, padx, pady) for x in segments]
            labels9.append(labels)
            segments9.extend(segments)
            img9[y1:y2, x1:x2] = img[y1 - pady:, x1 - padx:]
            hp, wp = h, w
        yc, xc = (int(random.uniform(0, s)) for _ in self.mosaic_border)
        img9 = img9[yc:yc + 2 * s, xc:xc + 2 * s]
        labels9 = np.concatenate(labels9, 0)
        labels9[:, [1, 3]] -= xc
        labels9[:, [2, 4]] -= yc
        c = np.array([xc, yc])
        segments9 = [x - c for x in segments9]
        for x in (labels9[:, 1:], *segments9):
            np.clip(x, 0, 2 * s, out=x)
        img9, labels9, segments9 = copy_paste(img9, labels9, segments9, p=hyp.get("copy_paste", 0.0))
        return random_perspective(img9, labels9, segments9, degrees=hyp["degrees"], translate=hyp["translate"],
                                  scale=hyp["scale"], shear=hyp["shear"], perspective=hyp["perspective"],
                                  border=self.mosaic_border)

    # ---- batching ------------------------------------------------------------------------------------------
    @staticmethod
    def collate_fn(batch):
        """-> (imgs uint8 (B,3,H,W) RGB, targets float32 (n,6) [img_idx, cls, xywhn], paths, shapes).
        Each image is written once, straight into the batch buffer (cv2.split into the 3 planes)."""
        ims, labels, paths, shapes = zip(*batch)
        c, h, w = ims[0].shape
        out = np.empty((len(ims), c, h, w), np.uint8)
        for i, im in enumerate(ims):
            hwc = im.transpose(1, 2, 0)
            if hwc.flags.c_contiguous and c == 3:
                cv2.split(hwc, [out[i, 0], out[i, 1], out[i, 2]])
            else:
                out[i] = im
        for i, lb in enumerate(labels):
            lb[:, 0] = i  # target image index for build_targets()
        targets = np.concatenate(labels, 0) if labels else np.zeros((0, 6), np.float32)
        return from_numpy(out), from_numpy(targets), paths, shapes

    @staticmethod
    def collate_fn4(batch):
        """--quad: 4 images -> 1 of twice the size (a 2x2 tile, or one image upsampled), targets adjusted."""
        ims, labels, paths, shapes = zip(*batch)
        n = len(shapes) // 4
        im4, label4, path4, shapes4 = [], [], paths[:n], shapes[:n]
        ho = np.array([[0.0, 0, 0, 1, 0, 0]], np.float32)
        wo = np.array([[0.0, 0, 1, 0, 0, 0]], np.float32)
        s = np.array([[1, 1, 0.5, 0.5, 0.5, 0.5]], np.float32)
        for i in range(n):
            i4 = i * 4
            if random.random() < 0.5:
                im = ims[i4].transpose(1, 2, 0)
                im = cv2.resize(im, (im.shape[1] * 2, im.shape[0] * 2), interpolation=cv2.INTER_LINEAR)
                im = np.ascontiguousarray(im.transpose(2, 0, 1))
                lb = labels[i4]
            else:
                top = np.concatenate((ims[i4], ims[i4 + 1]), 1 + 1)
                bottom = np.concatenate((ims[i4 + 2], ims[i4 + 3]), 1 + 1)
                im = np.concatenate((top, bottom), 1)
                lb = np.concatenate((labels[i4], labels[i4 + 1] + ho, labels[i4 + 2] + wo, labels[i4 + 3] + ho + wo),
                                    0) * s
            im4.append(im)
            label4.append(lb)
        for i, lb in enumerate(label4):
            lb[:, 0] = i
        out = np.stack(im4, 0)
        return from_numpy(out), from_numpy(np.concatenate(label4, 0)), path4, shapes4


# ----------------------------------------------------------------------------------------------------------------
# Sampler, seeding, loader
def rank_share(n, world_size, rank, seed=0, batch_size=None):
    """The dataset positions rank `rank` trains on, fixed for the whole run (so --cache holds only them and mosaic
    partners come from them, as ultralytics' SmartDistributedSampler does). Shares are disjoint and cover all n.
    With batch_size (ordered data, e.g. --rect) each rank takes whole consecutive batches, round robin, so that
    every batch it collates shares one letterbox shape; otherwise a seeded random split."""
    if world_size <= 1:
        return np.arange(n)
    if batch_size:
        group = np.arange(n) // batch_size
        return np.flatnonzero(group % world_size == rank)
    return np.flatnonzero(np.random.RandomState(seed).permutation(n) % world_size == rank)


class YoloSampler(torch.utils.data.Sampler):
    """Dataset positions for one rank, reshuffled every epoch. One process: all positions, mapped through
    dataset.indices (image weights) here, in the main process, so persistent workers never use stale ones.
    DDP: the rank's fixed share (rank_share), shuffled within, padded to the same length on every rank. The
    order depends on (seed, epoch) only; set_epoch(e) sets the epoch, and without it the epoch advances on
    every pass."""

    def __init__(self, dataset, shuffle=True, seed=0, rank=None, world_size=None, batch_size=None):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = int(seed)
        self.rank = get_rank() if rank is None else rank
        self.world_size = get_world_size() if world_size is None else world_size
        self.epoch = 0
        self._epoch_set = False
        n = len(dataset)
        self.share = rank_share(n, self.world_size, self.rank, self.seed, None if shuffle else batch_size)
        self.num_samples = math.ceil(n / self.world_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)
        self._epoch_set = True

    def __iter__(self):
        if self.world_size > 1:
            pool = self.share
        else:
            pool = np.asarray(getattr(self.dataset, "indices", np.arange(len(self.dataset))))
        order = np.random.default_rng((self.seed, self.epoch)).permutation(len(pool)) if self.shuffle \
            else np.arange(len(pool))
        out = [int(pool[j]) for j in order]
        if out and len(out) < self.num_samples:  # equal length on every rank: repeat the end (same batch shape)
            out += [out[-1]] * (self.num_samples - len(out)) if not self.shuffle else \
                (out * math.ceil(self.num_samples / len(out)))[:self.num_samples - len(out)]
        if not self._epoch_set:
            self.epoch += 1
        self._epoch_set = False
        return iter(out)

    def __len__(self):
        return self.num_samples


class SeedWorker:
    """worker_init_fn: seeds python's and numpy's RNG of each worker from (seed, rank, worker id), so runs with the
    same --seed draw the same augmentations. It must not call into OpenCV's thread pool: see create_dataloader."""

    def __init__(self, seed, rank):
        self.seed, self.rank = int(seed), int(rank)

    def __call__(self, worker_id):
        s = int(np.random.SeedSequence([self.seed, self.rank, worker_id]).generate_state(1)[0])
        random.seed(s)
        np.random.seed(s)


def create_dataloader(path, imgsz, batch_size, stride, single_cls=False, hyp=None, augment=False, cache=None, pad=0.0,
                      rect=False, rank=-1, workers=8, image_weights=False, quad=False, prefix="", shuffle=False, seed=0,
                      nc=None, min_items=0, fused=True):
    """Build (loader, dataset). Batches: (imgs uint8 (B,3,H,W) RGB, targets (n,6), paths, shapes).
    rank/world size for the sampler come from utils.backend when rank != -1."""
    if rect and shuffle:
        LOGGER.warning(f"{prefix}{WARN} --rect is incompatible with DataLoader shuffle, setting shuffle=False")
        shuffle = False
    world = get_world_size() if rank != -1 else 1
    r = get_rank() if rank != -1 else 0
    dataset = LoadImagesAndLabels(path, imgsz, batch_size, augment=augment, hyp=hyp, rect=rect,
                                  image_weights=image_weights, cache_images=cache, single_cls=single_cls,
                                  stride=int(stride), pad=pad, min_items=min_items, prefix=prefix, fused=fused,
                                  rank=r, world_size=world, seed=seed, shuffle=shuffle)
    if nc is not None:
        dataset.check_classes(nc)
    batch_size = min(batch_size, len(dataset))
    ncpu = os.cpu_count() or 1
    nw = min([ncpu // max(world, 1), batch_size if batch_size > 1 else 0, workers])
    sampler = YoloSampler(dataset, shuffle=shuffle, seed=seed, rank=r, world_size=world, batch_size=batch_size)
    kwargs = {}
    if nw > 0:
        # TRAP: OpenCV's thread pool does not survive fork(). A worker forked while the parent's pool exists hangs
        # in its first parallel cv2 call (seen: pthread_cond_destroy in setNumThreads). Switching the pool off here,
        # before the workers fork, is what ultralytics does at import; the workers are the parallelism anyway.
        cv2.setNumThreads(0)
        kwargs = dict(persistent_workers=True, worker_init_fn=SeedWorker(seed, r), prefetch_factor=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=nw,
                                         pin_memory=False, drop_last=False,
                                         collate_fn=LoadImagesAndLabels.collate_fn4 if quad else
                                         LoadImagesAndLabels.collate_fn, **kwargs)
    return loader, dataset


# ----------------------------------------------------------------------------------------------------------------
# Inference sources (detect.py)
class LoadImages:
    """Images and videos from a file, folder, glob or .txt list. Iterating yields
    (path, im letterboxed CHW RGB uint8, im0 original BGR, video capture or None, info string)."""

    def __init__(self, path, img_size=640, stride=32, auto=True, transforms=None, vid_stride=1):
        files = []
        paths = path if isinstance(path, (list, tuple)) else [path]
        for p in paths:
            p = str(Path(p).resolve()) if not any(c in str(p) for c in "*?[") else str(p)
            if str(p).endswith(".txt") and os.path.isfile(p):
                files += [x.strip() for x in Path(p).read_text().splitlines() if x.strip()]
            elif any(c in p for c in "*?["):
                files += sorted(glob.glob(p, recursive=True))
            elif os.path.isdir(p):
                files += sorted(glob.glob(os.path.join(p, "*.*")))
            elif os.path.isfile(p):
                files.append(p)
            else:
                raise FileNotFoundError(f"{p} does not exist")
        images = [x for x in files if x.split(".")[-1].lower() in IMG_FORMATS]
        videos = [x for x in files if x.split(".")[-1].lower() in VID_FORMATS]
        ni, nv = len(images), len(videos)
        self.img_size = img_size
        self.stride = stride
        self.files = images + videos
        self.nf = ni + nv
        self.video_flag = [False] * ni + [True] * nv
        self.mode = "image"
        self.auto = auto
        self.transforms = transforms
        self.vid_stride = vid_stride
        self.cap = None
        if any(videos):
            self._new_video(videos[0])
        if self.nf == 0:
            raise FileNotFoundError(f"No images or videos found in {path}. Supported formats are:\n"
                                    f"images: {IMG_FORMATS}\nvideos: {VID_FORMATS}")

    def __iter__(self):
        self.count = 0
        return self

    def __next__(self):
        if self.count == self.nf:
            raise StopIteration
        path = self.files[self.count]
        if self.video_flag[self.count]:
            self.mode = "video"
            for _ in range(self.vid_stride):
                self.cap.grab()
            ret_val, im0 = self.cap.retrieve()
            while not ret_val:
                self.count += 1
                self.cap.release()
                if self.count == self.nf:
                    raise StopIteration
                path = self.files[self.count]
                self._new_video(path)
                ret_val, im0 = self.cap.read()
            self.frame += 1
            s = f"video {self.count + 1}/{self.nf} ({self.frame}/{self.frames}) {path}: "
        else:
            self.count += 1
            im0 = cv2.imread(path)
            if im0 is None:
                raise FileNotFoundError(f"Image Not Found {path}")
            s = f"image {self.count}/{self.nf} {path}: "
        if self.transforms:
            im = self.transforms(im0)
        else:
            im = letterbox(im0, self.img_size, stride=self.stride, auto=self.auto)[0]
            im = np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])  # HWC BGR -> CHW RGB
        return path, im, im0, self.cap, s

    def _new_video(self, path):
        self.frame = 0
        self.cap = cv2.VideoCapture(path)
        self.frames = int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT) / self.vid_stride)

    def __len__(self):
        return self.nf
