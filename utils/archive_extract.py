"""Dataset archives (the zip or tar a data YAML's `download:` names) unpacked as data, never as code.

An archive is untrusted input. Unpacked carelessly, a member named `../x` or `/etc/x`, or one written through a link,
lands anywhere; one that replaces a file (train.py, a module) or adds `yaml.py` beside train.py, or a `.pth` file in
a site-packages folder, runs as code the next time Python starts; and a 1.6 MB zip of zeros fills the disk. So here:

- The dataset folder must be a folder of its own: never the project folder or a folder the project ships
  (utils/, models/, data/, ...), never a folder Python imports from (sys.path, site-packages) or one that holds
  such a folder (unsafe_data_folder_reason).
- Every member is checked before anything is written: it must land inside the dataset folder, be a plain file or
  folder (no links, devices, FIFOs), not exist yet, not be importable code (*.py, *.pyc, *.pth, *.so, ...), and the
  declared sizes must fit the bounds: the free disk space (and max_bytes) for the whole, MAX_RATIO for how much a
  zip member expands (a tar: the whole archive).
- The members are written into a new empty staging folder that is not on sys.path nor inside a folder that is,
  counting the bytes as they are written (declared sizes can lie), so the bounds hold while writing too. The staging
  folder is checked again for code, and only then are its files moved into the dataset folder, never over an
  existing file. Any failure removes the staging folder and whatever was already moved: nothing of a refused
  archive stays, partial files included. The error is one line saying what happened (a member named, too large,
  a zip bomb, code inside, disk full, damaged).

The official layout is kept: coco128.zip holds `coco128/...` and is unpacked into the parent of `path:`, which puts it
exactly in the dataset folder; an archive whose members are not all under the folder's name goes into the folder
itself. Framework-free.
"""
import errno
import http.client
import importlib.machinery
import os
import shutil
import site
import stat
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

from utils.atomic_files import remove_stale_temp_files, temp_path_for
from utils.errors import UserError
from utils.paths import ROOT

MAX_RATIO = 100  # bytes out per byte in: labels compress ~5x, images ~1x; 50 MB of zeros ~1000x
RATIO_GRACE_BYTES = 1 << 20  # a member (a tar: the whole archive) this small may compress better: harmless
DISK_SHARE = 0.9  # an archive or a download may fill at most this share of the free space
MAX_TOTAL_BYTES = None  # an absolute bound on what one archive may write (None: the free space decides)
CHUNK = 1 << 20
# Whatever Python imports or runs at start: modules, bytecode, extension modules and site-packages' .pth files
CODE_SUFFIXES = tuple(sorted({*importlib.machinery.all_suffixes(), ".py", ".pyc", ".pyo", ".pyw", ".pyd", ".pyz",
                              ".so", ".pth"}))
PROJECT_FOLDERS = ("utils", "models", "data", "segment", "classify", "tests", "benchmarks", "scripts")


class ArchiveError(UserError):
    """An archive could not be unpacked (damaged, the disk full); nothing of it was kept."""


class UnsafeArchive(ArchiveError):
    """An archive holds what a dataset archive must not (code, links, members leaving the folder or replacing a file)
    or expands past a bound; nothing of it was kept."""


# ------------------------------------------------------------------------------------------ where data may go
def _real(p):
    return Path(os.path.realpath(p))


