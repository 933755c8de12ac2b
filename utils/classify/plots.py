"""The trainer's pictures for classification: a grid of the first images of a batch, each captioned with its class
(the name of its folder), and after the last epoch with the predicted class too -- the counterparts of official
classify/train.py's train_images.jpg and test_images.jpg (25 images each). Written through
utils/atomic_files.write_image: whole or not at all."""
from pathlib import Path

import cv2
import numpy as np

from utils.atomic_files import write_image


def plot_classification_batch(images, labels, paths, fname, max_images=25, predictions=None, names=None):
    """images: (B, 3, H, W) uint8 RGB; labels: class indices; paths: the image files (their folder names the
    class), or None with names given. predictions: predicted class indices, captioned 'true-predicted' as official
    test_images.jpg. Writes fname (a JPEG)."""
    images = np.asarray(images)[:max_images]
    if not len(images):
        return
    n = len(images)
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    h, w = images.shape[2:]
    scale = max(1, 128 // max(h, w))  # small training sizes drawn large enough to read the caption
    th, tw = h * scale, w * scale
    canvas = np.full((rows * (th + 16), cols * tw, 3), 255, np.uint8)
    labels = np.asarray(labels).reshape(-1)
    for i, im in enumerate(images):
        r, c = divmod(i, cols)
        tile = cv2.resize(np.ascontiguousarray(im.transpose(1, 2, 0)[:, :, ::-1]), (tw, th),
                          interpolation=cv2.INTER_NEAREST)
        y0, x0 = r * (th + 16), c * tw
        canvas[y0 + 16:y0 + 16 + th, x0:x0 + tw] = tile
        name = _class_name(int(labels[i]), names) if paths is None or i >= len(paths) else Path(paths[i]).parent.name
        if predictions is not None:
            name += "-" + _class_name(int(predictions[i]), names)
        cv2.putText(canvas, name[:tw // 7], (x0 + 2, y0 + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 1,
                    cv2.LINE_AA)
    write_image(fname, canvas)


def _class_name(index, names):
    if isinstance(names, dict):
        return str(names.get(index, index))
    return str(names[index]) if names is not None and index < len(names) else str(index)
