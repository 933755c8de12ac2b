"""Bounded resources: processes end with their parent (utils/child_processes.py), the checkpoint reader bounds what a
file may make it allocate (utils/checkpoint/torch_reader.py), only regular files are opened as images and labels
(utils/data/files.py), plots stay within a memory bound whatever the number of classes (utils/metrics.py)."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")


def _alive(pid):
    """A process that runs (a zombie waiting for its reaper counts as gone: it holds no memory)."""
    if LINUX:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _wait_gone(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


# ---- 1. children end with their parent -----------------------------------------------------------------------
PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
import utils.child_processes as cp
if {fallback!r}:
    cp._PRCTL = None  # as where prctl is missing: the pipe and pid watch must end the helpers
from utils.plot_jobs import PlotJobs
jobs = PlotJobs(processes=True, warm_matplotlib=False)
jobs.submit("nothing", time.sleep, 0)
jobs.wait()
print(" ".join(str(h.process.pid) for h in jobs._helpers), flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="plot helpers are forked")
@pytest.mark.parametrize("fallback", [False, True], ids=["prctl", "pipe-watch"])
def test_plot_helpers_end_when_their_parent_is_killed(fallback):
    """The out-of-memory killer's SIGKILL runs no clean-up in the parent: the helpers must still go, at once."""
    env = {**os.environ, "YOLO_PLOT_PROCESSES": "1"}
    p = subprocess.Popen([sys.executable, "-c", PARENT.format(root=str(ROOT), fallback=fallback)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        helpers = [int(x) for x in line.split()]
        assert len(helpers) == 2 and all(_alive(h) for h in helpers), (line, p.stderr.read() if p.poll() else "")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        left = _wait_gone(helpers, 5.0)
        assert not left, f"plot helpers {left} outlived their SIGKILLed parent"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _child_of_gone_parent(use_prctl):
    import utils.child_processes as cp
    if not use_prctl:
        cp._PRCTL = None
    cp.end_with_parent(parent_pid=-1)  # a pid that is not our parent: as if it had died before the call
    time.sleep(30)
    os._exit(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
@pytest.mark.parametrize("use_prctl", [True, False], ids=["prctl", "pipe-watch"])
def test_a_child_whose_parent_died_before_it_asked_ends_at_once(use_prctl):
    """The race prctl leaves open (the parent gone between fork and prctl) is closed by the getppid check."""
    import multiprocessing
    proc = multiprocessing.get_context("fork").Process(target=_child_of_gone_parent, args=(use_prctl,))
    t = time.monotonic()
    proc.start()
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL, proc.exitcode
    assert time.monotonic() - t < 5