def _inside(path, folder):
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
    prefixes = {_real(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}
    all_folders, library = [], []
    for e in entries + site_dirs:
        p = _real(e or os.getcwd())  # '' is the current folder
        if not p.is_dir():
            continue
        all_folders.append(p)
        if e in site_dirs or any(_inside(p, pre) for pre in prefixes):
            library.append(p)
    return all_folders, library


def unsafe_data_folder_reason(folder):
    """Why `folder` may not receive downloaded or unpacked data (text to follow 'the dataset folder X ...'), or None
    when it may. Reading data from any folder is unaffected."""
    t, root = _real(folder), _real(ROOT)
    if t == root:
        return "is the project folder, where every script imports its modules from"
    if t in root.parents:
        return f"holds the project folder {root}"
    for name in PROJECT_FOLDERS:
        f = root / name
        if f.is_dir() and _inside(t, f):
            return f"is inside the project's own folder {f}"
    everything, library = _python_folders()
    for p in library:
        if _inside(t, p):
            return f"is inside {p}, a folder Python imports modules and .pth files from"
    for p in everything:
        if t == p:
            return "is a folder Python imports modules from (it is on sys.path)"
        if t in p.parents:
            return f"holds {p}, a folder Python imports modules from (it is on sys.path)"
    return None


def _on_import_path(folder):
    """True when files in `folder` (or below it) could be found by an import: it is the project or inside a folder
    on sys.path."""
    t = _real(folder)
    return _inside(t, _real(ROOT)) or any(_inside(t, p) for p in _python_folders()[0])


def _existing_ancestor(p):
    p = Path(os.path.abspath(p))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def staging_parent(folder):
    """Where to stage an archive for `folder`: the nearest existing folder above it (the same disk, so files are
    moved by a link, not copied) unless that is on the import path; else the system's temporary folder."""
    for cand in (_existing_ancestor(Path(folder).parent), Path(tempfile.gettempdir())):
        if os.access(cand, os.W_OK) and not _on_import_path(cand):
            return cand
    raise ArchiveError(f"no writable folder outside Python's import path to unpack into for {folder}; set TMPDIR "
                       "to one")


# ------------------------------------------------------------------------------------------ reading members
@dataclass
class _Member:
    name: str  # as the archive spells it
    is_dir: bool
    size: int  # declared size unpacked
    packed: Optional[int]  # declared size packed (zip members; None in a tar, which is bounded as a whole)
    open: Callable  # () -> a binary file object with the member's bytes


def _refuse(archive, member, why):
    return UnsafeArchive(f"{archive}: member '{member}' {why}; nothing was extracted. Extract it yourself after "
                         "checking its contents, or fix the archive.")


def _zip_spans(z, archive):
    """{header offset: bytes from it to the next member's header or the central directory}: the most compressed
    data a member can really hold, whatever its declared compress_size says. Two entries pointing at the same data
    (an overlapping zip, the construction of the best compression bombs) are refused."""
    infos = z.infolist()
    offsets = sorted(i.header_offset for i in infos)
    for a, b in zip(offsets, offsets[1:]):
        if a == b:
            names = [i.filename for i in infos if i.header_offset == a]
            raise _refuse(archive, names[1], f"shares its data with member '{names[0]}' (an overlapping zip, as "
                                             "compression bombs are built)")
    end = getattr(z, "start_dir", None) or os.path.getsize(archive)
    return {a: max(b - a, 0) for a, b in zip(offsets, offsets[1:] + [end])}


def _zip_members(z, archive):
    spans = _zip_spans(z, archive)
    out = []
    for info in z.infolist():
        kind = stat.S_IFMT(info.external_attr >> 16)  # 0: made where files have no Unix mode (Windows)
        if kind == stat.S_IFLNK:
            raise _refuse(archive, info.filename, "is a symbolic link (a dataset archive holds files and folders only)")
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise _refuse(archive, info.filename, "is a device, FIFO or socket (a dataset archive holds files and "
                                                  "folders only)")
        packed = min(info.compress_size, spans[info.header_offset])  # a declared size larger than its room lies
        out.append(_Member(info.filename, info.is_dir(), info.file_size, packed, lambda info=info: z.open(info)))
    return out


def _tar_members(t, archive):
    out = []
    for m in t.getmembers():
        if m.issym() or m.islnk():
            raise _refuse(archive, m.name, "is a link (a dataset archive holds files and folders only)")
        if not (m.isreg() or m.isdir()):
            raise _refuse(archive, m.name, "is a device, FIFO or socket (a dataset archive holds files and folders "
                                           "only)")
        out.append(_Member(m.name, m.isdir(), m.size, None, lambda m=m: t.extractfile(m)))
    return out


def is_code_name(name):
    """True for a file name Python imports or runs (case-insensitively: `YAML.PY` is `yaml.py` on some disks)."""
    return name.lower().endswith(CODE_SUFFIXES)


def extraction_root(names, folder):
    """Where the archive goes: folder's parent when every member sits under '<folder name>/' (the official layout),
    else the folder itself."""
    top = {PurePosixPath(n.replace("\\", "/")).parts[0] for n in names if PurePosixPath(n.replace("\\", "/")).parts}
    return folder.parent if top == {folder.name} else folder


def _plan(members, archive, folder):
    """[(member, its parts, target Path)], or UnsafeArchive for the first member that leaves the folder, would
    replace a file, appears twice or is code."""
    root = extraction_root([m.name for m in members], folder)
    plan, seen = [], set()
    for m in members:
        name = m.name
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or ".." in parts:
            raise _refuse(archive, name, f"has an absolute or '..' path that leaves the dataset folder {folder} (a "
                                         "member may not be written outside it)")
        if not parts:  # './' and the like: the folder itself
            continue
        target = root.joinpath(*parts)
        if not _inside(_real(target), folder):  # realpath follows links already on disk
            raise _refuse(archive, name, f"would be written outside the dataset folder {folder}")
        if not m.is_dir:
            if is_code_name(parts[-1]):
                raise _refuse(archive, name, "is Python code or a Python path file (a dataset archive holds data "
                                             "only; nothing in it may be importable)")
            if os.path.lexists(target):
                raise _refuse(archive, name, f"would replace the existing file {target}")
            if target in seen:
                raise _refuse(archive, name, "appears twice (the second copy would replace the first)")
        seen.add(target)
        plan.append((m, parts, target))
    return plan


# ------------------------------------------------------------------------------------------ bounds
def _size(n):
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n:,} bytes"


