"""Instance masks in numpy (the same on both backends): polygons -> mask images as the official loader makes them,
prototype masks -> per-detection masks, mask IoU, masks -> polygons for --save-txt.

Conventions follow ultralytics': a polygon is filled at the image size with its vertices truncated to int pixels,
then the mask image is resized (cv2 INTER_LINEAR) to 1/downsample_ratio; bilinear resizes of float masks use
cv2.INTER_LINEAR, which equals torch's interpolate(mode='bilinear', align_corners=False) on float32 input."""
import cv2
import numpy as np

_CV_MAX_CHANNELS = 128  # OpenCV 5 resizes at most 128 channels at once (older builds 512)


def polygon2mask(imgsz, polygons, color=1, downsample_ratio=1):
    """uint8 (h // r, w // r) mask with the polygons (each a flat or (k, 2) xy array in pixels) filled with color."""
    mask = np.zeros(imgsz, dtype=np.uint8)
    pts = np.asarray(polygons, dtype=np.int32).reshape(len(polygons), -1, 2)
    cv2.fillPoly(mask, pts, color=color)
    nh, nw = imgsz[0] // downsample_ratio, imgsz[1] // downsample_ratio
    return cv2.resize(mask, (nw, nh))  # filled at full size, then resized: the same masks at every ratio


def polygons2masks(imgsz, polygons, color=1, downsample_ratio=1):
    """One mask per polygon: (n, h // r, w // r) uint8."""
    h, w = imgsz[0] // downsample_ratio, imgsz[1] // downsample_ratio
    if not len(polygons):
        return np.zeros((0, h, w), np.uint8)
    return np.stack([polygon2mask(imgsz, [np.asarray(p).reshape(-1)], color, downsample_ratio) for p in polygons])


def polygons2masks_overlap(imgsz, segments, downsample_ratio=1):
    """One mask image per picture: pixel value i + 1 marks the i-th instance in order of decreasing area (smaller
    instances drawn over larger ones), 0 the background. Returns (mask, order), order sorting the instances."""
    h, w = imgsz[0] // downsample_ratio, imgsz[1] // downsample_ratio
    dtype = np.int32 if len(segments) > 255 else np.uint8
    out = np.zeros((h, w), dtype=dtype)
    if not len(segments):
        return out, np.zeros(0, dtype=np.int64)
    ms = polygons2masks(imgsz, segments, 1, downsample_ratio)
    # areas as unsigned sums, negated with wrap-around as ultralytics does (an empty mask sorts first), same sort
    order = np.argsort(-ms.reshape(len(ms), -1).sum(1))
    ms = ms.astype(dtype)
    for i, j in enumerate(order):
        np.maximum(out, ms[j] * dtype(i + 1), out=out)
    return out, order


def overlap_to_instances(mask, n):
    """An overlap mask image (h, w) -> (n, h, w) float32 0/1 masks, instance i where the pixel value is i + 1."""
    return (mask[None] == np.arange(1, n + 1, dtype=mask.dtype).reshape(n, 1, 1)).astype(np.float32)


def resize_masks(masks, hw):
    """(n, h, w) float masks -> (n, *hw), bilinear (cv2 INTER_LINEAR = torch bilinear, align_corners=False)."""
    if not len(masks):
        return np.zeros((0, *hw), np.float32)
    hwc = np.ascontiguousarray(masks.transpose(1, 2, 0), dtype=np.float32)
    parts = [cv2.resize(hwc[:, :, i:i + _CV_MAX_CHANNELS], (hw[1], hw[0]), interpolation=cv2.INTER_LINEAR)
             for i in range(0, hwc.shape[2], _CV_MAX_CHANNELS)]
    out = np.concatenate([p if p.ndim == 3 else p[:, :, None] for p in parts], 2)
    return out.transpose(2, 0, 1)


def crop_mask(masks, boxes):
    """Zero each mask (n, h, w) outside its box (n, 4) xyxy in mask pixels (a pixel column x is in when
    x1 <= x < x2)."""
    n, h, w = masks.shape
    x1, y1, x2, y2 = (boxes[:, k].reshape(n, 1, 1) for k in range(4))
    cols = np.arange(w, dtype=boxes.dtype).reshape(1, 1, w)
    rows = np.arange(h, dtype=boxes.dtype).reshape(1, h, 1)
    return masks * ((cols >= x1) & (cols < x2) & (rows >= y1) & (rows < y2))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def assemble_masks(protos, coefs):
    """Per-detection soft masks: sigmoid(coefs (n, c) @ protos (c, h, w)) -> (n, h, w) float32."""
    c, mh, mw = protos.shape
    return _sigmoid(coefs.astype(np.float32) @ protos.astype(np.float32).reshape(c, -1)).reshape(-1, mh, mw)


