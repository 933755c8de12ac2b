"""ultralytics' import path for the mask helpers, kept for users' scripts copied from official segment/predict.py and
segment/val.py: `from utils.segment.general import process_mask, process_mask_native, scale_image, crop_mask`.
No library module imports this facade; the work is done once, in numpy, by:

    utils/segment/masks.py   crop_mask, process_mask, process_mask_native, scale_image, masks2segments,
                             scale_segments

The official functions take framework tensors and give a tensor back; these do too (the mask functions' result a
float tensor of 0/1 on the input's device, as the official `masks.gt_(0.5)` leaves it), and numpy arrays in give
numpy arrays out. scale_image takes and gives numpy, as official (a tensor is copied to the host first).
"""
import numpy as np

from utils.backend import from_numpy, to_numpy
from utils.segment import masks as _masks


def _host(x):
    """A numpy array of x (a framework tensor is copied to the host; the numpy code is the one implementation)."""
    return x if isinstance(x, np.ndarray) else to_numpy(x)


def _like(result, ref):
    """result (numpy) in the kind of ref: numpy for numpy, else a framework tensor on ref's device."""
    return result if isinstance(ref, np.ndarray) else from_numpy(result).to(ref.device)


def crop_mask(masks, boxes):
    """masks (n, h, w) zeroed outside boxes (n, 4) xyxy in mask pixels; masks' dtype kept."""
    return _like(_masks.crop_mask(_host(masks), _host(boxes)), masks)


def process_mask(protos, masks_in, bboxes, shape, upsample=False):
    """protos (c, mh, mw), masks_in (n, c) coefficients, bboxes (n, 4) xyxy in pixels of an input of size shape (h, w)
    -> (n, mh, mw) float 0/1 masks cropped to the boxes; with upsample, resized to (n, h, w) before the 0.5 cut."""
    m = _masks.process_mask(_host(protos), _host(masks_in), _host(bboxes), tuple(shape), upsample)
    return _like(m.astype(np.float32), protos)


def process_mask_native(protos, masks_in, bboxes, shape):
    """As process_mask, but the letterbox padding of the prototypes is cut off and the masks are resized to shape
    (h, w) before the boxes crop them: (n, h, w) float 0/1 masks."""
    m = _masks.process_mask_native(_host(protos), _host(masks_in), _host(bboxes), tuple(shape))
    return _like(m.astype(np.float32), protos)


def scale_image(im1_shape, masks, im0_shape, ratio_pad=None):
    """masks (h, w, n) or (h, w) on the letterboxed input of size im1_shape -> (h0, w0, n) numpy on the original
    image of shape im0_shape; the padding is cut off first (ratio_pad: the loader's (ratio, pad), else computed)."""
    masks = _host(masks)
    if masks.ndim < 2:  # the official check: a mask image or a stack of them
        raise ValueError(f'"len of masks shape" should be 2 or 3, but got {masks.ndim}')
    return _masks.scale_image(im1_shape, masks, im0_shape, ratio_pad)


def masks2segments(masks, strategy="largest"):
    """Binary masks (n, h, w) -> one (k, 2) float32 polygon each, in mask pixels ('largest' contour or 'concat')."""
    return _masks.masks2segments(_host(masks), strategy)


scale_segments = _masks.scale_segments  # numpy in and out, as official (utils.general.scale_segments there)

__all__ = ["crop_mask", "masks2segments", "process_mask", "process_mask_native", "scale_image", "scale_segments"]
