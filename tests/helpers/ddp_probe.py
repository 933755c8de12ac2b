"""The DDP tests' probe (YOLO_DDP_PROBE=ddp_probe, tests/helpers/ on PYTHONPATH; utils/distributed/probe.py attaches
it on every rank once the model is wrapped). With YOLO_DDP_DEBUG_DIR=<dir> each rank writes what
tests/test_distributed/test_ddp.py checks:
  rank{r}_epoch{e}.npz  its float32 parameters by name when its e-th epoch starts (e=0: right after the DDP
                        broadcast; e > 0: after all of the previous epoch's optimizer steps);
  rank{r}.jsonl         one line per epoch: the dataset indices its sampler handed to the loader, and its pid.
YOLO_DDP_DEBUG_EXIT="<rank>:<epoch>" makes that rank os._exit(1) at its second forward pass of that epoch (a crash in
the middle of an epoch, for the fault test)."""
import json
import os
from pathlib import Path

import numpy as np


def attach(model, loader, ctx):
    out = os.environ.get("YOLO_DDP_DEBUG_DIR")
    if not out:
        return
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    from utils.backend import to_numpy
    exit_at = os.environ.get("YOLO_DDP_DEBUG_EXIT", "")
    exit_rank, exit_epoch = (int(x) for x in exit_at.split(":")) if exit_at else (-1, -1)
    state = {"epoch": -1, "forwards": 0}
    sampler = loader.sampler
    base = type(sampler)

    def dump_params(epoch):
        params = {n[len("module."):] if n.startswith("module.") else n: to_numpy(p).astype(np.float32)
                  for n, p in model.named_parameters()}  # names as in the bare model (PyTorch's DDP adds module.)
        np.savez(out / f"rank{ctx.rank}_epoch{epoch}.npz", **params)

    class RecordingSampler(base):  # the loader's own sampler, observed: what this rank really iterated
        def __iter__(self):
            idx = [int(i) for i in base.__iter__(self)]
            state["epoch"] += 1
            state["forwards"] = 0
            dump_params(state["epoch"])
            with open(out / f"rank{ctx.rank}.jsonl", "a") as f:
                f.write(json.dumps({"epoch": state["epoch"], "indices": idx, "pid": os.getpid()}) + "\n")
            return iter(idx)

    sampler.__class__ = RecordingSampler

    def maybe_exit(module, inputs):
        state["forwards"] += 1
        if ctx.rank == exit_rank and state["epoch"] == exit_epoch and state["forwards"] == 2:
            os._exit(1)

    model.register_forward_pre_hook(maybe_exit)
