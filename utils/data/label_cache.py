"""The label cache, labels/<split>.cache where ultralytics keeps its own: a dataset scan (utils.data.labels) saved so
the next run skips it.

A dataset folder is untrusted input, like a checkpoint, so the file holds arrays and JSON only: an uncompressed .npz
(a zip) read with allow_pickle=False, whose 'meta' member (JSON: format version, the key of the files it describes,
file list, messages) is read and checked before any other member is touched. ultralytics' format (np.save of a
pickled dict) and anything else that is not this format is never parsed: one warning line, and it is rebuilt.

The key covers every image and label file's path, size and modification time, so an edit that keeps the size
(class 45 -> 46) rebuilds the cache too.
"""
import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from utils.atomic_files import ZIP_MAGIC, remove_stale_temp_files, write_atomically
from utils.data.files import WARN, is_writeable, open_regular_file
from utils.log import LOGGER

CACHE_VERSION = "yolov5-fast-3"  # 3: box rows in polygon files, degenerate labels dropped


class CacheFormatError(ValueError):
    """The file is not a label cache of this format (another version, ultralytics' pickle, damaged or hostile)."""


def cache_key(paths):
    """One hash over the files' paths, sizes and modification times (a missing file counts as missing)."""
    h = hashlib.sha256()
    for p in paths:
        try:
            st = os.stat(p)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "-"
        h.update(os.fsencode(p) + f"\0{stamp}\0".encode())  # fsencode: names in any encoding, as the OS has them
    return h.hexdigest()


get_hash = cache_key  # ultralytics' name for it


def cache_path_for(label_files):
    """labels/train2017/*.txt -> labels/train2017.cache (next to the labels, like ultralytics)."""
    folder = Path(label_files[0]).parent
    return folder.with_suffix(".cache") if folder.name else folder / "labels.cache"  # labels in '.' or '/


def _to_arrays(scan, key):
    n = len(scan["files"])
    segments = scan["segments"]
    flat = [s for per_image in segments for s in per_image]
    meta = {"version": CACHE_VERSION, "key": key, "files": list(scan["files"]), "msgs": list(scan["msgs"]),
            "results": [int(x) for x in scan["results"]]}
    return {
        "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
        "labels": np.concatenate(scan["labels"], 0).astype(np.float32) if n else np.zeros((0, 5), np.float32),
        "label_counts": np.array([len(x) for x in scan["labels"]], np.int64),
        "shapes": np.array(scan["shapes"], np.int64).reshape(n, 2),
        "orientations": np.array(scan["orientations"], np.uint8),
        "segment_counts": np.array([len(x) for x in segments], np.int64),
        "segment_sizes": np.array([len(s) for s in flat], np.int64),
        "segment_points": np.concatenate(flat, 0).astype(np.float32) if flat else np.zeros((0, 2), np.float32),
    }


def _member(z, name, kinds, ndim, width=None):
    a = z[name]  # allow_pickle=False: an object array raises here, before anything is unpickled
    if a.dtype.kind not in kinds or a.ndim != ndim or (width is not None and a.shape[1] != width):
        raise CacheFormatError(f"member '{name}' is {a.dtype}{a.shape}")
    return a


def _split(a, counts, what):
    if (counts < 0).any() or counts.sum() != len(a):
        raise CacheFormatError(f"{what} counts do not add up")
    return np.split(a, np.cumsum(counts)[:-1]) if len(counts) else []


def _from_arrays(z, meta, allowed_files):
    files, msgs, results = meta.get("files"), meta.get("msgs"), meta.get("results")
    if not (isinstance(files, list) and all(isinstance(f, str) for f in files) and set(files) <= allowed_files
            and isinstance(msgs, list) and all(isinstance(m, str) for m in msgs)
            and isinstance(results, list) and len(results) == 5 and all(isinstance(r, int) for r in results)):
        raise CacheFormatError("meta does not describe this dataset")
    n = len(files)
    labels = _member(z, "labels", "f", 2, 5)
    counts = {k: _member(z, k, "iu", 1) for k in ("label_counts", "orientations", "segment_counts", "segment_sizes")}
    shapes = _member(z, "shapes", "iu", 2, 2)
    points = _member(z, "segment_points", "f", 2, 2)
    if not (len(counts["label_counts"]) == len(shapes) == len(counts["orientations"]) ==
            len(counts["segment_counts"]) == n):
        raise CacheFormatError("per-image arrays disagree in length")
    segs = [s.astype(np.float32) for s in _split(points, counts["segment_sizes"], "segment point")]
    per_image = _split(np.arange(len(segs)), counts["segment_counts"], "segment")
    return {"files": files, "msgs": msgs, "results": tuple(results),
            "labels": [x.astype(np.float32) for x in _split(labels, counts["label_counts"], "label")],
            "shapes": [tuple(int(v) for v in s) for s in shapes],
            "orientations": [int(o) for o in counts["orientations"]],
            "segments": [[segs[j] for j in idx] for idx in per_image]}


def read_cache(path, key, allowed_files, prefix=""):
    """The scan saved at path if it is this format and describes exactly these files (key), else None: a stale
    cache quietly, a file of another format with one warning line. Nothing in the file is used before its format
    version and key are checked, and nothing in it is ever unpickled."""
    try:
        with open_regular_file(path) as f:  # a FIFO named like the cache is refused (warned below), never read
            if f.read(4) != ZIP_MAGIC:
                raise CacheFormatError("not an array archive (an ultralytics or older cache is a pickle)")
            f.seek(0)
            with np.load(f, allow_pickle=False) as z:
                if any(i.compress_type != zipfile.ZIP_STORED for i in z.zip.infolist()):
                    raise CacheFormatError("compressed members")  # this format never compresses: no zip bombs
                try:
                    meta = json.loads(_member(z, "meta", "u", 1).tobytes())
                except UnicodeDecodeError as e:
                    raise CacheFormatError("meta is not JSON") from e
                if not isinstance(meta, dict) or meta.get("version") != CACHE_VERSION:
                    raise CacheFormatError(f"format {meta.get('version') if isinstance(meta, dict) else None!r}")
                if meta.get("key") != key:
                    return None  # files changed since it was written
                return _from_arrays(z, meta, set(allowed_files))
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 (any damage -- numpy's header parser raises SyntaxError, zipfile
        # NotImplementedError for a flipped version byte -- means the same: ignore it, rebuild from the labels)
        LOGGER.warning(f"{prefix}{WARN} {path}: not a label cache this version reads ({e}); ignored, rebuilding it")
        return None


def write_cache(path, scan, key, prefix=""):
    """Write atomically; a read-only label folder gives one warning and training goes on without the file."""
    try:
        if not is_writeable(path.parent):
            raise PermissionError(f"'{path.parent}' is read-only")
        arrays = _to_arrays(scan, key)
        write_atomically(path, lambda f: np.savez(f, **arrays))
        LOGGER.info(f"{prefix}New cache created: {path}")
        return True
    except OSError as e:
        LOGGER.warning(f"{prefix}{WARN} Cache directory {path.parent} is not writeable: {e}")
        return False


def remove_stale_cache_temp_files(path):
    """The temporary files that interrupted writes of this cache left beside it."""
    return remove_stale_temp_files(Path(path).parent, Path(path).name + ".")
