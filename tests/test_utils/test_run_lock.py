"""One process per run folder (utils/run_lock.py): a second --exist-ok or --resume run on a live folder stops in one
line naming the holder's pid and host, changing nothing; a crashed holder leaves no lock; DDP ranks other than 0
never touch it."""
import hashlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from utils.run_lock import LOCK_NAME, RunFolderBusy, acquire, hold_run_folder, release

pytestmark = pytest.mark.fresh_python  # a lock names its holder's pid: the processes must be real interpreters

ROOT = Path(__file__).resolve().parents[2]
HOLDER = ("import sys, time; sys.path.insert(0, {root!r}); from utils.run_lock import acquire; acquire({folder!r}); "
          "print('held', flush=True); time.sleep(120)")


@pytest.fixture
def holder(tmp_path):
    """Another process holding tmp_path/exp; yields (folder, Popen)."""
    folder = tmp_path / "exp"
    p = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(folder))],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    yield folder, p
    p.kill()
    p.wait()


def test_live_holder_is_named_and_a_killed_one_leaves_no_lock(holder):
    folder, p = holder
    with pytest.raises(RunFolderBusy, match=rf"pid {p.pid} on host {socket.gethostname()}\)") as e:
        acquire(folder)
    assert "\n" not in str(e.value) and str(folder) in str(e.value)
    p.send_signal(signal.SIGKILL)  # a crash: the kernel drops the lock with the process
    p.wait()
    with hold_run_folder(folder) as path:
        assert path.read_text().split() == [str(os.getpid()), socket.gethostname()]
    assert not (folder / LOCK_NAME).exists(), "a finished run leaves no lock file"
    with hold_run_folder(folder):  # and can be taken again (resume of a finished run)
        pass


def test_one_process_cannot_hold_a_folder_twice(tmp_path):
    path = acquire(tmp_path)
    try:
        with pytest.raises(RunFolderBusy, match=f"pid {os.getpid()} "):
            acquire(tmp_path)
        # the refused second try must not have dropped the first lock (POSIX locks go with any close of the file)
        out = subprocess.run([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(tmp_path))],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "RunFolderBusy" in out.stderr
    finally:
        release(path)


def test_exist_ok_run_on_a_live_folder_stops_before_writing(holder):
    import train
    folder, p = holder
    (folder / "results.csv").write_text("epoch\n0\n")
    with pytest.raises(RunFolderBusy, match=f"pid {p.pid} "):
        train.run(data="data/coco128.yaml", cfg="yolov5n.yaml", weights="", imgsz=64, epochs=1, device="cpu",
                  workers=0, project=str(folder.parent), name=folder.name, exist_ok=True, noplots=True)
    assert (folder / "results.csv").read_text() == "epoch\n0\n"
    assert sorted(f.name for f in folder.iterdir()) == [LOCK_NAME, "results.csv"]


def test_resume_of_a_live_run_stops_before_writing(holder):
    import train
    from utils.checkpoint import save_checkpoint
    folder, p = holder
    last = folder / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    save_checkpoint({"epoch": 0, "optimizer": {"state": {}, "param_groups": []},
                     "opt": {"data": "data/coco128.yaml", "epochs": 3, "device": "cpu", "workers": 0}}, last)
    before = hashlib.sha256(last.read_bytes()).hexdigest()
    with pytest.raises(RunFolderBusy, match=f"pid {p.pid} on host"):
        train.run(resume=str(last))
    assert hashlib.sha256(last.read_bytes()).hexdigest() == before
    assert sorted(f.name for f in last.parent.iterdir()) == ["last.pt"]


def test_only_the_main_process_locks(holder, monkeypatch):
    """A DDP rank other than 0 never writes the run folder, so it must not trip over rank 0's lock."""
    import utils.engine.run as run
    from utils.distributed import DistContext
    folder, _ = holder

    class Built(Exception):
        pass

    def build(*a, **k):
        raise Built

    monkeypatch.setattr(run, "build_training", build)
    opt = type("Opt", (), {"save_dir": str(folder)})()
    with pytest.raises(Built):
        run.train({}, opt, "cpu", DistContext(rank=1, local_rank=1, world_size=2))
    with pytest.raises(RunFolderBusy):
        run.train({}, opt, "cpu", DistContext(rank=0, local_rank=0, world_size=2))


@pytest.mark.slow
def test_second_train_py_prints_one_line_and_exits_1(holder):
    from tests.helpers.train_helpers import run_train
    folder, p = holder
    r = run_train(["--data", "coco128.yaml", "--cfg", "yolov5n.yaml", "--weights", "", "--device", "cpu",
                   "--project", folder.parent, "--name", folder.name, "--exist-ok", "--epochs", "1"])
    assert r.returncode == 1, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if "in use by another training" in ln]
    assert len(lines) == 1 and f"pid {p.pid} on host {socket.gethostname()}" in lines[0]
    assert "Traceback" not in r.stderr


def test_a_file_system_without_locks_trains_on_with_a_warning(tmp_path, monkeypatch, caplog):
    import errno
    import fcntl
    import logging

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "lockf", no_locks)
    with caplog.at_level(logging.WARNING, logger="yolov5"), hold_run_folder(tmp_path) as path:
        assert path is None
    assert any("cannot lock files" in r.getMessage() for r in caplog.records)
