"""Distributed (DDP) training, in one package. Who this process is, a DistContext, is read once in train.py and passed
down; nothing below reads the launcher's environment for it again.

    context.py        DistContext(rank, local_rank, world_size): .distributed, .is_main; from_env()
    launch.py         launch checks and the device of each rank (training_device), LaunchError
    process_group.py  process group with its timeout and the watchdog, started and finished per rank
    ddp.py            wrap_model: SyncBatchNorm, the framework's DistributedDataParallel, watchdog beats
    collectives.py    barrier, broadcast_flag, main_process_first: no-ops outside a DDP job
    watchdog.py       ends every rank of a broken job (no framework: runs in plain processes too)
    probe.py          an outside observer named by YOLO_DDP_PROBE (the DDP tests' recorder)

This file imports only the context, so the watchdog runs without a framework.
"""
from utils.distributed.context import DistContext

__all__ = ["DistContext"]
