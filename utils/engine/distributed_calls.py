"""The engine's only calls into the distributed code (utils/ddp.py, utils/dist.py, utils/torch_utils.py), each
taking the run's DistContext. Single process: every call is a no-op or the single-process answer."""
import contextlib

from utils import ddp, dist
from utils.engine.errors import TrainingError
from utils.torch_utils import torch_distributed_zero_first


def loader_rank(ctx):
    """The rank argument create_dataloader expects: -1 for a single process (no sharding), else the local rank."""
    return ctx.local_rank if ctx.distributed else -1


@contextlib.contextmanager
def local_main_first(ctx):
    """Local rank 0 runs the body first (dataset checks, label caches), the other ranks then read its results."""
    with torch_distributed_zero_first(ctx.local_rank if ctx.distributed else -1):
        yield


def wrap_model(model, device, ctx, sync_bn, train_loader):
    """SyncBatchNorm (CUDA only) and DistributedDataParallel when distributed; the model itself otherwise.
    (--sync-bn on CPU was refused in train.py before any work.)"""
    try:
        model = ddp.wrap_model(model, device, ctx.local_rank, sync_bn=sync_bn)
    except ddp.DDPError as e:
        raise TrainingError(str(e)) from e
    ddp.attach_debug(model, train_loader)  # YOLO_DDP_DEBUG_DIR only (the DDP tests); no-op otherwise
    return model


def agree(flag, device, ctx):
    """Rank 0's boolean on every rank (the decision to stop training)."""
    return dist.broadcast_flag(flag, device) if ctx.distributed else bool(flag)
