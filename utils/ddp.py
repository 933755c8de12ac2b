"""DDP plumbing for train.py on both launchers (python -m torch.distributed.run / python -m oneflow.distributed.launch):
start the process group with an explicit timeout and the watchdog, wrap the model, and a test-only debug hook.

Framework differences handled here (through utils.backend, the one module that imports a framework):
- PyTorch: init_process_group(gloo on CPU, nccl on CUDA, timeout) before any collective; DistributedDataParallel is a
  wrapper (model.module holds the weights) that broadcasts rank 0's parameters and buffers at construction and the
  buffers (BatchNorm statistics) before every forward.
- OneFlow 0.9.0: the runtime reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE itself (no init call);
  flow.nn.parallel.DistributedDataParallel returns the SAME module with gradient hooks (no .module), broadcasts rank
  0's parameters once and the buffers before every forward; its collectives have no timeout, so the watchdog
  (utils/ddp_watchdog.py) is what bounds a hang.
- SyncBatchNorm runs only on CUDA under both frameworks (PyTorch: "SyncBatchNorm layers only work with GPU
  modules"; OneFlow: CUDA kernels only), so --sync-bn on CPU is refused with a message.
Both frameworks' DDP average gradients over ranks, which is why the trainer multiplies the loss by the world size.
"""
import json
import os
from pathlib import Path

from utils import backend, ddp_watchdog
from utils.errors import UserError

DEFAULT_TIMEOUT_S = 10800  # 3 h, as ultralytics: the other ranks wait at a collective while rank 0 validates COCO


class DDPError(UserError, RuntimeError):
    """A refused DDP configuration; the message says what to do."""


def timeout_s():
    """Process-group / barrier timeout and the watchdog's no-progress limit: YOLO_DDP_TIMEOUT seconds."""
    try:
        return float(os.environ.get("YOLO_DDP_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return float(DEFAULT_TIMEOUT_S)


def setup(device):
    """Called once per process before any collective: process group (PyTorch) and the watchdog. No-op alone."""
    if backend.get_world_size() <= 1:
        return
    backend.init_process_group(device, timeout_s=int(timeout_s()))
    if os.environ.get("YOLO_DDP_WATCHDOG", "1") == "0":  # escape hatch, e.g. a firewall that blocks its port
        return
    ddp_watchdog.start(stall_timeout_s=timeout_s(),
                       peer_timeout_s=float(os.environ.get("YOLO_DDP_PEER_TIMEOUT", "60")))


def finish():
    """This rank ended normally: tell the peers' watchdogs it is not a crash, then stop watching."""
    ddp_watchdog.finish()


def sync_bn_error(sync_bn, world_size, device):
    """The message refusing --sync-bn, or None when it can be applied (or is moot)."""
    if not sync_bn or world_size <= 1:
        return None
    if not backend.is_cuda(device):
        return (f"--sync-bn needs CUDA GPUs: SyncBatchNorm has no CPU implementation under {backend.BACKEND} "
                f"{backend.VERSION}. Drop --sync-bn for CPU training.")
    return None


def wrap_model(model, device, local_rank, sync_bn=False):
    """The model ready for DDP training on this rank (unchanged in a single process). Rank 0's weights win."""
    world = backend.get_world_size()
    if world <= 1:
        if sync_bn:
            from utils.general import LOGGER
            LOGGER.warning("WARNING ⚠️ --sync-bn only applies to DDP training (several processes); ignored.")
        return model
    err = sync_bn_error(sync_bn, world, device)
    if err:
        raise DDPError(err)
    nn = backend.torch.nn
    if sync_bn:
        from utils.general import LOGGER
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model).to(device)
        LOGGER.info("Using SyncBatchNorm()")
    if backend.IS_TORCH:
        ids = [local_rank] if backend.is_cuda(device) else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids, output_device=ids[0] if ids else None)
    else:
        model = nn.parallel.DistributedDataParallel(model)
    # Progress for the watchdog: every forward pass is a beat (no hook in the training loop itself).
    model.register_forward_pre_hook(lambda module, inputs: ddp_watchdog.beat())
    return model


# ----------------------------------------------------------------------------------------------------------------
# Test hook: YOLO_DDP_DEBUG_DIR=<dir> makes each rank write what the DDP tests check (nothing otherwise):
#   rank{r}_epoch{e}.npz  its float32 parameters by name when its e-th epoch starts (e=0: right after the DDP
#                         broadcast; e > 0: after all of the previous epoch's optimizer steps);
#   rank{r}.jsonl         one line per epoch: the dataset indices its sampler handed to the loader, and its pid.
# YOLO_DDP_DEBUG_EXIT="<rank>:<epoch>" makes that rank os._exit(1) at its second forward pass of that epoch (a crash
# in the middle of an epoch, for the fault test).
def attach_debug(model, loader):
    out = os.environ.get("YOLO_DDP_DEBUG_DIR")
    if not out:
        return
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rank = backend.get_rank()
    exit_at = os.environ.get("YOLO_DDP_DEBUG_EXIT", "")
    exit_rank, exit_epoch = (int(x) for x in exit_at.split(":")) if exit_at else (-1, -1)
    state = {"epoch": -1, "forwards": 0}
    sampler = loader.sampler
    base = type(sampler)

    def dump_params(epoch):
        import numpy as np
        params = {n[len("module."):] if n.startswith("module.") else n: backend.to_numpy(p).astype(np.float32)
                  for n, p in model.named_parameters()}  # names as in the bare model (PyTorch's DDP adds module.)
        np.savez(out / f"rank{rank}_epoch{epoch}.npz", **params)

    class RecordingSampler(base):  # the loader's own sampler, observed: what this rank really iterated
        def __iter__(self):
            idx = [int(i) for i in base.__iter__(self)]
            state["epoch"] += 1
            state["forwards"] = 0
            dump_params(state["epoch"])
            with open(out / f"rank{rank}.jsonl", "a") as f:
                f.write(json.dumps({"epoch": state["epoch"], "indices": idx, "pid": os.getpid()}) + "\n")
            return iter(idx)

    sampler.__class__ = RecordingSampler

    def maybe_exit(module, inputs):
        state["forwards"] += 1
        if rank == exit_rank and state["epoch"] == exit_epoch and state["forwards"] == 2:
            os._exit(1)

    model.register_forward_pre_hook(maybe_exit)
