"""Run folders are claimed by creating them: callers racing for runs/train/exp each get their own folder, two
train.py runs started together with the same --project/--name log to exp and exp2, --exist-ok keeps sharing one,
and an uncreatable folder is one line and exit 1 in every entry script."""
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers.train_helpers import make_tiny_dataset

ROOT = Path(__file__).resolve().parents[2]


def _race_threads(base, n):
    from utils.general import increment_path
    barrier, got, errors = threading.Barrier(n), [], []

    def claim():
        try:
            barrier.wait()
            got.append(increment_path(base, mkdir=True))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=claim) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return got


def _claim_in_child(base, barrier, queue):
    from utils.general import increment_path
    barrier.wait()
    queue.put(str(increment_path(base, mkdir=True)))


@pytest.fixture
def slow_fs(monkeypatch):
    """A slow file system: every existence check takes 10 ms, so racing callers interleave between looking
    for a free name and creating it (the window a check-then-create scheme hands the same name out in)."""
    import time
    exists = Path.exists

    def slow_exists(self, *args, **kwargs):
        time.sleep(0.01)
        return exists(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", slow_exists)


def test_racing_threads_each_claim_their_own_folder(tmp_path, slow_fs):
    (tmp_path / "runs" / "exp").mkdir(parents=True)  # taken before the race
    got = _race_threads(tmp_path / "runs" / "exp", 16)
    assert sorted(p.name for p in got) == sorted(f"exp{n}" for n in range(2, 18)), sorted(map(str, got))
    assert all(p.is_dir() for p in got)


def test_racing_processes_each_claim_their_own_folder(tmp_path, slow_fs):
    ctx = multiprocessing.get_context("fork")  # the children inherit the slow file system
    n = 6
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_child, args=(tmp_path / "exp", barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(60)
    assert sorted(Path(p).name for p in got) == sorted(["exp"] + [f"exp{i}" for i in range(2, n + 1)]), got


def test_exist_ok_reuses_the_folder_and_a_file_in_the_way_is_skipped(tmp_path):
    from utils.general import increment_path
    assert increment_path(tmp_path / "exp", exist_ok=True, mkdir=True) == tmp_path / "exp"
    assert increment_path(tmp_path / "exp", exist_ok=True, mkdir=True) == tmp_path / "exp"  # --exist-ok: shared
    assert increment_path(tmp_path / "exp", mkdir=True) == tmp_path / "exp2"
    (tmp_path / "exp3").write_text("not a folder")
    assert increment_path(tmp_path / "exp", mkdir=True) == tmp_path / "exp4"
    assert increment_path(tmp_path / "exp", sep="-", mkdir=True) == tmp_path / "exp-2"
    assert not (tmp_path / "other").exists() and increment_path(tmp_path / "other") == tmp_path / "other"


def test_uncreatable_run_folder_is_a_user_error(tmp_path):
    from utils.errors import UserError
    from utils.general import increment_path
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(UserError, match=r"Run folder .*a_file/runs/exp is not writable.*--project"):
        increment_path(blocker / "runs" / "exp", mkdir=True)
    with pytest.raises(UserError, match="--project"):
        increment_path(blocker / "exp", exist_ok=True, mkdir=True)


def _entry(script, args, timeout=300):
    from utils.backend import BACKEND
    env = {**os.environ, "YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / script), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.framework_free  # stops before any model runs: the message is the same under both backends
@pytest.mark.slow
@pytest.mark.parametrize("script", ["val.py", "detect.py"])
def test_unwritable_project_is_one_line(script, tmp_path, yolov5n_pt):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    project = blocker / "runs"
    args = ["--weights", yolov5n_pt, "--project", project, "--device", "cpu", "--img", "64"]
    args += ["--source", ROOT / "data" / "images"] if script == "detect.py" else ["--data", "coco128.yaml"]
    r = _entry(script, args)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if "is not writable" in ln]
    assert len(errors) == 1 and str(project / "exp") in errors[0] and "--project" in errors[0], r.stderr[-3000:]


@pytest.mark.framework_free  # its subject is the run folder claim (utils/paths.py), the same under both backends
@pytest.mark.slow
def test_two_concurrent_trainings_get_two_folders(tmp_path):
    from tests.helpers.train_helpers import backend_python
    from utils.loggers import read_results_csv
    data = make_tiny_dataset(tmp_path / "data", n_train=8, n_val=4, size=96)
    python, backend = backend_python()
    env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    args = [str(ROOT / "train.py"), "--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64",
            "--batch-size", "8", "--epochs", "2", "--device", "cpu", "--workers", "0", "--project", tmp_path / "runs",
            "--name", "exp", "--noplots", "--noautoanchor"]
    procs = [subprocess.Popen([python, *map(str, args)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == ["exp", "exp2"], runs
    for run in runs:
        rows = read_results_csv(tmp_path / "runs" / run / "results.csv")
        assert [int(r["epoch"]) for r in rows] == [0, 1], (run, rows)
        assert (tmp_path / "runs" / run / "weights" / "last.pt").is_file()
    logged = sorted(next(ln for ln in o.splitlines() if "Logging results to" in ln) for o in outs)
    assert logged[0] != logged[1], logged


@pytest.mark.fresh_python  # knows its processes by pid
def test_run_start_removes_temporary_files_of_dead_savers_only(tmp_path):
    """A process killed while saving a checkpoint leaves last.pt.<host>.<pid>.tmp; the next start or resume in that
    run folder removes it, but keeps the temporary file of a live writer (this process) and anything else."""
    import signal

    import train
    from utils.atomic_files import temp_path_for
    from utils.checkpoint.run_options import RecordedFlags
    from utils.distributed import DistContext
    from utils.engine.hyp import load_hyp
    from utils.engine.run_folder import prepare_run_folder

    weights = tmp_path / "exp" / "weights"
    weights.mkdir(parents=True)
    (weights / "last.pt").write_bytes(b"the previous checkpoint")
    saver = subprocess.Popen(  # a save that gets SIGKILLed half way
        [sys.executable, "-c", "import sys, time\nfrom utils.checkpoint.zip_writer import atomic_write\n"
         "def write(f):\n    f.write(b'half a checkpoint'); f.flush(); print('writing', flush=True); time.sleep(60)\n"
         f"atomic_write({str(weights / 'last.pt')!r}, write)\n"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    assert saver.stdout.readline().strip() == "writing"
    saver.send_signal(signal.SIGKILL)
    saver.wait()
    dead = weights / temp_path_for(weights / "last.pt").name.replace(f".{os.getpid()}.", f".{saver.pid}.")
    assert dead.read_bytes() == b"half a checkpoint"
    live = temp_path_for(weights / "best.pt")  # this process: a save in progress
    live.write_bytes(b"being written")
    other = weights / "notes.tmp"
    other.write_text("not a temporary file of a save")

    opt = train.parse_opt(True, args=["--cfg", "yolov5n.yaml", "--weights", "", "--device", "cpu"])
    opt.save_dir = str(tmp_path / "exp")
    for resume in (True, False):  # on resume and on a new start (--exist-ok) alike
        opt.resume = resume
        prepare_run_folder(RecordedFlags.of(opt), load_hyp(opt.hyp), DistContext())
        assert not dead.exists() and live.exists() and other.exists()
        assert (weights / "last.pt").read_bytes() == b"the previous checkpoint"
        dead.write_bytes(b"again")
