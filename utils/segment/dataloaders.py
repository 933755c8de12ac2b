"""ultralytics' import path for the segmentation data pipeline, kept for users' scripts copied from official
segment/train.py and segment/val.py: `from utils.segment.dataloaders import create_dataloader,
LoadImagesAndLabelsAndMasks`. No library module imports this facade; the pipeline is:

    utils/segment/dataset.py   LoadImagesAndSegments (here LoadImagesAndLabelsAndMasks: the official argument order
                               and rank convention), create_seg_dataloader (here create_dataloader: the official
                               argument order), collate_with_masks (the class's collate_fn)

Batches are the official ones: (imgs uint8 (B, 3, H, W), targets (n, 6), paths, shapes, masks), masks uint8
(B, h, w) overlap images with overlap_mask, else (n, h, w) one per target. Dataset items are numpy arrays, which the
collate turns into framework tensors. --quad is refused in one line (official's fails inside its collate).
"""
from utils.distributed import DistContext
from utils.segment.dataset import LoadImagesAndSegments, create_seg_dataloader


class LoadImagesAndLabelsAndMasks(LoadImagesAndSegments):
    """The polygon dataset with the official constructor: rank -1 is one process, another rank a process of a
    launcher's job (the world size read from the environment). world_size and shuffle (this rank's share of the
    data, as create_dataloader passes them) may be given by keyword instead."""

    def __init__(self, path, img_size=640, batch_size=16, augment=False, hyp=None, rect=False, image_weights=False,
                 cache_images=False, single_cls=False, stride=32, pad=0, min_items=0, prefix="", downsample_ratio=1,
                 overlap=False, rank=-1, seed=0, *, world_size=None, shuffle=True):
        if world_size is None:  # the official call: our ranks count from 0 with the world size beside them
            dist = DistContext() if rank == -1 else DistContext.from_env()
            rank, world_size = dist.rank, dist.world_size
        super().__init__(path, img_size, batch_size, augment, hyp, rect, image_weights, cache_images,
                         single_cls, stride, pad, min_items, prefix, rank=rank, world_size=world_size, seed=seed,
                         shuffle=shuffle, downsample_ratio=downsample_ratio, overlap=overlap)


def create_dataloader(path, imgsz, batch_size, stride, single_cls=False, hyp=None, augment=False, cache=False, pad=0.0,
                      rect=False, rank=-1, workers=8, image_weights=False, quad=False, prefix="", shuffle=False,
                      mask_downsample_ratio=1, overlap_mask=False, seed=0):
    """(loader, LoadImagesAndLabelsAndMasks) for a data path, in the official argument order."""
    return create_seg_dataloader(path, imgsz, batch_size, stride, single_cls=single_cls, hyp=hyp, augment=augment,
                                 cache=cache, pad=pad, rect=rect, workers=workers, prefix=prefix,
                                 shuffle=shuffle, seed=seed, overlap_mask=overlap_mask,
                                 mask_downsample_ratio=mask_downsample_ratio, rank=rank, image_weights=image_weights,
                                 quad=quad, dataset_class=LoadImagesAndLabelsAndMasks)


__all__ = ["LoadImagesAndLabelsAndMasks", "create_dataloader"]
