"""create_dataloader: the dataset, its sampler and the DataLoader, as ultralytics' function of that name builds them.

Official's loader names for users' code: InfiniteDataLoader (a DataLoader whose workers live across epochs, what
make_loader's persistent workers do), SmartDistributedSampler (utils/data/sampler.py) and PIN_MEMORY."""
import os

import cv2

from utils.backend import cuda_available, torch
from utils.data.collate import collate_fn, collate_quad
from utils.data.dataset import LoadImagesAndLabels
from utils.data.files import WARN
from utils.data.sampler import SeedWorker, YoloSampler
from utils.distributed import DistContext
from utils.log import LOGGER

# Whether this project's loaders pin batches: only with CUDA, where the trainer's non_blocking copy to the GPU
# overlaps the host (official: the PIN_MEMORY variable, default true; on a CPU-only machine pinning is only a copy)
PIN_MEMORY = cuda_available()


def create_dataloader(path, imgsz, batch_size, stride, single_cls=False, hyp=None, augment=False, cache=None, pad=0.0,
                      rect=False, rank=-1, workers=8, image_weights=False, quad=False, prefix="", shuffle=False, seed=0,
                      nc=None, min_items=0, dist=None):
    """Build (loader, dataset). Batches: (imgs uint8 (B,3,H,W) RGB, targets (n,6), paths, shapes).
    dist: the job's DistContext (this rank's share of the data). Without it, ultralytics' convention: rank -1 is a
    single process, any other rank a process of the launcher's job. With nc, a label class >= nc stops here with
    the label file and line."""
    if dist is None:
        dist = DistContext() if rank == -1 else DistContext.from_env()
    if rect and shuffle:
        LOGGER.warning(f"{prefix}{WARN} --rect is incompatible with DataLoader shuffle, setting shuffle=False")
        shuffle = False
    world, r = dist.world_size, dist.rank
    dataset = LoadImagesAndLabels(path, imgsz, batch_size, augment=augment, hyp=hyp, rect=rect,
                                  image_weights=image_weights, cache_images=cache, single_cls=single_cls,
                                  stride=int(stride), pad=pad, min_items=min_items, prefix=prefix,
                                  rank=r, world_size=world, seed=seed, shuffle=shuffle)
    if nc is not None:
        dataset.check_classes(nc)
    loader = make_loader(dataset, batch_size, workers=workers, shuffle=shuffle, seed=seed, rank=r, world_size=world,
                         quad=quad)
    return loader, dataset


def make_loader(dataset, batch_size, workers=8, shuffle=False, seed=0, rank=0, world_size=1, quad=False, collate=None):
    """The DataLoader over a built dataset: this rank's sampler, seeded persistent workers, the batch collate
    (collate: another task's, e.g. the segmentation batch with its masks)."""
    batch_size = min(batch_size, len(dataset))
    ncpu = os.cpu_count() or 1
    nw = min([ncpu // max(world_size, 1), batch_size if batch_size > 1 else 0, workers])
    sampler = YoloSampler(dataset, shuffle=shuffle, seed=seed, rank=rank, world_size=world_size,
                          batch_size=batch_size)
    kwargs = {}
    if nw > 0:
        # TRAP: OpenCV's thread pool does not survive fork(). A worker forked while the parent's pool exists hangs
        # in its first parallel cv2 call (seen: pthread_cond_destroy in setNumThreads). Switching the pool off here,
        # before the workers fork, is what ultralytics does at import; the workers are the parallelism anyway.
        cv2.setNumThreads(0)
        kwargs = dict(persistent_workers=True, worker_init_fn=SeedWorker(seed, rank), prefetch_factor=2)
    # Pinned batches let the trainer's non_blocking copy to the GPU overlap the host (official pins too); on a
    # CPU-only machine pinning is only a copy, so it is off there.
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=nw,
                                       pin_memory=PIN_MEMORY, drop_last=False,
                                       collate_fn=collate or (collate_quad if quad else collate_fn), **kwargs)


class InfiniteDataLoader(torch.utils.data.DataLoader):
    """Official's DataLoader that reuses its workers from epoch to epoch; same arguments as a DataLoader. Persistent
    workers do that (official wraps the batch sampler in one endless iterator instead): no fork per epoch."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("num_workers", 0) > 0:
            kwargs.setdefault("persistent_workers", True)
        super().__init__(*args, **kwargs)
