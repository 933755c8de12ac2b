"""The model ready for DDP training on this rank: SyncBatchNorm when asked for (CUDA only), the framework's
DistributedDataParallel (utils/backend: PyTorch wraps the model, OneFlow hooks the same module), and a watchdog beat
on every forward pass. Both frameworks' DDP average gradients over ranks, which is why the trainer multiplies the
loss by the world size."""
from utils import backend
from utils.distributed import watchdog
from utils.distributed.launch import LaunchError, sync_bn_error
from utils.log import LOGGER


def wrap_model(model, ctx, device, sync_bn=False):
    """Unchanged in a single process (where --sync-bn was already reported as ignored). Rank 0's weights win: both
    frameworks broadcast them when wrapping."""
    if not ctx.distributed:
        return model
    err = sync_bn_error(sync_bn, ctx, device)
    if err:
        raise LaunchError(err)
    if sync_bn:
        model = backend.convert_sync_batchnorm(model).to(device)
        LOGGER.info("Using SyncBatchNorm()")
    model = backend.ddp_wrap(model, device, ctx.local_rank)
    model.register_forward_pre_hook(lambda module, inputs: watchdog.beat())  # progress, without a loop hook
    return model
