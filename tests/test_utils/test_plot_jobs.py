"""utils/plot_jobs.py: plot files drawn by helper processes while the caller goes on, all written after wait();
a failure is one warning; a helper that dies does not hang the run; inline where turned off."""
import os
import signal
import time

import numpy as np
import pytest

from utils.general import LOGGER
from utils.plot_jobs import HELPERS, PlotJobs

FORK = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork-based helpers")


def _write_pid(path, delay=0.0):
    time.sleep(delay)
    path.write_text(str(os.getpid()))


def _fail():
    raise ValueError("no axes")


@pytest.fixture
def warnings_seen(caplog):
    LOGGER.propagate = True
    with caplog.at_level("WARNING", logger="yolov5"):
        yield caplog
    LOGGER.propagate = False


@FORK
def test_drawings_run_beside_the_caller_and_are_all_written_after_wait(tmp_path):
    jobs = PlotJobs()
    files = [tmp_path / f"{i}.txt" for i in range(5)]
    try:
        jobs.submit("first", _write_pid, tmp_path / "first.txt")  # the helpers start here
        t0 = time.perf_counter()
        for f in files:
            jobs.submit(f.name, _write_pid, f, delay=0.3)
        handed_over = time.perf_counter() - t0
        jobs.wait()
        assert all(f.is_file() for f in files)  # all written once wait() returns
    finally:
        jobs.close()
    pids = {int(f.read_text()) for f in files}
    assert os.getpid() not in pids and len(pids) == HELPERS  # drawn by the helpers, side by side
    assert handed_over < 0.3  # submit() only hands over: 1.5 s of drawing did not hold the caller


@FORK
def test_a_failed_drawing_is_one_warning_and_the_rest_are_drawn(tmp_path, warnings_seen):
    jobs = PlotJobs()
    try:
        jobs.submit("broken.png", _fail)
        jobs.submit("fine.txt", _write_pid, tmp_path / "fine.txt")
        jobs.wait()
    finally:
        jobs.close()
    assert warnings_seen.text.count("broken.png not plotted: no axes") == 1 and (tmp_path / "fine.txt").is_file()


@FORK
def test_a_dead_helper_is_reported_not_waited_for_forever(tmp_path, warnings_seen):
    """Helpers killed while drawing: their drawings are reported lost; later ones are drawn here instead."""
    jobs = PlotJobs()
    try:
        for i in range(HELPERS):
            jobs.submit(f"lost{i}.png", _write_pid, tmp_path / f"lost{i}.txt", delay=3)
        time.sleep(0.5)
        for h in jobs._helpers:
            os.kill(h.process.pid, signal.SIGKILL)
        t0 = time.perf_counter()
        jobs.wait()
        assert time.perf_counter() - t0 < 10
        jobs.submit("later.txt", _write_pid, tmp_path / "later.txt")
    finally:
        jobs.close()
    assert all(f"lost{i}.png not plotted" in warnings_seen.text for i in range(HELPERS))
    assert not list(tmp_path.glob("lost*.txt")) and int((tmp_path / "later.txt").read_text()) == os.getpid()


def test_inline_when_turned_off(tmp_path, monkeypatch, warnings_seen):
    monkeypatch.setenv("YOLO_PLOT_PROCESSES", "0")
    jobs = PlotJobs()
    jobs.submit("a.txt", _write_pid, tmp_path / "a.txt")
    assert int((tmp_path / "a.txt").read_text()) == os.getpid()  # drawn before submit returned, here
    jobs.submit("broken.png", _fail)
    assert "broken.png not plotted: no axes" in warnings_seen.text


