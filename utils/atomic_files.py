"""The one module through which the project writes its outputs: checkpoints, caches, exports, pictures, label files,
crops, CSV and YAML files. Its rules, which the rest of the project gets by calling it:

- Whole or nothing. Every file is written under a temporary name beside its target and renamed over it when
  complete (output_path / write_atomically / write_text / write_image); a folder output (an export's
  `_openvino_model/`) is built in a temporary folder and its files are renamed into place one by one on success
  (output_folder). A failed or interrupted write leaves what was there before, byte for byte.
- Only our own names are deleted. A temporary name has one exact shape, <name>.<host>.<pid>.yolo-partial<suffix>
  (the suffix keeps the extension, so libraries that choose a format by it, cv2.imwrite and matplotlib, still
  work); clean-up (remove_stale_temp_files) removes only names of that shape whose writer is gone, never a user's
  `x.notes.3.tmp`.
- Outputs never collide: unique_path gives a name no file has yet (`crop.jpg`, `crop2.jpg`, ...), reserving it with an
  exclusive create so two writers cannot pick the same one.
- A write that fails stops with one line: OSError becomes OutputWriteError (a UserError) naming the path and the
  reason (disk full, read-only, permission).

Fault injection: every write goes through _before_write(path), which tests replace to fail the k-th write
(tests/helpers/faults.py). Imports no framework, as the checkpoint package must not."""
import errno
import os
import re
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from utils.errors import UserError

ZIP_MAGIC = b"PK\x03\x04"  # a zip archive's first bytes: checkpoints and label caches written here are zips
STALE_AFTER_S = 3600  # a temporary file from another machine (shared storage) this old is no write in progress
TEMP_MARK = "yolo-partial"
# <name>.<host>.<pid>.yolo-partial[.<ext>]: host has no dots (see _host), pid is digits
_TEMP_NAME = re.compile(rf"^(?P<base>.+)\.(?P<host>[^./]+)\.(?P<pid>\d+)\.{TEMP_MARK}(?P<ext>\.[^.]*)?$")

_HINTS = {errno.ENOSPC: "the disk is full: free space or choose another folder",
          errno.EDQUOT: "the disk quota is used up: free space or choose another folder",
          errno.EROFS: "the file system is read-only: choose a writable folder (--project)",
          errno.EACCES: "permission denied: choose a writable folder (--project)",
          errno.EPERM: "permission denied: choose a writable folder (--project)"}


class OutputWriteError(UserError, OSError):
    """An output could not be written; what was there before is unchanged. An OSError too, so that callers that
    treat a failed write as a warning (a cache that cannot be saved) keep doing so."""


def write_failed(path, e):
    """OutputWriteError for OSError e raised while writing path: one line naming the path and what to do."""
    if isinstance(e, OutputWriteError):
        return e
    hint = _HINTS.get(getattr(e, "errno", None)) or (getattr(e, "strerror", None) or str(e) or type(e).__name__)
    err = OutputWriteError(f"could not write {path}: {hint}; nothing was written there")
    err.errno = getattr(e, "errno", None)
    return err


def _before_write(path):
    """Called before every file this module writes; tests replace it to inject faults (ENOSPC, EROFS, EIO)."""


def _host():
    return socket.gethostname().replace(".", "-") or "host"  # no dots: the name is split on them


def temp_path_for(path):
    """The temporary name for path written by this process: <name>.<host>.<pid>.yolo-partial<suffix of path>."""
    path = Path(path)
    return path.with_name(f"{path.name}.{_host()}.{os.getpid()}.{TEMP_MARK}{path.suffix}")


@contextmanager
def output_path(path, mode=None, durable=False):
    """with output_path(p) as tmp: write tmp by name (cv2.imwrite, fig.savefig, onnx.save); on leaving the block
    tmp is renamed to p. On an exception tmp is removed, p is left as it was, and an OSError is raised as
    OutputWriteError naming p. A writer that reports failure without raising (cv2.imwrite returns False) must
    raise itself; a temp file that was never created is a failure too."""
    path = Path(path)
    tmp = temp_path_for(path)
    try:
        _before_write(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        if not tmp.exists():
            raise OSError(errno.EIO, "the writer produced no file")
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        _discard(tmp)
        raise write_failed(path, e) from e
    except BaseException:
        _discard(tmp)
        raise


def write_atomically(path, write, durable=False, mode=None):
    """write(binary file object) into a temporary file, then rename it to path (see output_path). durable: fsync
    before the rename, so that a power loss cannot leave an empty file under the final name (checkpoints; caches
    can be rebuilt). mode: the file's permissions."""
    with output_path(path, mode=mode) as tmp:
        with open(tmp, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())


def write_bytes(path, data, **kw):
    write_atomically(path, lambda f: f.write(data), **kw)


def write_text(path, text, **kw):
    write_bytes(path, text.encode("utf-8"), **kw)


def write_image(path, im, params=()):
    """An image file (format from path's extension) with OpenCV, whole or not at all; OpenCV's False return (an
    unknown extension, a failed encoder) is an error naming the path, never a silent skip."""
    import cv2  # here, not at the top: the checkpoint package imports this module and must not need OpenCV

    with output_path(path) as tmp:
        try:
            written = cv2.imwrite(str(tmp), im, list(params))
        except cv2.error as e:  # OpenCV 5 raises for a suffix it has no encoder for (4.x returned False)
            raise OSError(errno.EINVAL, f"OpenCV cannot write this image ({' '.join(str(e).split())[-80:]})") from None
        if not written:
            raise OSError(errno.EIO, "OpenCV could not encode or write the image")


def save_figure(fig, path, **savefig_kw):
    """A matplotlib figure saved whole or not at all (the format from path's extension)."""
    with output_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or None, **savefig_kw)


