"""Class and image weights from the training labels: the loss's class_weights attribute and --image-weights."""
import random

import numpy as np


def labels_to_class_weights(labels, nc=80):
    """Inverse class frequency weights (normalised to sum 1) from a list of (n, 5) label arrays."""
    if not len(labels) or labels[0] is None:
        return np.ones(nc) / nc
    lab = np.concatenate([np.asarray(l).reshape(-1, 5) for l in labels], 0)
    classes = lab[:, 0].astype(int)
    weights = np.bincount(classes, minlength=nc).astype(np.float64)
    weights[weights == 0] = 1  # absent classes: weight as if seen once
    weights = 1 / weights
    return weights / weights.sum()


def labels_to_image_weights(labels, nc=80, class_weights=np.ones(80)):
    """Per-image sampling weight: sum of its labels' class weights (--image-weights)."""
    counts = np.array([np.bincount(np.asarray(l)[:, 0].astype(int), minlength=nc) for l in labels])
    return (class_weights.reshape(1, nc) * counts).sum(1)


def resample_by_image_weights(dataset, nc, maps):
    """--image-weights: the epoch's image indices drawn with replacement, favouring images of classes with a low
    validation mAP (maps, per class) and rare classes."""
    cw = labels_to_class_weights(dataset.labels, nc) * nc * (1 - maps) ** 2 / nc
    iw = labels_to_image_weights(dataset.labels, nc=nc, class_weights=cw)
    dataset.indices = random.choices(range(len(dataset.labels)), weights=iw, k=len(iw))
