"""utils/distributed/collectives.py: outside a DDP job every collective is a no-op with the single-process answer;
inside one (two real processes, gloo, PyTorch) broadcast_flag carries rank 0's decision and main_process_first lets
local rank 0 finish its body before the others start theirs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.process_helpers import free_port
from utils.backend import IS_TORCH, torch
from utils.distributed import DistContext
from utils.distributed.collectives import barrier, broadcast_flag, main_process_first

ROOT = Path(__file__).resolve().parents[2]


def test_single_process_collectives_are_no_ops():
    ctx = DistContext()
    barrier(ctx)  # would need a process group under PyTorch: none exists, so it must not be called
    assert broadcast_flag(ctx, True) is True and broadcast_flag(ctx, 0) is False
    order = []
    with main_process_first(ctx):
        order.append("body")
    assert order == ["body"]
    if IS_TORCH:
        assert not torch.distributed.is_initialized()


_RANK = r"""
import json, os, sys, time
from utils import backend
from utils.distributed import DistContext
from utils.distributed.collectives import barrier, broadcast_flag, main_process_first
ctx = DistContext.from_env()
backend.dist_init(backend.device("cpu"), 60)
log = sys.argv[1]
with main_process_first(ctx):
    if ctx.local_rank == 0:
        time.sleep(1.0)  # were the other rank not waiting, it would write first
    with open(log, "a") as f:
        f.write(f"{ctx.rank}\n")
flags = [broadcast_flag(ctx, ctx.rank == 0), broadcast_flag(ctx, ctx.rank == 1)]
barrier(ctx)
print(json.dumps({"rank": ctx.rank, "flags": flags}), flush=True)
backend.torch.distributed.destroy_process_group()  # left to the interpreter's exit, gloo's threads may abort it
"""


@pytest.mark.slow
@pytest.mark.skipif(not IS_TORCH, reason="two plain processes with a gloo group: OneFlow needs its own launcher "
                                         "(covered by tests/test_distributed/test_ddp.py)")
def test_two_ranks_follow_rank_0(tmp_path):
    import json
    port, log = free_port(), tmp_path / "order.log"
    procs = []
    for r in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_BACKEND": "torch", "YOLO_QUIET": "1", "WORLD_SIZE": "2",
               "RANK": str(r), "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-c", _RANK, str(log)], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert log.read_text().split() == ["0", "1"]  # rank 0's body ran first although it slept
    assert [o["flags"] for o in outs] == [[True, False], [True, False]]  # both ranks hold rank 0's values
