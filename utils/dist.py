"""Distributed helpers for training code: rank, world size, barrier, broadcast. Each one is safe (a no-op or the
single-process answer) when no process group exists, so callers never test for DDP themselves."""
import contextlib

from utils import backend


def rank():
    """Global rank (0 in a single process)."""
    return backend.get_rank()


def local_rank():
    """Rank on this node, -1 in a single process (the ultralytics convention)."""
    return backend.get_local_rank()


def world_size():
    return backend.get_world_size()


def is_main_process():
    return rank() == 0


def is_distributed():
    return world_size() > 1


def barrier():
    backend.barrier()


@contextlib.contextmanager
def main_process_first():
    """Rank 0 runs the body first (label caching, downloads); the others wait, then run it on the cached result."""
    if not is_main_process():
        barrier()
    yield
    if is_main_process():
        barrier()


def broadcast_flag(value, device="cpu"):
    """Rank 0's boolean, on every rank (the early-stop decision)."""
    if not is_distributed():
        return bool(value)
    t = backend.torch.tensor([1.0 if value else 0.0], device=device)
    backend.broadcast_(t, 0)
    return bool(t.item() > 0.5)
