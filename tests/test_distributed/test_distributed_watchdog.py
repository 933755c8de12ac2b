"""utils/distributed/watchdog.py alone, in plain Python processes (the module imports no framework: fast): a killed
peer ends every other rank, a clean finish is not a crash, a killed launcher ends its orphaned rank."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.process_helpers import alive as _alive, free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]
WATCHDOG_RANK = [sys.executable, "-m", "utils.distributed.watchdog"]  # a stand-in rank: the watchdog, beating


def _watchdog_ranks(world, seconds, tmp_path, parent_script=None):
    port = _free_port()
    env = {**os.environ, "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "YOLO_DDP_WATCHDOG_PORT": str(port), "YOLO_DDP_PEER_TIMEOUT": "20"}
    procs = []
    for r in range(world):
        procs.append(subprocess.Popen(WATCHDOG_RANK + [str(seconds)], cwd=ROOT, env={**env, "RANK": str(r)},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout.readline().startswith("ready")
    return procs


def _wait_all(procs, timeout):
    t0 = time.time()
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(0.1, timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a watchdog rank did not exit in time")
        out.append((p.returncode, err))
    return out, time.time() - t0


def test_watchdog_ends_every_rank_when_one_dies(tmp_path):
    procs = _watchdog_ranks(3, 120, tmp_path)
    time.sleep(1.0)
    procs[2].send_signal(signal.SIGKILL)
    out, secs = _wait_all(procs[:2], 15)
    assert [rc for rc, _ in out] == [3, 3], out
    assert "rank 2 is gone" in out[0][1] and "rank 0 is gone" in out[1][1]
    assert secs < 10


def test_watchdog_clean_finish_is_not_a_crash(tmp_path):
    procs = _watchdog_ranks(2, 2, tmp_path)
    out, _ = _wait_all(procs, 30)
    assert [rc for rc, _ in out] == [0, 0], out


@pytest.mark.fresh_python  # knows its processes by pid
def test_watchdog_ends_rank_when_launcher_dies(tmp_path):
    """A 'launcher' that starts one rank and is SIGKILLed: the orphaned rank exits by itself."""
    code = ("import os, subprocess, sys, time\n"
            f"p = subprocess.Popen({WATCHDOG_RANK + ['120']!r}, cwd={str(ROOT)!r})\n"
            "print(p.pid, flush=True)\ntime.sleep(120)\n")
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1",
           "YOLO_DDP_WATCHDOG_PORT": str(_free_port())}
    launcher = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    rank_pid = int(launcher.stdout.readline())
    time.sleep(1.0)
    launcher.kill()
    launcher.wait()
    t0 = time.time()
    while _alive(rank_pid) and time.time() - t0 < 15:
        time.sleep(0.2)
    assert not _alive(rank_pid), "the orphaned rank kept running after its launcher died"
