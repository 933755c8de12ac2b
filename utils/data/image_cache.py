"""--cache ram / --cache disk: decoded images at the training size, kept in memory or as .npy files, so an epoch
reads no JPEG. Disk caches sit beside the images (or in a per-user folder when the images are read-only) and are
named after the image's mtime and size, so an edited image is never served from a stale file."""
import glob
import hashlib
import os
import re
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np

from utils.atomic_files import TEMP_MARK, is_stale_temp_file, write_atomically
from utils.data.files import NUM_THREADS, WARN, is_writeable
from utils.log import LOGGER
from utils.memory_limits import memory_available
from utils.settings import CACHE_DIR


def _mem_available():
    """MemoryLimit (bytes, where from) of the host or the container's memory cgroup, the smaller; None if unknown."""
    return memory_available()


def disk_cache_dir(im_dir):
    """The folder for .npy caches of images in im_dir: im_dir itself when writable, else a per-folder user cache."""
    im_dir = Path(im_dir)
    if is_writeable(im_dir):
        return im_dir
    base = CACHE_DIR.get()
    return base / "npy" / hashlib.sha1(str(im_dir.resolve()).encode()).hexdigest()[:16]


# The one name shape of a --cache disk file: <image stem>.<img_size>.<10 hex digits of key>.npy. Clean-up deletes
# only names of exactly this shape (a user's 0001.depth.npy or 0001.npy beside 0001.jpg is never touched).
_NPY_NAME = r"\.\d+\.[0-9a-f]{10}\.npy"


def npy_path(im_file, img_size):
    """The .npy for one image at one training size. The name carries the image's mtime and size, so an edited
    image gets a new cache file and the old one is never read again."""
    st = os.stat(im_file)
    key = hashlib.sha1(f"{st.st_mtime_ns}-{st.st_size}-{img_size}".encode()).hexdigest()[:10]
    p = Path(im_file)
    return disk_cache_dir(p.parent) / f"{p.stem}.{img_size}.{key}.npy"


def is_cache_file_of(name, stem):
    """Whether file name `name` is a --cache disk file this project wrote for an image named <stem>.<ext>."""
    return re.fullmatch(re.escape(stem) + _NPY_NAME, name) is not None


def remove_old_cache_files(npy, stem):
    """The cache files of image <stem>.* at other sizes or of earlier versions of it (names of this module's exact
    shape only) beside npy, which is about to be written."""
    for old in Path(npy).parent.glob(f"{glob.escape(stem)}.*.npy"):
        if old.name != Path(npy).name and is_cache_file_of(old.name, stem):
            old.unlink(missing_ok=True)


def remove_stale_cache_temp_files(folder):
    """What interrupted writes of cache files left in folder: this project's temporary names (utils.atomic_files)
    of a .npy cache name, their writer gone; any other file is left alone."""
    try:
        names = [f for f in Path(folder).iterdir() if TEMP_MARK in f.name]
    except OSError:
        return
    for f in names:
        final = f.name.split(f".{TEMP_MARK}")[0].rsplit(".", 2)[0]  # <npy name>.<host>.<pid>.yolo-partial.npy
        if re.fullmatch(r".+" + _NPY_NAME, final) and is_stale_temp_file(f):
            f.unlink(missing_ok=True)


def ram_cache_fits(nbytes, safety_margin=0.1, prefix=""):
    """True when nbytes of images fit in the memory this process may still use (the host's, or its container's
    cgroup limit when that is tighter: utils/memory_limits.py) with a margin; says which way it went in one line.
    When they do not fit, training goes on reading images from disk, as ultralytics does."""
    mem = _mem_available()
    if mem is None:
        return True
    avail = mem.available
    ok = nbytes * (1 + safety_margin) < avail
    if not ok:
        LOGGER.warning(f"{prefix}{WARN} {nbytes / (1 << 30):.2f}GB RAM required (+{safety_margin:.0%} margin), "
                       f"{avail / (1 << 30):.2f}GB available ({mem.source}): not caching images in RAM")
    else:
        LOGGER.info(f"{prefix}Caching images ({nbytes / (1 << 30):.2f}GB of {avail / (1 << 30):.1f}GB available RAM, "
                    f"{mem.source})")
    return ok


def fill_image_cache(dataset, kind):
    """Decode dataset.indices once: into dataset.ims (ram) or into .npy files listed in dataset.npy_files (disk)."""
    folders = set()

    def work(i):
        if kind == "disk":
            f = npy_path(dataset.im_files[i], dataset.img_size)
            if not f.exists():
                f.parent.mkdir(parents=True, exist_ok=True)
                if f.parent not in folders:  # once per folder: what interrupted writes left there
                    folders.add(f.parent)
                    remove_stale_cache_temp_files(f.parent)
                im = dataset.load_image(i)[0]
                remove_old_cache_files(f, Path(dataset.im_files[i]).stem)  # other sizes, earlier image versions
                write_atomically(f, lambda fh: np.save(fh, im))
            dataset.npy_files[i] = str(f)
            return os.path.getsize(f)
        dataset.ims[i] = dataset.load_image(i)[0]
        return dataset.ims[i].nbytes

    with ThreadPool(NUM_THREADS) as pool:
        b = sum(pool.imap(work, [int(i) for i in dataset.indices]))
    LOGGER.info(f"{dataset.prefix}Cached {len(dataset.indices)} images ({b / 1e9:.2f}GB {kind})")


def read_npy_cache(fn, hw):
    """The cached image in .npy file fn, or None when the file is damaged (cut short by a full disk or a kill,
    overwritten, another size): it is named in one warning and removed, and the caller decodes the image again
    and rewrites it, as ultralytics does. The size is checked before reading, so a damaged header cannot make
    np.load allocate more than the image; no pickles are loaded."""
    want = int(hw[0]) * int(hw[1]) * 3
    try:
        size = os.path.getsize(fn)
        if not want <= size <= want + 4096:  # the .npy header is 128 bytes (up to a few KB for long shapes)
            raise ValueError(f"{size} bytes where a {hw[0]}x{hw[1]} image needs {want} and a header")
        im = np.load(fn, allow_pickle=False)
        if im.dtype != np.uint8 or im.shape != (int(hw[0]), int(hw[1]), 3):
            raise ValueError(f"holds a {im.dtype} array of shape {im.shape}, expected uint8 {(*hw, 3)}")
        return im
    except Exception as e:  # noqa: BLE001 (numpy's header parser raises SyntaxError and TokenError too)
        LOGGER.warning(f"WARNING: removing damaged --cache disk file {fn} ({type(e).__name__}: "
                       f"{' '.join(str(e).split())[:120]}); decoding its image again")
        Path(fn).unlink(missing_ok=True)
        return None
