"""Collectives for training code, given the job's DistContext. Each one is a no-op (or the single-process answer)
outside a DDP job, so callers never test for DDP themselves."""
import contextlib

from utils import backend


def _active(ctx):
    return ctx.distributed and backend.dist_ready()


def barrier(ctx):
    """Wait for every rank."""
    if _active(ctx):
        backend.dist_barrier()


def broadcast_flag(ctx, value, device="cpu"):
    """Rank 0's boolean, on every rank (the early-stop decision)."""
    if not _active(ctx):
        return bool(value)
    t = backend.torch.tensor([1.0 if value else 0.0], device=device)
    backend.dist_broadcast_(t, 0)
    return bool(t.item() > 0.5)


@contextlib.contextmanager
def main_process_first(ctx):
    """The first process of each node (local rank 0) runs the body first, e.g. to scan the labels and write their
    .cache file; the node's other ranks wait at a barrier, then run it on the cached result."""
    if ctx.local_rank != 0:
        barrier(ctx)
    yield
    if ctx.local_rank == 0:
        barrier(ctx)