def test_plot_files_of_a_validation_are_there_when_it_returns(tmp_path):
    """run_validation with plots: the batch mosaics, curves and confusion matrix drawn in children, all on disk when
    it returns."""
    from utils.backend import from_numpy
    from utils.evaluation import DetectionEvaluator, run_validation
    from utils.backend import nn, torch

    class Fixed(nn.Module):  # predicts each image's one label box, confidently
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, im):
            b = im.shape[0]
            p = np.zeros((b, 1, 7), np.float32)
            p[:, 0, :5] = 32, 32, 20, 20, 0.9
            p[:, 0, 5] = 1.0
            return from_numpy(p), None

    batch = (from_numpy(np.zeros((2, 3, 64, 64), np.uint8)),
             from_numpy(np.array([[0, 0, 0.5, 0.5, 0.3, 0.3], [1, 1, 0.5, 0.5, 0.3, 0.3]], np.float32)),
             ["a.jpg", "b.jpg"], [((64, 64), ((1.0, 1.0), (0.0, 0.0)))] * 2)
    ev = DetectionEvaluator(2, {0: "a", 1: "b"}, plots=True, save_dir=tmp_path)
    run_validation(Fixed(), [batch], ev)
    for f in ("val_batch0_labels.jpg", "val_batch0_pred.jpg", "confusion_matrix.png", "PR_curve.png",
              "F1_curve.png", "P_curve.png", "R_curve.png"):
        assert (tmp_path / f).is_file(), f


@FORK
def test_a_drawing_that_cannot_be_handed_over_is_drawn_here(tmp_path):
    jobs = PlotJobs()
    try:
        jobs.submit("first", _write_pid, tmp_path / "first.txt")
        jobs.submit("local.txt", lambda f: _write_pid(f), tmp_path / "local.txt")  # a lambda does not pickle
        jobs.wait()
    finally:
        jobs.close()
    assert int((tmp_path / "local.txt").read_text()) == os.getpid()


@FORK
def test_a_drawing_goes_to_the_helper_with_the_least_work_queued(tmp_path):
    """The confusion matrix counts as five curves: the six curves handed over after it go mostly to the other
    helper (by count alone, three would queue behind it)."""
    jobs = PlotJobs()
    heavy = tmp_path / "cm.txt"
    light = [tmp_path / f"curve{i}.txt" for i in range(6)]
    try:
        jobs.submit("confusion_matrix.png", _write_pid, heavy, delay=1.0)
        for f in light:
            jobs.submit(f.name, _write_pid, f, delay=0.3)
        jobs.wait()
    finally:
        jobs.close()
    behind_heavy = sum(f.read_text() == heavy.read_text() for f in light)
    assert behind_heavy <= 1, behind_heavy


_MATPLOTLIB_IN_HELPERS = r'''
import sys
from pathlib import Path
from utils.plot_jobs import PlotJobs
assert "matplotlib" not in sys.modules  # the helpers fork from a process without it


def loaded(path):  # the warm-up, where asked for, runs before the helper takes its first job
    Path(path).write_text(str("matplotlib.pyplot" in sys.modules))


for warm, name in ((False, "cold"), (True, "warm")):
    jobs = PlotJobs(processes=True, warm_matplotlib=warm)
    jobs.submit(name, loaded, f"{sys.argv[1]}/{name}.txt")
    jobs.wait()
    jobs.close()
'''


