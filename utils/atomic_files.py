"""Files written whole or not at all: a temporary file beside the target, renamed over it when complete. A process
killed in between leaves only the temporary file, named <target>.<host>.<pid>.tmp, which the next writer of that
folder removes (remove_stale_temp_files): the name says whose write it was, so a live writer's file is never taken.
Used by the label and image caches (utils/data/) and the checkpoint writer (utils/checkpoint/); imports no
framework, as the checkpoint package must not."""
import os
import socket
import time
from pathlib import Path

ZIP_MAGIC = b"PK\x03\x04"  # a zip archive's first bytes: checkpoints and label caches written here are zips
STALE_AFTER_S = 3600  # a temporary file from another machine (shared storage) this old is no write in progress


def _host():
    return socket.gethostname().replace(".", "-")  # no dots: the name is split on them


def temp_path_for(path):
    path = Path(path)
    return path.with_name(f"{path.name}.{_host()}.{os.getpid()}.tmp")


def write_atomically(path, write, durable=False, mode=None):
    """write(binary file object) into a temporary file, then rename it to path. On failure the temporary file is
    removed and the exception propagates. durable: fsync before the rename, so that a power loss cannot leave an
    empty file under the final name (checkpoints; caches can be rebuilt). mode: the file's permissions."""
    tmp = temp_path_for(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def is_stale_temp_file(f, now=None):
    """A <name>.<host>.<pid>.tmp whose writer is gone: a dead process on this machine, or, for one written
    elsewhere (a shared folder), untouched for STALE_AFTER_S."""
    parts = f.name.rsplit(".", 3)
    if len(parts) != 4 or parts[3] != "tmp" or not parts[2].isdigit():
        return False
    host, pid = parts[1], int(parts[2])
    if host == _host():
        return pid != os.getpid() and not _pid_alive(pid)
    try:
        return (now or time.time()) - f.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def remove_stale_temp_files(folder, name_prefix):
    """Remove the temporary files of interrupted writes of <name_prefix>* in folder; returns how many."""
    n = 0
    try:
        candidates = list(Path(folder).glob(f"{name_prefix}*.tmp"))
    except OSError:
        return 0
    for f in candidates:
        if is_stale_temp_file(f):
            try:
                f.unlink()
                n += 1
            except OSError:  # read-only folder, or another process removed it first
                pass
    return n
