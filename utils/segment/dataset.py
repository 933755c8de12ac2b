"""The polygon-label dataset: the detection dataset (labels checked and cached with their segments, rect batches,
image caches) plus one mask target per item, as ultralytics' segmentation loader makes it.

Items are (im CHW RGB uint8, labels (n, 6) [0, cls, xywhn], path, shapes, masks) where masks is uint8
(1, h/r, w/r) with overlap (pixel value i + 1 = instance i; the labels reordered by decreasing mask area) or
(n, h/r, w/r) 0/1 masks, one per instance, with overlap=False (--no-overlap); r = downsample_ratio (--mask-ratio).
"""
import random

import numpy as np

from utils.augmentations import augment_hsv, copy_paste, letterbox, random_perspective
from utils.backend import from_numpy
from utils.data.collate import collate_fn as detection_collate
from utils.data.dataset import LoadImagesAndLabels
from utils.data.loader import make_loader
from utils.distributed import DistContext
from utils.errors import UserError
from utils.boxes import xyn2xy, xywhn2xyxy, xyxy2xywhn
from utils.log import LOGGER
from utils.segment.masks import polygons2masks, polygons2masks_overlap


class SegmentOptionError(UserError, ValueError):
    pass


class LoadImagesAndSegments(LoadImagesAndLabels):
    collate_fn = None  # set below: batches carry masks
    def __init__(self, path, img_size=640, batch_size=16, augment=False, hyp=None, rect=False, image_weights=False,
                 cache_images=False, single_cls=False, stride=32, pad=0.0, min_items=0, prefix="", rank=0,
                 world_size=1, seed=0, shuffle=True, downsample_ratio=1, overlap=False):
        super().__init__(path, img_size, batch_size, augment, hyp, rect, image_weights, cache_images, single_cls,
                         stride, pad, min_items, prefix, rank, world_size, seed, shuffle)
        self.downsample_ratio = int(downsample_ratio)
        self.overlap = bool(overlap)
        self.no_segments = sum(1 for lb, s in zip(self.labels, self.segments) if len(lb) and len(s) != len(lb))
        if self.no_segments:
            LOGGER.warning(f"{prefix}WARNING ⚠️ {self.no_segments} label files hold boxes, not polygons: their "
                           "instances get box-shaped masks")

    def __getitem__(self, index):
        hyp = self.hyp
        if self.mosaic and random.random() < hyp.get("mosaic", 0.0):
            im, labels, segments = self.load_mosaic_segments(index)
            shapes = None
            if random.random() < hyp.get("mixup", 0.0):
                im2, labels2, segments2 = self.load_mosaic_segments(random.choice(self.indices))
                r = np.random.beta(32.0, 32.0)  # ultralytics' mixup ratio
                im = (im * r + im2 * (1 - r)).astype(np.uint8)
                labels, segments = np.concatenate((labels, labels2), 0), list(segments) + list(segments2)
        else:
            im, labels, segments, shapes = self.load_letterboxed_segments(index)
        labels = np.asarray(labels, dtype=np.float32).reshape(-1, 5)
        nl = len(labels)
        hr, wr = im.shape[0] // self.downsample_ratio, im.shape[1] // self.downsample_ratio
        if nl:
            labels[:, 1:5] = xyxy2xywhn(labels[:, 1:5], w=im.shape[1], h=im.shape[0], clip=True, eps=1e-3)
            if self.overlap:
                masks, order = polygons2masks_overlap(im.shape[:2], segments, self.downsample_ratio)
                masks, labels = masks[None], labels[order]
            else:
                masks = polygons2masks(im.shape[:2], segments, 1, self.downsample_ratio)
        else:
            masks = np.zeros((1 if self.overlap else 0, hr, wr), np.uint8)
        if self.augment:
            im = augment_hsv(im, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"])
            if random.random() < hyp["flipud"]:
                im = np.flipud(im)
                if nl:
                    labels[:, 2] = 1 - labels[:, 2]
                    masks = np.flip(masks, 1)
            if random.random() < hyp["fliplr"]:
                im = np.fliplr(im)
                if nl:
                    labels[:, 1] = 1 - labels[:, 1]
                    masks = np.flip(masks, 2)
        labels_out = np.zeros((nl, 6), np.float32)
        labels_out[:, 1:] = labels
        rgb = im[:, :, ::-1].transpose(2, 0, 1)
        return np.ascontiguousarray(rgb), labels_out, self.im_files[index], shapes, np.ascontiguousarray(masks)

    def load_letterboxed_segments(self, index):
        """One image letterboxed (rect shape or img_size), randomly warped when augmenting: (im BGR, labels (n, 5)
        [cls, xyxy pixels], polygons in pixels, shapes)."""
        hyp = self.hyp
        im, (h0, w0), (h, w) = self.load_image(index)
        shape = self.batch_shapes[self.batch[index]] if self.rect else self.img_size
        im, ratio, pad = letterbox(im, shape, auto=False, scaleup=self.augment)
        shapes = (h0, w0), ((h / h0, w / w0), pad)
        labels = self.labels[index].copy()
        segments = [xyn2xy(s, ratio[0] * w, ratio[1] * h, padw=pad[0], padh=pad[1]) for s in self.segments[index]]
        if len(labels) and len(segments) != len(labels):  # box labels: their rectangles stand in for polygons
            segments = [_box_polygon(b, ratio[0] * w, ratio[1] * h, pad) for b in labels[:, 1:5]]
        if labels.size:
            labels[:, 1:] = xywhn2xyxy(labels[:, 1:], ratio[0] * w, ratio[1] * h, padw=pad[0], padh=pad[1])
        if self.augment:
            im, labels, segments = random_perspective(im, labels, segments, degrees=hyp["degrees"],
                                                      translate=hyp["translate"], scale=hyp["scale"],
                                                      shear=hyp["shear"], perspective=hyp["perspective"],
                                                      return_segments=True)
        return im, labels, segments, shapes

    def load_mosaic_segments(self, index):
        """ultralytics' 4-image mosaic on the 2s canvas, copy-paste, then random_perspective, carrying the polygons:
        (im s x s BGR, labels (n, 5) [cls, xyxy pixels], polygons in pixels)."""
        hyp, s = self.hyp, self.img_size
        yc, xc = (int(random.uniform(-x, 2 * s + x)) for x in self.mosaic_border)
        indices = [index] + random.choices(self.indices, k=3)
        random.shuffle(indices)
        layout = self._mosaic_layout(indices, s, xc, yc)
        labels4, segments4 = self._mosaic_labels(layout)
        if len(labels4) and len(segments4) != len(labels4):  # box labels somewhere: outlines stand in for polygons
            segments4 = [b[[0, 1, 2, 1, 2, 3, 0, 3]].reshape(4, 2).astype(np.float32) for b in labels4[:, 1:5]]
        img4 = np.full((s * 2, s * 2, 3), 114, dtype=np.uint8)
        for i, _, (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b) in layout:
            img4[y1a:y2a, x1a:x2a] = self.load_image(i)[0][y1b:y2b, x1b:x2b]
        img4, labels4, segments4 = copy_paste(img4, labels4, segments4, p=hyp.get("copy_paste", 0.0))
        return random_perspective(img4, labels4, segments4, degrees=hyp["degrees"], translate=hyp["translate"],
                                  scale=hyp["scale"], shear=hyp["shear"], perspective=hyp["perspective"],
                                  border=self.mosaic_border, return_segments=True)


def _box_polygon(xywhn, w, h, pad):
    x, y, bw, bh = xywhn
    x1, y1, x2, y2 = (x - bw / 2) * w + pad[0], (y - bh / 2) * h + pad[1], (x + bw / 2) * w + pad[0], \
        (y + bh / 2) * h + pad[1]
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


def collate_with_masks(batch):
    """The detection batch plus masks, concatenated in target order: (B, h, w) overlap masks or (n, h, w)
    per-instance masks."""
    ims, labels, paths, shapes, masks = zip(*batch)
    im, targets, paths, shapes = detection_collate(list(zip(ims, labels, paths, shapes)))
    return im, targets, paths, shapes, from_numpy(np.ascontiguousarray(np.concatenate(masks, 0)))


def create_seg_dataloader(path, imgsz, batch_size, stride, single_cls=False, hyp=None, augment=False, cache=None,
                          pad=0.0, rect=False, workers=8, prefix="", shuffle=False, seed=0, nc=None,
                          overlap_mask=False, mask_downsample_ratio=1, dist=None, rank=-1, image_weights=False,
                          quad=False, dataset_class=None):
    """(loader, dataset) of the polygon dataset; batches (imgs uint8, targets, paths, shapes, masks). The arguments
    of utils.data.loader.create_dataloader (Task.build_dataloader's), plus the mask layout (overlap_mask) and the
    mask downsample ratio (--mask-ratio). dataset_class: a LoadImagesAndSegments subclass to build (the official
    import path's LoadImagesAndLabelsAndMasks, utils/segment/dataloaders.py), called with these keywords."""
    if quad:
        raise SegmentOptionError("--quad is not available for segmentation (official segment/train.py --quad fails: "
                                 "detection's quad collate cannot take the masks); train without --quad.")
    if dist is None:
        dist = DistContext() if rank == -1 else DistContext.from_env()
    if rect and shuffle:
        LOGGER.warning(f"{prefix}WARNING ⚠️ --rect is incompatible with DataLoader shuffle, setting shuffle=False")
        shuffle = False
    dataset = (dataset_class or LoadImagesAndSegments)(
        path, imgsz, batch_size, augment=augment, hyp=hyp, rect=rect, image_weights=image_weights, cache_images=cache,
        single_cls=single_cls, stride=int(stride), pad=pad, prefix=prefix, rank=dist.rank, world_size=dist.world_size,
        seed=seed, shuffle=shuffle, downsample_ratio=mask_downsample_ratio, overlap=overlap_mask)
    if nc is not None:
        dataset.check_classes(nc)
    loader = make_loader(dataset, batch_size, workers=workers, shuffle=shuffle, seed=seed, rank=dist.rank,
                         world_size=dist.world_size, collate=collate_with_masks)
    return loader, dataset


LoadImagesAndSegments.collate_fn = staticmethod(collate_with_masks)