def process_mask(protos, coefs, boxes, shape, upsample=False):
    """Binary masks of detections: assembled at the prototype resolution, cropped to the boxes (given in pixels of
    the input of size shape (h, w)), optionally resized to shape. Returns (n, h', w') bool."""
    c, mh, mw = protos.shape
    masks = assemble_masks(protos, coefs)
    b = boxes.astype(np.float32).copy()
    b[:, [0, 2]] *= mw / shape[1]
    b[:, [1, 3]] *= mh / shape[0]
    masks = crop_mask(masks, b)
    if upsample:
        masks = resize_masks(masks, shape)
    return masks > 0.5


def process_mask_native(protos, coefs, boxes, shape):
    """Binary masks at the input size shape: the prototypes' letterbox padding cut off, resized, then cropped to
    the boxes (more exact than process_mask; what --save-json and --retina-masks use)."""
    c, mh, mw = protos.shape
    masks = assemble_masks(protos, coefs)
    gain = min(mh / shape[0], mw / shape[1])
    padw, padh = (mw - shape[1] * gain) / 2, (mh - shape[0] * gain) / 2
    top, left = int(padh), int(padw)
    bottom, right = int(mh - padh), int(mw - padw)
    masks = resize_masks(masks[:, top:bottom, left:right], shape)
    return crop_mask(masks, boxes.astype(np.float32)) > 0.5


def scale_image(im1_shape, masks, im0_shape, ratio_pad=None):
    """Masks (h, w, n) on the letterboxed input of size im1_shape -> (h0, w0, n) on the original image. uint8 masks
    are resized as uint8 (OpenCV's fixed-point rounding, as the official --save-json does), others as float32."""
    if ratio_pad is None:
        gain = min(im1_shape[0] / im0_shape[0], im1_shape[1] / im0_shape[1])
        pad = (im1_shape[1] - im0_shape[1] * gain) / 2, (im1_shape[0] - im0_shape[0] * gain) / 2
    else:
        pad = ratio_pad[1]
    top, left = int(pad[1]), int(pad[0])
    bottom, right = int(im1_shape[0] - pad[1]), int(im1_shape[1] - pad[0])
    masks = masks[top:bottom, left:right]
    if masks.ndim == 2:
        masks = masks[:, :, None]
    if masks.dtype == np.uint8:
        parts = [cv2.resize(np.ascontiguousarray(masks[:, :, i:i + _CV_MAX_CHANNELS]), (im0_shape[1], im0_shape[0]))
                 for i in range(0, masks.shape[2], _CV_MAX_CHANNELS)]
        return np.concatenate([p if p.ndim == 3 else p[:, :, None] for p in parts], 2)
    out = resize_masks(masks.transpose(2, 0, 1).astype(np.float32), (im0_shape[0], im0_shape[1]))
    return out.transpose(1, 2, 0)


def mask_iou(gt, pred, eps=1e-7):
    """IoU of each flattened 0/1 mask pair: gt (m, hw), pred (n, hw) -> (m, n)."""
    gt, pred = gt.astype(np.float32), pred.astype(np.float32)
    inter = np.clip(gt @ pred.T, 0, None)
    union = gt.sum(1)[:, None] + pred.sum(1)[None] - inter
    return inter / (union + eps)


def masks2segments(masks, strategy="largest"):
    """Each binary mask (n, h, w) -> one polygon (k, 2) float32 in mask pixels: the largest outer contour, or
    all contours joined ('concat'); an empty mask gives (0, 2)."""
    out = []
    for m in masks.astype(np.uint8):
        contours = cv2.findContours(m, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]
        if contours:
            if strategy == "concat":
                c = np.concatenate([x.reshape(-1, 2) for x in contours])
            else:
                c = np.array(contours[int(np.array([len(x) for x in contours]).argmax())]).reshape(-1, 2)
        else:
            c = np.zeros((0, 2))
        out.append(c.astype(np.float32))
    return out


def scale_segments(img1_shape, segments, img0_shape, ratio_pad=None, normalize=False):
    """A polygon (k, 2) in pixels of an input of size img1_shape -> pixels (or 0-1 with normalize) of the original
    image of size img0_shape, clipped to it (`segments`: ultralytics' name for the one polygon)."""
    s = np.asarray(segments, np.float32).copy()
    if ratio_pad is None:
        gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
        pad = (img1_shape[1] - img0_shape[1] * gain) / 2, (img1_shape[0] - img0_shape[0] * gain) / 2
    else:
        gain, pad = ratio_pad[0][0], ratio_pad[1]
    s[:, 0] -= pad[0]
    s[:, 1] -= pad[1]
    s /= gain
    s[:, 0] = s[:, 0].clip(0, img0_shape[1])
    s[:, 1] = s[:, 1].clip(0, img0_shape[0])
    if normalize:
        s[:, 0] /= img0_shape[1]
        s[:, 1] /= img0_shape[0]
    return s


def draw_masks(im, masks, colors, alpha=0.5):
    """Blend binary masks (n, h, w) at the image's size into the BGR image im in place, one colour (BGR) each; the
    first mask is drawn last (on top), as the official Annotator.masks orders them."""
    for m, c in reversed(list(zip(masks, colors))):
        sel = m.astype(bool)
        im[sel] = (im[sel] * (1 - alpha) + np.asarray(c, np.float32) * alpha).astype(np.uint8)
    return im