def write_bound(folders, max_bytes=None):
    """(bytes one archive or download may write into `folders`, why): DISK_SHARE of the least free space among
    their disks, and max_bytes (or MAX_TOTAL_BYTES) when set."""
    free = min((shutil.disk_usage(_existing_ancestor(f)).free, f) for f in folders)
    bound, why = int(free[0] * DISK_SHARE), f"{DISK_SHARE:.0%} of the {_size(free[0])} free on the disk of {free[1]}"
    cap = max_bytes if max_bytes is not None else MAX_TOTAL_BYTES
    if cap is not None and cap < bound:
        bound, why = int(cap), "the bound set for one archive"
    return bound, why


class _Budget:
    """Bytes written so far against the bounds, checked before each chunk is written."""

    def __init__(self, archive, bound, why, ratio, archive_bytes=None):
        self.archive, self.bound, self.why, self.ratio = archive, bound, why, ratio
        self.archive_bytes = archive_bytes  # a tar is bounded as a whole: out per byte of the archive
        self.written = 0

    def too_large(self, n):
        return UnsafeArchive(f"{self.archive}: unpacks to {_size(n)} or more, over {_size(self.bound)} "
                             f"({self.why}); nothing was extracted. Free space, or extract it yourself.")

    def spend(self, n):
        self.written += n
        if self.written > self.bound:
            raise self.too_large(self.written)
        if self.archive_bytes is not None and self.written > RATIO_GRACE_BYTES and \
                self.written > self.ratio * max(self.archive_bytes, 1):
            raise UnsafeArchive(f"{self.archive}: unpacks to more than {self.ratio} times its own "
                                f"{_size(self.archive_bytes)} (a compression bomb?); nothing was extracted.")


def _check_declared(plan, budget):
    """The bounds against what the archive declares, before anything is written."""
    files = [m for m, _, _ in plan if not m.is_dir]
    total = sum(m.size for m in files)
    if total > budget.bound:
        raise budget.too_large(total)
    for m in files:
        _check_ratio(m, m.size, budget)
    if budget.archive_bytes is not None and total > RATIO_GRACE_BYTES and \
            total > budget.ratio * max(budget.archive_bytes, 1):
        raise UnsafeArchive(f"{budget.archive}: declares {_size(total)} unpacked, over {budget.ratio} times its own "
                            f"{_size(budget.archive_bytes)} (a compression bomb?); nothing was extracted.")


def _check_ratio(m, n, budget):
    if m.packed is not None and n > RATIO_GRACE_BYTES and n > budget.ratio * max(m.packed, 1):
        raise _refuse(budget.archive, m.name, f"expands {n / max(m.packed, 1):,.0f} times or more, over the "
                                              f"{budget.ratio} times a dataset file may (a compression bomb?)")


