"""Whole-or-nothing writes and the cleanup of what interrupted ones leave (utils/atomic_files.py)."""
import os
import time

import pytest

from tests.helpers.process_helpers import dead_pid
from utils.atomic_files import is_stale_temp_file, remove_stale_temp_files, temp_path_for, write_atomically

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)


def test_stale_means_writer_gone(tmp_path):
    target = tmp_path / "train.cache"
    mine = temp_path_for(target)
    host = mine.name.split(".")[2]
    dead = tmp_path / f"train.cache.{host}.{dead_pid()}.yolo-partial.cache"
    alive = tmp_path / f"train.cache.{host}.{os.getppid()}.yolo-partial.cache"  # the process that started this test
    far_new = tmp_path / "train.cache.otherhost.12345.yolo-partial.cache"
    far_old = tmp_path / "train.cache.otherhost.23456.yolo-partial.cache"
    unrelated = tmp_path / "train.cache.notes.tmp"
    # names of another shape are a user's, however old and whatever digits they hold: never removed
    users = [tmp_path / f"train.cache.{host}.{dead_pid()}.tmp", tmp_path / "train.cache.old.12.tmp"]
    for f in (mine, dead, alive, far_new, far_old, unrelated, *users):
        f.write_bytes(b"partial")
    old = time.time() - 2 * 3600
    for f in (far_old, *users):
        os.utime(f, (old, old))
    assert [is_stale_temp_file(f) for f in (mine, dead, alive, far_new, far_old, unrelated, *users)] == \
        [False, True, False, False, True, False, False, False]
    assert remove_stale_temp_files(tmp_path, "train.cache.") == 2
    assert not dead.exists() and not far_old.exists() and mine.exists() and alive.exists()
    assert all(f.exists() for f in users)


def test_write_is_whole_or_nothing(tmp_path):
    target = tmp_path / "x.bin"
    target.write_bytes(b"old")

    def fails(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically(target, fails)
    assert target.read_bytes() == b"old" and [f.name for f in tmp_path.iterdir()] == ["x.bin"]
    write_atomically(target, lambda f: f.write(b"new"))
    assert target.read_bytes() == b"new" and [f.name for f in tmp_path.iterdir()] == ["x.bin"]


def test_checkpoint_writer_uses_the_same_temporary_name(tmp_path):
    """The checkpoint writer's temporary file is <name>.<host>.<pid>.yolo-partial.pt like the caches', so the same cleanup knows
    whose it is; it is fsynced and renamed to a 0644 file."""
    from utils.checkpoint.zip_writer import atomic_write
    target = tmp_path / "weights" / "last.pt"
    seen = []

    def write(f):
        f.write(b"checkpoint bytes")
        seen.extend(p.name for p in target.parent.iterdir())

    atomic_write(target, write)
    assert seen == [temp_path_for(target).name] and seen[0].endswith(f".{os.getpid()}.yolo-partial.pt")
    assert [p.name for p in target.parent.iterdir()] == ["last.pt"] and target.read_bytes() == b"checkpoint bytes"
    assert (target.stat().st_mode & 0o777) == 0o644
