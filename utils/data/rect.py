"""--rect batches: images sorted by aspect ratio go batch_size at a time, each batch letterboxed to one shape that
fits its most extreme image (validation pads less than with squares)."""
import numpy as np

from utils.data.files import ultralytics_rect_wh


def rect_order(shapes, orientations=None):
    """(order, aspect ratios h/w in that order) of images with shapes (n, 2) (w, h). The sort is stable: images of
    equal ratio keep file order, so the batches (and their padding, which moves mAP by up to 0.008 on coco128) are
    the same under numpy 1 (OneFlow) and numpy 2 (PyTorch), whose default quicksorts order such ties differently.
    The ratios are those ultralytics batches by (see ultralytics_rect_wh) so that the batches are the official
    ones for EXIF-rotated images too."""
    if orientations is not None:
        shapes = np.array([ultralytics_rect_wh(s, o) for s, o in zip(shapes, orientations)], float).reshape(-1, 2)
    ar = shapes[:, 1] / shapes[:, 0]
    order = ar.argsort(kind="stable")
    return order, ar[order]


def rect_batch_shapes(ar_sorted, batch_size, img_size, stride, pad):
    """Letterbox shape (h, w) of each --rect batch: images sorted by aspect ratio h/w go batch_size at a time, and
    each batch is shaped to fit its most extreme ratio, then rounded up to the stride with `pad` strides spare."""
    bi = np.arange(len(ar_sorted)) // batch_size
    shapes = []
    for b in range(bi[-1] + 1 if len(ar_sorted) else 0):
        ari = ar_sorted[bi == b]
        mini, maxi = ari.min(), ari.max()
        shapes.append([maxi, 1] if maxi < 1 else ([1, 1 / mini] if mini > 1 else [1, 1]))
    return np.ceil(np.array(shapes, dtype=float).reshape(-1, 2) * img_size / stride + pad).astype(int) * stride