def _copy_counted(m, dst, budget):
    """Write member m to the new file dst, counting bytes as they come: the bounds hold whatever the archive
    declared, and a member may not hold more than it declared."""
    n = 0
    with m.open() as src, open(dst, "xb") as out:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                return n
            n += len(chunk)
            if n > m.size:
                raise _refuse(budget.archive, m.name, f"holds more than the {m.size:,} bytes it declares")
            _check_ratio(m, n, budget)
            budget.spend(len(chunk))
            out.write(chunk)


# ------------------------------------------------------------------------------------------ staging and moving
def _new_staging_folder(parent, name):
    """A new, empty folder in parent, named as utils/atomic_files.py names temporary outputs (so that what a killed
    process left is recognised as ours and removed on the next try)."""
    remove_stale_temp_files(parent, f"{name}.")
    for k in range(1000):
        tmp = temp_path_for(parent / (name if k == 0 else f"{name}-{k}"))
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue
    raise ArchiveError(f"could not make a staging folder in {parent}")


def _refuse_code_left(tmp, archive):
    """After writing: nothing but plain files and folders, and none importable (a second look, from the disk)."""
    for dirpath, dirnames, filenames in os.walk(tmp):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = p.relative_to(tmp).as_posix()
            st = os.lstat(p)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise _refuse(archive, rel, "is not a plain file or folder")
            if stat.S_ISREG(st.st_mode) and is_code_name(n):
                raise _refuse(archive, rel, "is Python code or a Python path file (a dataset archive holds data only)")


def _make_dirs(d, folder, made):
    """Make d and its missing parents (recorded in made, to be removed on failure); d must be inside folder."""
    if not _inside(_real(d), folder):  # an existing folder on the way is a link out of the dataset
        raise UnsafeArchive(f"{d} is outside the dataset folder {folder} (a link?); nothing was extracted.")
    missing = []
    p = d
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        p.mkdir()
        made.append(p)
    if not _inside(_real(d), folder):  # a link on disk, or made meanwhile
        raise UnsafeArchive(f"{d} is outside the dataset folder {folder} (a link?); nothing was extracted.")


def link_or_copy(src, dst):
    """src -> dst without ever replacing dst (FileExistsError if it exists): a hard link, or an exclusive copy where
    links cannot be made (another disk, a file system without them). A partial copy is removed."""
    try:
        os.link(src, dst)
        return
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EACCES):
            raise
    made = False
    try:
        with open(src, "rb") as a, open(dst, "xb") as b:
            made = True
            shutil.copyfileobj(a, b, CHUNK)
    except BaseException:
        if made:
            Path(dst).unlink(missing_ok=True)  # our own partial copy
        raise


def _place(src, dst, archive, member):
    try:
        link_or_copy(src, dst)
    except FileExistsError:
        raise _refuse(archive, member, f"would replace the existing file {dst} (it appeared meanwhile)") from None


def _move_into_place(tmp, plan, folder, archive):
    """Every staged member to its target; on any failure what was moved and the folders made are removed."""
    placed, made = [], []
    try:
        for m, parts, target in plan:
            _make_dirs(target if m.is_dir else target.parent, folder, made)
            if not m.is_dir:
                _place(tmp.joinpath(*parts), target, archive, m.name)
                placed.append(target)
        return placed
    except BaseException:
        for p in reversed(placed):
            p.unlink(missing_ok=True)
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:  # something else was put there meanwhile: not ours to remove
                pass
        raise


# ------------------------------------------------------------------------------------------ the entry points
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, tarfile.TarError, NotImplementedError, RuntimeError,
            ValueError)


def _disk_error(archive, where, e, written):
    if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return ArchiveError(f"{archive}: the disk of {where} filled up after {_size(written)} unpacked; nothing was "
                            "kept. Free space and rerun, or extract it yourself elsewhere.")
    return ArchiveError(f"{archive}: could not write into {where} ({e.strerror or e}); nothing was kept.")


def _open_archive(archive):
    """(an open ZipFile or TarFile, its members) or ArchiveError for anything else."""
    try:
        if zipfile.is_zipfile(archive):
            z = zipfile.ZipFile(archive)
            return z, _zip_members(z, archive)
        if tarfile.is_tarfile(archive):
            t = tarfile.open(archive)
            return t, _tar_members(t, archive)
    except UnsafeArchive:
        raise
    except (OSError, *_DAMAGED) as e:
        raise ArchiveError(f"{archive} cannot be read as an archive ({type(e).__name__}: {e}); nothing was "
                           "extracted. Download it again.") from None
    raise ArchiveError(f"{archive} is neither a zip nor a tar archive; nothing was extracted.")


