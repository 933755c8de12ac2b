"""Turning a list of dataset items into a batch: (imgs uint8 (B,3,H,W) RGB, targets float32 (n,6)
[img_idx, cls, xywhn], paths, shapes) as framework tensors."""
import random

import cv2
import numpy as np

from utils.backend import from_numpy


def collate_fn(batch):
    """Each image is written once, straight into the batch buffer (cv2.split into the 3 planes)."""
    ims, labels, paths, shapes = zip(*batch)
    c, h, w = ims[0].shape
    out = np.empty((len(ims), c, h, w), np.uint8)
    for i, im in enumerate(ims):
        hwc = im.transpose(1, 2, 0)
        if hwc.flags.c_contiguous and c == 3:
            cv2.split(hwc, [out[i, 0], out[i, 1], out[i, 2]])
        else:
            out[i] = im
    for i, lb in enumerate(labels):
        lb[:, 0] = i  # target image index for build_targets()
    targets = np.concatenate(labels, 0) if labels else np.zeros((0, 6), np.float32)
    return from_numpy(out), from_numpy(targets), paths, shapes


def collate_quad(batch):
    """--quad: 4 images -> 1 of twice the size (a 2x2 tile, or one image upsampled), targets adjusted."""
    ims, labels, paths, shapes = zip(*batch)
    n = len(shapes) // 4
    im4, label4, path4, shapes4 = [], [], paths[:n], shapes[:n]
    ho = np.array([[0.0, 0, 0, 1, 0, 0]], np.float32)
    wo = np.array([[0.0, 0, 1, 0, 0, 0]], np.float32)
    s = np.array([[1, 1, 0.5, 0.5, 0.5, 0.5]], np.float32)
    for i in range(n):
        i4 = i * 4
        if random.random() < 0.5:
            im = ims[i4].transpose(1, 2, 0)
            im = cv2.resize(im, (im.shape[1] * 2, im.shape[0] * 2), interpolation=cv2.INTER_LINEAR)
            im = np.ascontiguousarray(im.transpose(2, 0, 1))
            lb = labels[i4]
        else:
            top = np.concatenate((ims[i4], ims[i4 + 1]), 2)
            bottom = np.concatenate((ims[i4 + 2], ims[i4 + 3]), 2)
            im = np.concatenate((top, bottom), 1)
            lb = np.concatenate((labels[i4], labels[i4 + 1] + ho, labels[i4 + 2] + wo, labels[i4 + 3] + ho + wo),
                                0) * s
        im4.append(im)
        label4.append(lb)
    for i, lb in enumerate(label4):
        lb[:, 0] = i
    out = np.stack(im4, 0)
    return from_numpy(out), from_numpy(np.concatenate(label4, 0)), path4, shapes4
