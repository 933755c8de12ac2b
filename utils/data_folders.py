"""Which folders may receive downloaded or unpacked data, and how much one download or archive may write there.

A folder Python imports from would run what lands in it (a `yaml.py` beside train.py, a `.pth` file in
site-packages), so data never goes into the project folder, a folder the project ships, a folder on sys.path or one
that holds such a folder (unsafe_data_folder_reason); and what one archive or download writes is bounded by the free
disk space (write_bound). Used by utils/archive_extract.py and utils/downloads.py. Framework-free.
"""
import os
import shutil
import site
import sys
from pathlib import Path

from utils.paths import ROOT

DISK_SHARE = 0.9  # an archive or a download may fill at most this share of the free space
MAX_TOTAL_BYTES = None  # an absolute bound on what one archive may write (None: the free space decides)
PROJECT_FOLDERS = ("utils", "models", "data", "segment", "classify", "tests", "benchmarks", "scripts")


def real_path(p):
    return Path(os.path.realpath(p))


def is_inside(path, folder):
    return path == folder or folder in path.parents


def _python_folders():
    """(every folder Python imports from, those of them that are the interpreter's own library and site folders).
    Anything inside the latter is imported or run at start (a .pth file); the others (the project, the current
    folder, PYTHONPATH) are harmful only for what lands directly in them."""
    entries = [e for e in sys.path if isinstance(e, str)]
    site_dirs = []
    for get in ("getsitepackages", "getusersitepackages"):
        try:
            got = getattr(site, get)()
        except (AttributeError, OSError):  # an old virtualenv's site.py lacks them
            continue
        site_dirs += [got] if isinstance(got, str) else list(got)
    prefixes = {real_path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}
    all_folders, library = [], []
    for e in entries + site_dirs:
        p = real_path(e or os.getcwd())  # '' is the current folder
        if not p.is_dir():
            continue
        all_folders.append(p)
        if e in site_dirs or any(is_inside(p, pre) for pre in prefixes):
            library.append(p)
    return all_folders, library


def unsafe_data_folder_reason(folder):
    """Why `folder` may not receive downloaded or unpacked data (text to follow 'the dataset folder X ...'), or None
    when it may. Reading data from any folder is unaffected."""
    t, root = real_path(folder), real_path(ROOT)
    if t == root:
        return "is the project folder, where every script imports its modules from"
    if t in root.parents:
        return f"holds the project folder {root}"
    for name in PROJECT_FOLDERS:
        f = root / name
        if f.is_dir() and is_inside(t, f):
            return f"is inside the project's own folder {f}"
    everything, library = _python_folders()
    for p in library:
        if is_inside(t, p):
            return f"is inside {p}, a folder Python imports modules and .pth files from"
    for p in everything:
        if t == p:
            return "is a folder Python imports modules from (it is on sys.path)"
        if t in p.parents:
            return f"holds {p}, a folder Python imports modules from (it is on sys.path)"
    return None


def on_import_path(folder):
    """True when files in `folder` (or below it) could be found by an import: it is the project or inside a folder
    on sys.path."""
    t = real_path(folder)
    return is_inside(t, real_path(ROOT)) or any(is_inside(t, p) for p in _python_folders()[0])


def existing_ancestor(p):
    p = Path(os.path.abspath(p))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def human_size(n):
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n:,} bytes"


def write_bound(folders, max_bytes=None):
    """(bytes one archive or download may write into `folders`, why): DISK_SHARE of the least free space among
    their disks, and max_bytes (or MAX_TOTAL_BYTES) when set."""
    free = min((shutil.disk_usage(existing_ancestor(f)).free, f) for f in folders)
    bound = int(free[0] * DISK_SHARE)
    why = f"{DISK_SHARE:.0%} of the {human_size(free[0])} free on the disk of {free[1]}"
    cap = max_bytes if max_bytes is not None else MAX_TOTAL_BYTES
    if cap is not None and cap < bound:
        bound, why = int(cap), "the bound set for one archive"
    return bound, why
