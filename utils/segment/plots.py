"""Batch mosaics with masks (train_batch*.jpg of segment/train.py, val_batch*_{labels,pred}.jpg of segment/val.py and
the trainer's validation): each instance's mask tinted in its class colour onto the picture (60 % colour, as
official), then the boxes drawn by utils.plots.plot_images.

Also ultralytics' import path for users' `from utils.segment.plots import plot_images_and_masks,
plot_results_with_masks` (library code imports this module for plot_images_and_masks itself):

    utils/plots.py   plot_results (here plot_results_with_masks: a segment/train.py results.csv's 16 panels)
"""
import cv2
import numpy as np

from utils.plots import colors, images_as_drawn, plot_images, plot_results


def tint_masks(images, targets, masks, overlap, alpha=0.6, conf_thres=0.25):
    """images (B, 3, H, W) uint8; targets (n, 6) [img, cls, xywh] labels or (n, 7) predictions with conf last;
    masks (B, h, w) overlap images (pixel value k + 1 = the image's k-th target) or (n, h, w) one 0/1 mask per
    target row. Predictions at conf_thres or under are not tinted (plot_images draws no box for them either).
    Returns tinted copies of the images."""
    images = np.array(images, dtype=np.uint8, copy=True)  # (at most 16: images_as_drawn's first ones)
    if masks is None or not len(targets):
        return images
    masks = np.asarray(masks)
    h, w = images.shape[2:]
    for i in range(min(images.shape[0], masks.shape[0] if overlap else images.shape[0])):
        rows = np.flatnonzero(targets[:, 0] == i)
        for k, row in enumerate(rows):
            if targets.shape[1] > 6 and targets[row, 6] <= conf_thres:
                continue
            m = (masks[i] == k + 1) if overlap else masks[row] > 0
            if not m.any():
                continue
            m = cv2.resize(m.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)
            colour = np.array(colors(int(targets[row, 1])), dtype=np.float32).reshape(3, 1)
            im = images[i].reshape(3, -1).astype(np.float32)
            sel = m.reshape(-1)
            im[:, sel] = im[:, sel] * (1 - alpha) + colour * alpha
            images[i] = im.reshape(3, h, w).astype(np.uint8)
    return images


def _host(x):
    if x is None or isinstance(x, np.ndarray):
        return x
    from utils.backend import to_numpy  # framework choice: a plot process forked before it draws numpy only
    return to_numpy(x)


def plot_images_and_masks(images, targets, paths=None, fname=None, masks=None, names=None, overlap=None):
    """plot_images with the instances' masks tinted in: Task.plot_batch of segmentation (masks: the batch's, in
    the loader's layout, overlap or one per target), into fname (default images.jpg).

    The official call, plot_images_and_masks(images, targets, masks, paths, fname, names) from a copied
    segment/train.py or val.py, works too: its third argument is an array (paths never are), and then overlap
    images are told apart as official tells them, by a pixel value over 1."""
    if hasattr(paths, "shape"):  # the official order: masks third, then the paths and the file name
        masks, paths, fname = paths, fname, masks
    masks, targets = _host(masks), _host(targets)
    if overlap is None:
        overlap = masks is not None and masks.size > 0 and masks.max() > 1
    images = images_as_drawn(images)
    return plot_images(tint_masks(images, np.asarray(targets), masks, overlap), targets, paths,
                       "images.jpg" if fname is None else fname, names)


def plot_results_with_masks(file="path/to/results.csv", dir="", best=True):
    """results.png beside a segment/train.py results.csv (or in dir): the 16 loss and metric panels, a red star on
    the best epoch (best=False: the last one). Returns the panel titles."""
    return plot_results(file, dir, best)