def extract_archive(archive, folder, max_bytes=None, max_ratio=None):
    """Unpack the zip or tar `archive` into the dataset folder `folder` (see the module doc); returns the files
    written. max_bytes / max_ratio override MAX_TOTAL_BYTES / MAX_RATIO (tests set them low)."""
    archive, folder = Path(archive), Path(folder)
    why = unsafe_data_folder_reason(folder)
    if why:
        raise UnsafeArchive(f"{archive}: not extracted, because the dataset folder {folder} {why}. Unpack it into a "
                            "folder of its own (the data YAML's 'path:').")
    real = _real(folder)
    parent = staging_parent(real)
    budget = _Budget(archive, *write_bound({parent, real}, max_bytes), max_ratio or MAX_RATIO)
    handle, members = _open_archive(archive)
    with handle:
        if isinstance(handle, tarfile.TarFile):
            budget.archive_bytes = archive.stat().st_size
        plan = _plan(members, archive, real)
        _check_declared(plan, budget)
        tmp = _new_staging_folder(parent, real.name)
        try:
            try:
                for m, parts, _ in plan:
                    dst = tmp.joinpath(*parts)
                    if m.is_dir:
                        dst.mkdir(parents=True, exist_ok=True)
                    else:
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        _copy_counted(m, dst, budget)
            except OSError as e:
                raise _disk_error(archive, tmp, e, budget.written) from None
            except ArchiveError:
                raise
            except _DAMAGED as e:
                raise ArchiveError(f"{archive} is damaged or unsupported ({type(e).__name__}: {e}); nothing was "
                                   "extracted. Download it again.") from None
            _refuse_code_left(tmp, archive)
            try:
                return _move_into_place(tmp, plan, real, archive)
            except OSError as e:
                raise _disk_error(archive, real, e, budget.written) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def safe_extract_zip(archive, folder, **bounds):
    """The zip `archive` into the dataset folder `folder` (extract_archive; kept for its callers)."""
    return extract_archive(archive, folder, **bounds)


def download_file(url, dest, max_bytes=None):
    """Fetch url into the new file dest, counting bytes against the free space (and max_bytes); a partial file never
    stays. Raises ArchiveError naming what happened: the fetch failed (network, a wrong URL), too large, disk full."""
    dest = Path(dest)
    if os.path.lexists(dest):
        raise ArchiveError(f"{dest} exists already; not downloading {url} over it.")
    bound, why = write_bound({dest.parent}, max_bytes)
    tmp = temp_path_for(dest)
    n = 0
    try:
        with urllib.request.urlopen(url) as r, open(tmp, "xb") as out:  # noqa: S310 (a URL the user consented to)
            declared = r.headers.get("Content-Length") if hasattr(r, "headers") else None
            if declared and declared.isdigit() and int(declared) > bound:
                raise ArchiveError(f"{url} is {_size(int(declared))}, over {_size(bound)} ({why}); not downloaded. "
                                   "Free space, or fetch it yourself.")
            while True:
                chunk = r.read(CHUNK)
                if not chunk:
                    break
                n += len(chunk)
                if n > bound:
                    raise ArchiveError(f"{url} is over {_size(bound)} ({why}); the download was stopped and removed. "
                                       "Free space, or fetch it yourself.")
                out.write(chunk)
        link_or_copy(tmp, dest)  # never over a file that appeared meanwhile
    except ArchiveError:
        raise
    except urllib.error.URLError as e:  # before OSError: URLError is one
        raise ArchiveError(f"could not fetch {url} ({getattr(e, 'reason', e)}): download failed.") from None
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ArchiveError(f"the disk of {dest.parent} filled up after {_size(n)} of {url}; the partial download "
                               "was removed. Free space and rerun.") from None
        raise ArchiveError(f"could not fetch {url} into {dest} ({e.strerror or e}): download failed.") from None
    except (ValueError, http.client.HTTPException) as e:  # a malformed URL, a connection cut short
        raise ArchiveError(f"could not fetch {url} ({e}): download failed.") from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest
