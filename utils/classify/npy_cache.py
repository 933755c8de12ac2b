"""--cache disk for classification: each decoded image (full size, BGR uint8: the crop differs every epoch) kept as
a .npy file, keyed and checked as detection's caches are (utils/data/image_cache.py):

* the name carries the image's whole file name and a key of its mtime_ns and size: `x.jpg.cls.<key>.npy`, so an
  edited image is never served from a stale file and x.jpg and x.png never share one (official: `x.npy` for both);
* the file is written under a temporary name and renamed (utils/atomic_files.py); a failed write stops with one
  line naming the path;
* a damaged file (cut short, overwritten, another format) is named in a warning and the image is decoded again; it
  is read with its header checked against its size first, so it cannot make the reader allocate more than it holds;
* images in a folder that is not writable (shared or read-only data) get their caches in the user's cache folder
  (YOLO_CACHE_DIR), chosen by detection's disk_cache_dir;
* the only files removed are this module's own: older keys of the same image (`x.jpg.cls.<other key>.npy`) and the
  temporary files of interrupted cache writes whose writer is gone. Official caches (`x.npy`) are neither read nor
  touched.
"""
import hashlib
import os
import re
from pathlib import Path

import numpy as np

from utils.atomic_files import TEMP_MARK, OutputWriteError, is_stale_temp_file, write_atomically
from utils.classify.errors import ClassificationDataError
from utils.data.files import WARN, open_regular_file
from utils.data.image_cache import disk_cache_dir
from utils.log import LOGGER

TAG = "cls"  # what the file holds: the full decoded image (detection's caches hold one training size)
_CACHE_NAME = re.compile(rf"(?P<image>.+)\.{TAG}\.[0-9a-f]{{10}}\.npy")  # the names this module gives its files
_TEMP_OF = re.compile(rf"(?P<final>.+)\.[^./]+\.\d+\.{TEMP_MARK}\.npy")  # utils.atomic_files.temp_path_for's shape
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def cache_key(im_file):
    """A short key of the image file's modification time (ns) and size, and of what the cache holds."""
    st = os.stat(im_file)
    return hashlib.sha1(f"{st.st_mtime_ns}-{st.st_size}-{TAG}-full".encode()).hexdigest()[:10]




def read_image_npy(fn):
    """The uint8 (h, w, 3) image in .npy file fn; None when there is no such file, or (with a warning naming it)
    when it is damaged. The header is parsed without evaluating code and checked against the file's size before any
    pixel is read."""
    try:
        with open_regular_file(fn) as fh:  # a FIFO at the cache's name is refused (warned below), never read
            size = os.fstat(fh.fileno()).st_size
            version = np.lib.format.read_magic(fh)
            if version not in _HEADER_READERS:
                raise ValueError(f"npy format version {version}")
            shape, fortran_order, dtype = _HEADER_READERS[version](fh)
            if dtype != np.uint8 or fortran_order or len(shape) != 3 or shape[2] != 3 or min(shape) < 1:
                raise ValueError(f"holds a {dtype} array of shape {shape}, not a uint8 (h, w, 3) image")
            n = shape[0] * shape[1] * 3
            if fh.tell() + n != size:
                raise ValueError(f"{size} bytes where its header promises {fh.tell() + n}")
            pixels = np.fromfile(fh, np.uint8, count=n)
        return pixels.reshape(shape)
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 (numpy's header parser raises SyntaxError and others besides ValueError)
        LOGGER.warning(f"{WARN} damaged --cache disk file {fn} ({type(e).__name__}: "
                       f"{' '.join(str(e).split())[:120]}); decoding its image again")
        return None


class NpyImageCache:
    """The .npy caches of one dataset's images. load(im_file, decode) returns the image, from its cache when that is
    current and sound, else decode(im_file), which it then writes."""

    def __init__(self):
        self._folders = {}  # image folder -> cache folder: one writability check per folder
        self._listed = {}  # cache folder -> {image name: [its cache files]}, see _caches_in

    def path(self, im_file):
        p = Path(im_file)
        folder = self._folders.get(p.parent)
        if folder is None:
            folder = self._folders[p.parent] = disk_cache_dir(p.parent)
        return folder / f"{p.name}.{TAG}.{cache_key(p)}.npy"

    def load(self, im_file, decode):
        try:
            f = self.path(im_file)
        except OSError as e:  # the image itself vanished or cannot be read
            raise ClassificationDataError(f"{im_file}: cannot read image ({e.strerror or e})") from None
        im = read_image_npy(f)
        if im is None:
            im = decode(im_file)
            self._write(f, im)
        return im

    def _write(self, f, im):
        caches = self._caches_in(f.parent)
        try:
            write_atomically(f, lambda fh: np.save(fh, im, allow_pickle=False))
        except OutputWriteError as e:  # one line, also from a DataLoader worker (see utils/classify/errors.py)
            raise ClassificationDataError(f"--cache disk: {e}") from None
        im_name = f.name[:-len(f".{TAG}.0123456789.npy")]
        for old in caches.pop(im_name, ()):  # the same image's caches under older keys: never read again
            if old != f.name:
                try:
                    (f.parent / old).unlink()
                except OSError:  # removed meanwhile by another worker: nothing to do
                    pass

    def _caches_in(self, folder):
        """{image name: [its cache files]} of folder, listed once per process (listing it for every write would
        cost a folder scan per image); the first time, also what interrupted writes left there (our names only)."""
        caches = self._listed.get(folder)
        if caches is None:
            caches = self._listed[folder] = {}
            try:
                names = [e.name for e in os.scandir(folder)]
            except OSError:  # not made yet: nothing cached there
                names = []
            for name in names:
                m = _CACHE_NAME.fullmatch(name)
                if m:
                    caches.setdefault(m["image"], []).append(name)
                elif TEMP_MARK in name:
                    _remove_if_stale_temp(folder / name)
        return caches


def _remove_if_stale_temp(path):
    """path, if it is the temporary file of an interrupted cache write (a cache name, its writer gone)."""
    m = _TEMP_OF.fullmatch(path.name)
    if m and _CACHE_NAME.fullmatch(m["final"]) and is_stale_temp_file(path):
        try:
            path.unlink()
        except OSError:
            pass
