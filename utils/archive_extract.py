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
itself. Which folders may receive data, and the disk bound, are utils/data_folders.py's; a download is
utils/downloads.py's. Framework-free.
"""
import errno
import importlib.machinery
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

from utils.atomic_files import remove_stale_temp_files, temp_path_for
from utils.data_folders import existing_ancestor, human_size, is_inside, on_import_path, real_path, \
    unsafe_data_folder_reason, write_bound
from utils.errors import UserError

MAX_RATIO = 100  # bytes out per byte in: labels compress ~5x, images ~1x; 50 MB of zeros ~1000x
RATIO_GRACE_BYTES = 1 << 20  # a member (a tar: the whole archive) this small may compress better: harmless
CHUNK = 1 << 20
# Whatever Python imports or runs at start: modules, bytecode, extension modules and site-packages' .pth files
CODE_SUFFIXES = tuple(sorted({*importlib.machinery.all_suffixes(), ".py", ".pyc", ".pyo", ".pyw", ".pyd", ".pyz",
                              ".so", ".pth"}))


class ArchiveError(UserError):
    """An archive could not be unpacked (damaged, the disk full), or a download failed; nothing of it was kept."""


class UnsafeArchive(ArchiveError):
    """An archive holds what a dataset archive must not (code, links, members leaving the folder or replacing a file)
    or expands past a bound; nothing of it was kept."""


# ------------------------------------------------------------------------------------------ where to stage
def staging_parent(folder):
    """Where to stage an archive for `folder`: the nearest existing folder above it (the same disk, so files are
    moved by a link, not copied) unless that is on the import path; else the system's temporary folder."""
    for cand in (existing_ancestor(Path(folder).parent), Path(tempfile.gettempdir())):
        if os.access(cand, os.W_OK) and not on_import_path(cand):
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
        if not is_inside(real_path(target), folder):  # realpath follows links already on disk
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
class _Budget:
    """Bytes written so far against the bounds, checked before each chunk is written."""

    def __init__(self, archive, bound, why, ratio, archive_bytes=None):
        self.archive, self.bound, self.why, self.ratio = archive, bound, why, ratio
        self.archive_bytes = archive_bytes  # a tar is bounded as a whole: out per byte of the archive
        self.written = 0

    def too_large(self, n):
        return UnsafeArchive(f"{self.archive}: unpacks to {human_size(n)} or more, over {human_size(self.bound)} "
                             f"({self.why}); nothing was extracted. Free space, or extract it yourself.")

    def spend(self, n):
        self.written += n
        if self.written > self.bound:
            raise self.too_large(self.written)
        if self.archive_bytes is not None and self.written > RATIO_GRACE_BYTES and \
                self.written > self.ratio * max(self.archive_bytes, 1):
            raise UnsafeArchive(f"{self.archive}: unpacks to more than {self.ratio} times its own "
                                f"{human_size(self.archive_bytes)} (a compression bomb?); nothing was extracted.")


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
        raise UnsafeArchive(f"{budget.archive}: declares {human_size(total)} unpacked, over {budget.ratio} times its "
                            f"own {human_size(budget.archive_bytes)} (a compression bomb?); nothing was extracted.")


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
    if not is_inside(real_path(d), folder):  # an existing folder on the way is a link out of the dataset
        raise UnsafeArchive(f"{d} is outside the dataset folder {folder} (a link?); nothing was extracted.")
    missing = []
    p = d
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        p.mkdir()
        made.append(p)
    if not is_inside(real_path(d), folder):  # a link on disk, or made meanwhile
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
        return ArchiveError(f"{archive}: the disk of {where} filled up after {human_size(written)} unpacked; nothing "
                            "was kept. Free space and rerun, or extract it yourself elsewhere.")
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
    real = real_path(folder)
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
