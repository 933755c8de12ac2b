"""Launch checks and the device of each rank, decided before any work: what a single process or a DDP job cannot
honour is refused in one line, and rank i is put on its GPU.

    device = training_device(LaunchOptions.of(flags), ctx)   # flags: the run's flags; ctx: the job's DistContext
"""
import dataclasses

from utils import backend
from utils.backend_choice import BACKEND_NAMES
from utils.checkpoint.run_options import typed_options
from utils.errors import UserError
from utils.log import LOGGER

LAUNCHERS = ("'python -m torch.distributed.run --nproc_per_node {n} train.py ...'",
             "'python -m oneflow.distributed.launch --nproc_per_node {n} train.py ...'")


class LaunchError(UserError, RuntimeError):
    """A flag or device this launch cannot honour; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """The flags the launch checks read, typed and frozen; a script without a flag gets its default (classification
    has no --sync-bn, --evolve or --image-weights)."""
    device: str = ""
    batch_size: int = 16
    sync_bn: bool = False
    evolve: bool = False
    image_weights: bool = False

    @classmethod
    def of(cls, flags):
        """From the run's flags (a RecordedFlags, or any mapping of flag names to values)."""
        return typed_options(cls, flags)


def _launch_hint(n):
    return " or ".join(x.format(n=n) for x in LAUNCHERS)


def device_ids(spec):
    """The GPU ids a --device string names ('0,1' -> [0, 1], 'cuda:2' -> [2], 'cpu' or '' -> [])."""
    return [int(s) for s in str(spec).replace("cuda:", "").split(",") if s.strip().isdigit()]


def sync_bn_error(sync_bn, ctx, device):
    """The message refusing --sync-bn, or None when it can be applied (or is moot: a single process)."""
    if not sync_bn or not ctx.distributed:
        return None
    if not backend.is_cuda(device):  # SyncBatchNorm is CUDA only in both frameworks (PyTorch fails at forward)
        return (f"--sync-bn does not work on CPU under {backend.BACKEND} {backend.VERSION} (its SyncBatchNorm is "
                "CUDA only); drop --sync-bn or train on GPUs.")
    return None


def check_single_process(launch, ctx, device):
    """Several GPUs without a launcher: named ones are refused with a pointer to DDP, merely visible ones noted."""
    if ctx.distributed:
        return
    n_ids = len(device_ids(launch.device))
    if n_ids == 0 and backend.is_cuda(device) and backend.cuda_device_count() > 1:
        n = backend.cuda_device_count()
        LOGGER.warning(f"WARNING ⚠️ {n} GPUs are visible but this single process trains on {device} only; for all "
                       f"of them launch DDP: {_launch_hint(n)}.")
    if n_ids > 1:
        raise LaunchError(f"--device {launch.device} names {n_ids} GPUs but this is a single process: launch DDP "
                          f"with {_launch_hint(n_ids)}.")


def check_sync_bn(launch, ctx, device):
    if not launch.sync_bn:
        return
    if not ctx.distributed:
        LOGGER.warning("WARNING ⚠️ --sync-bn only applies to DDP training (several processes); ignored here.")
    err = sync_bn_error(launch.sync_bn, ctx, device)
    if err:
        raise LaunchError(err)


def check_batch_and_flags(launch, ctx):
    """--batch-size is the total over all ranks; AutoBatch, --evolve and --image-weights need a single process."""
    if launch.batch_size < 1 and launch.batch_size != -1:
        raise LaunchError(f"--batch-size {launch.batch_size} is not a batch size: give a positive number, or -1 for "
                          "AutoBatch.")
    if not ctx.distributed:
        return
    if launch.batch_size == -1:
        raise LaunchError("AutoBatch with --batch-size -1 is not compatible with DDP training, please pass a valid "
                          "--batch-size")
    if launch.batch_size % ctx.world_size:
        raise LaunchError(f"--batch-size {launch.batch_size} must be a multiple of WORLD_SIZE {ctx.world_size}")
    if launch.evolve:
        raise LaunchError("--evolve is not compatible with DDP training")
    if launch.image_weights:  # each rank trains on a fixed share; weighting the whole set breaks it
        raise LaunchError("--image-weights is not compatible with DDP training")


def rank_gpu(spec, local_rank, follows_local_rank):
    """The GPU index for a DDP rank: the local_rank-th id of --device (2,3 -> cuda:2, cuda:3), or cuda:<local rank>
    when --device names none. follows_local_rank: the framework needs rank i on cuda:<local rank i>, so ids that
    say otherwise are refused with the CUDA_VISIBLE_DEVICES way to get the same GPUs."""
    ids = device_ids(spec)
    if ids and local_rank >= len(ids):
        raise LaunchError(f"--device {spec} names {len(ids)} GPUs but LOCAL_RANK is {local_rank}: give as many GPUs "
                          "as --nproc_per_node.")
    gpu = ids[local_rank] if ids else local_rank
    if follows_local_rank and gpu != local_rank:
        raise LaunchError(f"{BACKEND_NAMES[backend.BACKEND]} DDP puts local rank {local_rank} on cuda:{local_rank}; "
                          f"to train on GPUs {spec} use CUDA_VISIBLE_DEVICES={spec} with --device "
                          f"{','.join(map(str, range(len(ids))))}.")
    return gpu


def training_device(launch, ctx):
    """The device this process trains on, after the launch checks of launch (LaunchOptions). A DDP rank on CUDA gets
    its own GPU, made the process's current one."""
    try:
        device = backend.select_device(launch.device, batch_size=launch.batch_size)
    except ValueError as e:
        raise LaunchError(str(e)) from e
    check_single_process(launch, ctx, device)
    check_sync_bn(launch, ctx, device)
    check_batch_and_flags(launch, ctx)
    if ctx.distributed and backend.is_cuda(device):
        gpu = rank_gpu(launch.device, ctx.local_rank, backend.ddp_gpu_follows_local_rank())
        device = backend.device(f"cuda:{gpu}")
        backend.set_cuda_device(gpu)
    return device