@FORK
def test_helpers_import_matplotlib_at_start_only_when_asked(tmp_path):
    """The classification trainer draws with OpenCV alone: its helpers (warm_matplotlib=False) never load
    matplotlib; the default helpers load it before their first drawing."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-c", _MATPLOTLIB_IN_HELPERS, str(tmp_path)], cwd=root, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root),
                                                    "YOLO_TEST_ZYGOTE": "off"})  # a fresh python: the warm start
    # has matplotlib imported
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "cold.txt").read_text() == "False" and (tmp_path / "warm.txt").read_text() == "True"


_EARLY_SCRIPT = r'''
import json, sys
from pathlib import Path
from utils import plot_jobs
plot_jobs.fork_early(sys.argv[2:])
early = [h.process.pid for h in plot_jobs._EARLY]
import utils.backend  # the framework comes after the fork, as in train.py
from tests.helpers.plot_probe import report
from utils.metrics import ConfusionMatrix
out = Path(sys.argv[1])


def defined_in_main(path):  # the helpers were forked before this existed: drawn here instead
    Path(path).write_text("inline")


jobs = plot_jobs.PlotJobs()
for i in range(4):
    jobs.submit(f"probe{i}", report, out / f"probe{i}.json")
jobs.submit("confusion_matrix.png", ConfusionMatrix(nc=3).plot, save_dir=out, names=["a", "b", "c"])
jobs.submit("main.txt", defined_in_main, out / "main.txt")
jobs.submit("probe4", report, out / "probe4.json")
jobs.close()
(out / "early.json").write_text(json.dumps(early))
'''


_UNADOPTED_SCRIPT = r'''
import json, sys
from utils import plot_jobs, signals
signals.install("train")  # as train.py: a SIGTERM is only recorded, unless the process resets it
plot_jobs.fork_early([])
json.dump([h.process.pid for h in plot_jobs._EARLY], open(sys.argv[1], "w"))
'''


@FORK
def test_early_helpers_nobody_takes_end_with_the_script(tmp_path):
    """A run that fails before its trainer takes the helpers over (a flag error, a locked run folder) exits at once:
    multiprocessing's exit handler ends the helpers with SIGTERM, which they do not ignore."""
    import json
    import subprocess
    import sys
    from tests.helpers.process_helpers import ROOT, alive
    script, pids = tmp_path / "unadopted.py", tmp_path / "pids.json"
    script.write_text(_UNADOPTED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_TEST_ZYGOTE": "off"}
    env.pop("YOLO_PLOT_PROCESSES", None)
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(script), str(pids)], check=True, env=env, cwd=ROOT, timeout=60)
    assert time.monotonic() - t0 < 30
    helpers = json.loads(pids.read_text())
    assert len(helpers) == HELPERS
    deadline = time.monotonic() + 5
    while any(alive(p) for p in helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in helpers)


@FORK
@pytest.mark.parametrize("argv", [[], ["--noplots"], ["--evolve", "3"]])
def test_helpers_forked_early_hold_no_framework_and_keep_the_callers_priority(tmp_path, argv):
    """fork_early (train.py's first step): two helpers forked before the framework import draw every later job,
    curves and matrix included, without importing the framework; a function defined after the fork is drawn inline;
    a run that draws nothing forks none (PlotJobs forks its own then). Every helper, early or not, runs at the
    caller's priority: the caller waits for its drawings, and a helper that lowered its priority could not raise it
    again when the run's end waits on it beside other busy processes (utils/plot_jobs.py's _serve has the figures)."""
    import json
    import subprocess
    import sys
    from tests.helpers.process_helpers import ROOT
    script = tmp_path / "early.py"
    script.write_text(_EARLY_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_TEST_ZYGOTE": "off"}  # a fresh interpreter: no framework yet
    env.pop("YOLO_PLOT_PROCESSES", None)
    subprocess.run([sys.executable, str(script), str(tmp_path), *argv], check=True, env=env, cwd=ROOT, timeout=120)
    early = json.loads((tmp_path / "early.json").read_text())
    probes = [json.loads((tmp_path / f"probe{i}.json").read_text()) for i in range(5)]
    assert (tmp_path / "confusion_matrix.png").stat().st_size > 0 and (tmp_path / "main.txt").read_text() == "inline"
    pids = {p["pid"] for p in probes}
    assert len(pids) == HELPERS and os.getpid() not in pids
    assert all(p["nice"] == os.nice(0) for p in probes), probes  # the script inherits this niceness
    if argv:
        assert early == []  # nothing forked early; PlotJobs forked its helpers after the framework import
        return
    assert pids == set(early)  # the early helpers drew everything
    for p in probes:
        assert not p["framework"] and p["matplotlib"], p
