"""Test-time augmentation (val.py/detect.py --augment), the official YOLOv5 recipe: the image at scales 1, 0.83
and 0.67, the middle one also flipped left-right; predictions are mapped back to the input frame and the
redundant tails (the smallest-object level of the down-scaled pass, the largest-object level of the full-size
pass) are dropped before the three sets are concatenated for NMS."""
import math

from utils.backend import F, torch

SCALES = (1, 0.83, 0.67)
FLIPS = (None, 3, None)  # dims to flip: 2 = up-down, 3 = left-right


def scale_img(img, ratio=1.0, same_shape=False, gs=32):
    """Resize a (B,3,H,W) batch by ratio and pad it (value 0.447, the official grey) to a multiple of gs."""
    if ratio == 1.0:
        return img
    h, w = img.shape[2:]
    s = (int(h * ratio), int(w * ratio))
    img = F.interpolate(img, size=s, mode="bilinear", align_corners=False)
    if not same_shape:
        h, w = (math.ceil(x * ratio / gs) * gs for x in (h, w))
    return F.pad(img, [0, w - s[1], 0, h - s[0]], value=0.447)


def descale_pred(p, flip, scale, img_size):
    """Decoded predictions (B,N,no) of an augmented pass -> coordinates of the original input."""
    x, y, wh = p[..., 0:1] / scale, p[..., 1:2] / scale, p[..., 2:4] / scale
    if flip == 2:
        y = img_size[0] - y
    elif flip == 3:
        x = img_size[1] - x
    return torch.cat((x, y, wh, p[..., 4:]), -1)


def clip_augmented(y, nl):
    """Drop the coarsest level (largest objects) of the full-size pass and the finest level (smallest objects) of
    the smallest pass. Level k has 4**(nl-1-k) times the coarsest level's anchors, so N = u * sum(4**k)."""
    g = sum(4 ** x for x in range(nl))
    u = y[0].shape[1] // g  # anchors of the coarsest level of the first pass
    y[0] = y[0][:, :-u]
    u = y[-1].shape[1] // g
    y[-1] = y[-1][:, u * 4 ** (nl - 1):]
    return y


def forward_augment(model, x):
    """model(x, augment=True): returns (cat of the three descaled prediction sets, None)."""
    img_size = x.shape[-2:]
    gs = int(model.stride.max())
    y = []
    for si, fi in zip(SCALES, FLIPS):
        xi = scale_img(x.flip(fi) if fi else x, si, gs=gs)
        yi = model._forward_once(xi)[0]
        y.append(descale_pred(yi, fi, si, img_size))
    return torch.cat(clip_augmented(y, model.model[-1].nl), 1), None