@contextmanager
def output_folder(folder):
    """with output_folder(d) as tmp: build a folder output in tmp (a fresh folder beside d); on success each file
    in it is renamed into d (made if missing), replacing only the files of the same name: files of d that the new
    output does not have (a user's notes) stay. On failure tmp is removed and d is left exactly as it was."""
    folder = Path(folder)
    tmp = temp_path_for(folder)
    try:
        _before_write(folder)
        _discard(tmp)
        tmp.mkdir(parents=True)
        yield tmp
        _rename_files_into(tmp, folder)
        _discard(tmp)
    except OSError as e:
        _discard(tmp)
        raise write_failed(folder, e) from e
    except BaseException:
        _discard(tmp)
        raise


def _rename_files_into(src_dir, folder):
    """Rename each file of src_dir to the same relative name in folder. Each file it replaces is first renamed
    aside (under its temporary name) and removed only once all are in, so a failure half way (the k-th rename)
    renames them back and removes the new files and folders: folder ends as it was, never half old, half new."""
    done, made = [], []  # (target, the replaced file set aside or None); folders created, deepest first per file
    try:
        for src in sorted(p for p in src_dir.rglob("*") if not p.is_dir()):
            dst = folder / src.relative_to(src_dir)
            _before_write(dst)
            missing = [p for p in (dst.parent, *dst.parent.parents) if not p.exists()]
            dst.parent.mkdir(parents=True, exist_ok=True)
            made += missing
            if dst.is_dir() and not dst.is_symlink():
                raise OSError(errno.EISDIR, f"{dst} is a folder")
            aside = temp_path_for(dst) if os.path.lexists(dst) else None
            if aside is not None:
                os.replace(dst, aside)
            done.append((dst, aside))
            os.replace(src, dst)
    except BaseException:
        for dst, aside in reversed(done):
            try:
                if aside is not None:
                    os.replace(aside, dst)
                else:
                    dst.unlink(missing_ok=True)
            except OSError:
                pass
        for d in sorted(made, key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()  # only if empty: created by this call
            except OSError:
                pass
        raise
    for _, aside in done:
        if aside is not None:
            _discard(aside)


def log_file_opened(path):
    """The one kind of output written around this module: an append-only log that its own library creates and
    writes (TensorBoard's event file, events.out.tfevents.<time>.<host>.<pid>.<n>: a new file under a name no
    other file has, never over one). It is announced here when opened, so that it passes the same fault-injection
    point as every other write; a failure is an OutputWriteError naming it (the TensorBoard logger then turns off
    with one warning, utils/loggers/guard.py)."""
    try:
        _before_write(path)
    except OSError as e:
        raise write_failed(path, e) from e


def _discard(p):
    """Remove a temporary file or folder of ours (never called on a user's name)."""
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    except OSError:
        pass


def unique_path(path, sep=""):
    """path if no file has that name yet, else the first free <stem><sep>2<suffix>, <stem><sep>3<suffix>, ... The
    name is reserved by creating an empty file exclusively (O_EXCL), so a second caller never gets the same one; the
    caller then writes it (output_path renames over the reservation)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1 << 30):
        p = path if n == 1 else path.with_name(f"{path.stem}{sep}{n}{path.suffix}")
        try:
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return p
        except FileExistsError:
            continue
    raise OutputWriteError(f"no free name left for {path}")


def numbered_unique_path(path, start=1, sep=""):
    """unique_path with the search starting at number `start` (1 is path itself, 2 is <stem><sep>2<suffix>);
    returns (the reserved path, its number). A writer that numbers many files of one name (a video's crops,
    one per box per frame) passes the number after its last one instead of probing every taken name again.
    A folder that cannot be written raises OutputWriteError naming path."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for n in range(max(1, int(start)), 1 << 30):
            p = path if n == 1 else path.with_name(f"{path.stem}{sep}{n}{path.suffix}")
            try:
                os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return p, n
            except FileExistsError:
                continue
    except OSError as e:
        raise write_failed(path, e) from e
    raise OutputWriteError(f"no free name left for {path}")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def is_stale_temp_file(f, now=None):
    """A temporary name of this module's exact shape whose writer is gone: a dead process on this machine, or, for
    one written elsewhere (a shared folder), untouched for STALE_AFTER_S. Any other name is never stale."""
    m = _TEMP_NAME.match(Path(f).name)
    if not m:
        return False
    host, pid = m["host"], int(m["pid"])
    if host == _host():
        return pid != os.getpid() and not _pid_alive(pid)
    try:
        return (now or time.time()) - Path(f).stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def remove_stale_temp_files(folder, name_prefix):
    """Remove what interrupted writes of <name_prefix>* left in folder (this module's temporary names only, their
    writer gone); returns how many."""
    n = 0
    try:
        candidates = [f for f in Path(folder).iterdir() if f.name.startswith(name_prefix) and TEMP_MARK in f.name]
    except OSError:
        return 0
    for f in candidates:
        if is_stale_temp_file(f):
            _discard(f)
            n += 1
    return n
