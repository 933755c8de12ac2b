"""One training process per run folder: the process that writes a run folder holds a lock on `<folder>/.lock` for as
long as it trains, so a second `--resume` or `--exist-ok` run on a live folder stops in one line instead of writing
the same results.csv and checkpoints.

The lock is a POSIX record lock (fcntl.lockf), which the kernel drops when its process ends however it ends (crash,
SIGKILL, power loss on a local disk): a dead run leaves no lock behind, only a file that no one holds, and its folder
can be resumed at once. POSIX locks are not inherited by forked children (loader workers, plot processes), so they
cannot keep a dead trainer's folder locked. The file names the holder (pid and host) for the message. Framework-free.

Trap: a POSIX lock is released when its process closes ANY descriptor of the file, so this process never opens a
lock file it holds a second time (HELD below answers for it).
"""
import contextlib
import errno
import fcntl
import logging
import os
import socket
from pathlib import Path

from utils.errors import UserError

LOCK_NAME = ".lock"
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
HELD = {}  # resolved lock path -> descriptor, for the locks this process holds


class RunFolderError(UserError):
    """The run folder cannot be locked: it cannot be created or written."""


class RunFolderBusy(RunFolderError):
    """Another live process trains into this run folder."""


def _holder(fd):
    try:
        text = os.pread(fd, 256, 0).decode(errors="replace").split()
    except OSError:
        text = []
    pid = text[0] if text else "?"
    host = text[1] if len(text) > 1 else "?"
    return pid, host


def _busy(folder, pid, host):
    return RunFolderBusy(f"{folder} is in use by another training (pid {pid} on host {host}): two runs writing one "
                         "folder would mix their results.csv and checkpoints. Wait for it to finish (or stop it), or "
                         "choose another --name.")


def acquire(folder):
    """Lock `folder` for this process; returns the lock's path (None where the file system has no locks: a
    warning says so). RunFolderBusy names the live holder."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = (folder / LOCK_NAME).resolve()
        return _acquire(folder, path)
    except RunFolderError:
        raise
    except OSError as e:
        raise RunFolderError(f"Run folder {folder} is not writable: {e.strerror or e}. Choose another --project/--name "
                             "or free some disk space.") from None


def _acquire(folder, path):
    if path in HELD:  # this process trains into it already (an outer run): opening it again would drop the lock
        raise _busy(folder, os.getpid(), socket.gethostname())
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid, host = _holder(fd)
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise _busy(folder, pid, host) from None
            if e.errno in NO_LOCKS:  # some network/FUSE file systems: train on, but say what is not guarded
                logging.getLogger("yolov5").warning(
                    f"WARNING ⚠️ {folder}: this file system cannot lock files ({os.strerror(e.errno)}), so a second "
                    "run into this folder would not be stopped; do not --resume it twice at once")
                return None
            raise
        try:  # the file a releasing holder unlinked is no lock on the folder any more: lock the current one
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    HELD[path] = fd
    return path


def release(path):
    """Give the lock back and remove its file (removed before the descriptor closes: a process that opened the old
    file meanwhile sees it unlinked and retries on a new one)."""
    fd = HELD.pop(path, None) if path is not None else None
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


@contextlib.contextmanager
def hold_run_folder(folder):
    """with hold_run_folder(save_dir): ... -- the folder is this process's until the block ends."""
    path = acquire(folder)
    try:
        yield path
    finally:
        release(path)
