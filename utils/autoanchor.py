"""AutoAnchor: check that the model's anchors fit the dataset's boxes (best possible recall) and, when they do not,
compute new ones by k-means on the label widths/heights followed by a genetic refinement, as ultralytics does.

The maths is in numpy (label statistics are small and live on the host); only the final write into the Detect
layer's anchor buffer touches the framework.
"""
import random
from collections import deque

import numpy as np

from utils.backend import from_numpy, no_grad, to_numpy
from utils.data.dataset import LoadImagesAndLabels
from utils.dataset_config import check_dataset
from utils.log import LOGGER, colorstr

PREFIX = colorstr("AutoAnchor: ")


def check_anchor_order(m):
    """Anchors must grow with the stride (P3 smallest); flip the levels when they run the other way."""
    a = to_numpy(m.anchors).prod(-1).mean(-1).reshape(-1)  # mean anchor area per level
    da = a[-1] - a[0]
    ds = float(to_numpy(m.stride)[-1] - to_numpy(m.stride)[0])
    if da and np.sign(da) != np.sign(ds):
        LOGGER.info(f"{PREFIX}Reversing anchor order")
        _write_anchors(m, to_numpy(m.anchors)[::-1].copy())


def _write_anchors(m, a):
    with no_grad():
        m.anchors.copy_(from_numpy(np.asarray(a, np.float32)).to(m.anchors.device).to(m.anchors.dtype))


def _metric(k, wh):
    """x: (n_boxes, n_anchors) ratio metric (1 is a perfect fit), best: each box's best anchor.
    Width and height ratios apart, then their minimum elementwise: the same values as a minimum over a stacked last
    axis of two, without numpy's slow reduction along so short an axis (the genetic search calls this 1000 times:
    0.09 s instead of 0.50 s of CPU for coco128's 927 boxes)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # placeholder anchors of size 0 just never fit
        rw = wh[:, 0, None] / k[None, :, 0]
        rh = wh[:, 1, None] / k[None, :, 1]
        x = np.minimum(np.minimum(rw, 1 / rw), np.minimum(rh, 1 / rh))
    return x, x.max(1)


def _label_wh(dataset, imgsz, jitter=False, warn=True):
    """Label widths/heights in pixels at the training size (longest side = imgsz), float64. Boxes of zero (or
    non-finite) width or height are left out with one warning: the dataset drops them when it reads the labels,
    and one that reaches here anyway would make the ratio metric 0/0 (a NaN fitness) and k-means a 0-pixel anchor."""
    shapes = imgsz * dataset.shapes / dataset.shapes.max(1, keepdims=True)
    if jitter:  # +-10% scale, as the official check does, so the result does not hinge on one exact size
        shapes = shapes * np.random.uniform(0.9, 1.1, size=(shapes.shape[0], 1))
    parts = [np.asarray(l)[:, 3:5] * s for s, l in zip(shapes, dataset.labels) if len(l)]
    wh = np.concatenate(parts) if parts else np.zeros((0, 2))
    usable = np.isfinite(wh).all(1) & (wh > 0).all(1)
    if warn and not usable.all():
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ {int((~usable).sum())} of {len(wh)} labels have zero or non-finite "
                       "width or height: left out of the anchor fit")
    return wh[usable]


def usable_anchors(k):
    """Whether anchors k (pixels) may be installed: every width and height finite and above zero."""
    k = np.asarray(k, np.float64)
    return k.size > 0 and bool(np.isfinite(k).all() and (k > 0).all())


def check_anchors(dataset, model, thr=4.0, imgsz=640):
    """Log the best possible recall (BPR: share of boxes with an anchor within a factor thr in width and height)
    of the current anchors; at or below 0.98, replace them by kmean_anchors when those score better.
    Returns (bpr, anchors_replaced)."""
    m = model.module.model[-1] if hasattr(model, "module") else model.model[-1]  # Detect
    wh = _label_wh(dataset, imgsz, jitter=True).astype(np.float32)
    stride = to_numpy(m.stride).reshape(-1, 1, 1)
    anchors = to_numpy(m.anchors) * stride  # pixels
    if not len(wh):
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ no labels, anchors left as they are")
        _warn_if_placeholders(anchors)
        return 0.0, False

    def bpr_aat(k):
        x, best = _metric(np.asarray(k, np.float32), wh)
        return float((best > 1 / thr).mean()), float((x > 1 / thr).sum(1).mean())

    bpr, aat = bpr_aat(anchors.reshape(-1, 2))
    s = f"\n{PREFIX}{aat:.2f} anchors/target, {bpr:.3f} Best Possible Recall (BPR). "
    if bpr > 0.98:
        LOGGER.info(f"{s}Current anchors are a good fit to dataset ✅")
        return bpr, False
    LOGGER.info(f"{s}Anchors are a poor fit to dataset ⚠️, attempting to improve...")
    if not (_label_wh(dataset, imgsz, warn=False) >= 2.0).any():  # kmean_anchors fits boxes of 2 px or more
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ no label is 2 pixels or more at --img {imgsz}: original anchors kept")
        _warn_if_placeholders(anchors)
        return bpr, False
    new = kmean_anchors(dataset, n=anchors.size // 2, img_size=imgsz, thr=thr, gen=1000, verbose=False)
    if not usable_anchors(new):  # never a NaN or 0-pixel anchor in the model: the loss would be NaN at step one
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ the new anchors are not all finite and above 0 pixels "
                       f"({np.round(new.reshape(-1), 1).tolist()}): original anchors kept")
        _warn_if_placeholders(anchors)
        return bpr, False
    new_bpr = bpr_aat(new)[0]
    if new_bpr > bpr:
        # levels are ordered in pixels: in grid units (divided by the stride) their areas need not grow
        _write_anchors(m, new.reshape(anchors.shape))
        check_anchor_order(m)
        _write_anchors(m, to_numpy(m.anchors) / stride)
        LOGGER.info(f"{PREFIX}Done ✅ (optional: update model *.yaml to use these anchors in the future)")
        return new_bpr, True
    LOGGER.info(f"{PREFIX}Done ⚠️ (original anchors better than new anchors, proceeding with original anchors)")
    _warn_if_placeholders(anchors)
    return bpr, False


def _warn_if_placeholders(anchors):
    """The model YAML's `anchors: N` placeholders are kept when no better ones were found: say so, they cannot
    train."""
    if not usable_anchors(anchors):
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ the model keeps anchors of 0 pixels (the YAML's 'anchors: N' "
                       "placeholders): training will not converge; give anchors in the model YAML or labels AutoAnchor "
                       "can fit")


def _kmeans(x, k, iters=30, thresh=1e-5):
    """scipy.cluster.vq.kmeans(x, k, iter=iters), as the official code calls it, in numpy: `iters` restarts from k
    observations drawn by numpy's global RandomState (the same draws), Lloyd iterations until the mean distance
    changes by at most `thresh`, the codebook of lowest mean distance kept; centres left without points are dropped.
    The arithmetic is scipy's (float32 distances, centres summed in observation order), so the codebooks are the
    same to the bit; importing scipy.cluster for it took 0.3 s of a training run's start."""
    best, best_dist = None, np.inf
    for _ in range(iters):
        book = x[np.random.choice(len(x), size=int(k), replace=False)]
        diff, dists = np.inf, deque([np.inf], maxlen=2)
        while diff > thresh:
            code, dist = _nearest(x, book)
            dists.append(np.mean(dist, axis=-1))
            book = _centres(x, code, len(book))
            diff = np.abs(dists[0] - dists[1])
        if dists[1] < best_dist:
            best, best_dist = book, dists[1]
    return best


def _nearest(x, book):
    """(index of the nearest centre, its distance) per observation: scipy's vq, in x's dtype."""
    d = x[:, None, :] - book[None, :, :]
    d2 = d[..., 0] * d[..., 0]
    for j in range(1, x.shape[1]):  # one feature at a time, in order, as scipy's loop adds them
        d2 += d[..., j] * d[..., j]
    code = d2.argmin(1)
    return code, np.sqrt(d2[np.arange(len(x)), code])


def _centres(x, code, n):
    """The mean of each centre's observations (summed one after another in x's dtype, as scipy's
    update_cluster_means); centres without observations are dropped."""
    out = []
    for j in range(n):
        members = x[code == j]
        if len(members):
            out.append(np.cumsum(members, axis=0, dtype=x.dtype)[-1] / x.dtype.type(len(members)))
    return np.array(out, dtype=x.dtype).reshape(-1, x.shape[1])


def kmean_anchors(dataset, n=9, img_size=640, thr=4.0, gen=1000, verbose=True):
    """Anchors evolved for a dataset: k-means on whitened label wh, then `gen` generations of a genetic search
    (mutation probability 0.9, sigma 0.1) that keeps a mutant when it is fitter; fitness is the mean over boxes of
    the best anchor's ratio metric, counting only boxes past 1/thr. Returns (n, 2) float32 pixels, sorted small to
    large. `dataset` is a loaded dataset (with .shapes and .labels) or a dataset yaml path.

    Randomness comes from numpy's global RandomState (k-means start, mutations) and Python's `random` (one scale
    per generation), in the official order and dtypes (metrics in float32), so after random.seed(s) and
    np.random.seed(s) the anchors equal the official ones for the same labels."""
    if isinstance(dataset, str):  # a data yaml: build the training set's label statistics
        data = check_dataset(dataset)
        dataset = LoadImagesAndLabels(data["train"], augment=True, rect=True)
    thr = 1 / thr
    wh0 = _label_wh(dataset, img_size, warn=verbose)  # check_anchors (verbose=False) has said it already
    n_small = int((wh0 < 3.0).any(1).sum())
    if n_small:
        LOGGER.warning(f"{PREFIX}Extremely small objects found: {n_small} of {len(wh0)} labels are <3 pixels in size")
    wh = wh0[(wh0 >= 2.0).any(1)].astype(np.float32)  # boxes of at least 2 px on a side
    wh0 = wh0.astype(np.float32)

    def fitness(k):
        _, best = _metric(k.astype(np.float32), wh)
        return (best * (best > thr)).mean(dtype=np.float32)

    def sort_and_report(k, show=True):
        return _sort_and_report(k, wh0, thr, n, img_size, show)

    LOGGER.info(f"{PREFIX}Running kmeans for {n} anchors on {len(wh)} points...")
    k = sort_and_report(_initial_anchors(wh, n, img_size), show=False)  # the evolution mutates the sorted anchors
    f, k = _evolve(k, fitness, gen, on_fitter=sort_and_report if verbose else None)
    LOGGER.info(f"{PREFIX}Evolving anchors with Genetic Algorithm: fitness = {f:.4f}")
    return sort_and_report(k).astype(np.float32)


def _sort_and_report(k, wh0, thr, n, img_size, show=True):
    """Anchors k sorted small to large; with show, their recall and metrics on every label logged (official line)."""
    k = k[np.argsort(k.prod(1))]  # small to large
    if show:
        x, best = _metric(k.astype(np.float32), wh0)
        bpr, aat = (best > thr).mean(dtype=np.float32), (x > thr).mean(dtype=np.float32) * n
        past = x[x > thr].mean(dtype=np.float32) if (x > thr).any() else float("nan")
        LOGGER.info(f"{PREFIX}thr={thr:.2f}: {bpr:.4f} best possible recall, {aat:.2f} anchors past thr\n"
                    f"{PREFIX}n={n}, img_size={img_size}, metric_all={x.mean(dtype=np.float32):.3f}/"
                    f"{best.mean(dtype=np.float32):.3f}-mean/best, past_thr={past:.3f}-mean: "
                    + ", ".join(f"{round(float(a))},{round(float(b))}" for a, b in k))
    return k


def _initial_anchors(wh, n, img_size):
    """n anchors by k-means on the whitened boxes wh; random ones where k-means cannot give n."""
    try:
        if n > len(wh):
            raise ValueError(f"{len(wh)} boxes for {n} anchors")
        s = wh.std(0)  # whitening: k-means distances in units of each axis' spread
        s[s == 0] = 1.0  # every box the same width (or height): nothing to whiten, and no 0/0
        k = _kmeans(wh / s, n) * s
        if len(k) != n:  # k-means drops centres that end up with no points
            raise ValueError(f"k-means returned {len(k)} of {n} centres")
    except Exception as e:
        LOGGER.warning(f"{PREFIX}switching strategies from kmeans to random init ({e})")
        k = np.sort(np.random.rand(n * 2)).reshape(n, 2) * img_size
    return k


def _evolve(k, fitness, gen, on_fitter=None):
    """(fitness, anchors) after gen generations of the genetic search: a mutant (probability 0.9, sigma 0.1, one
    random scale per generation) replaces k when it is fitter, and is then passed to on_fitter."""
    f, sh, mp, sigma = fitness(k), k.shape, 0.9, 0.1  # fitness, shape, mutation probability, sigma
    for _ in range(gen):
        v = np.ones(sh)
        while (v == 1).all():  # mutate until something changes
            v = ((np.random.random(sh) < mp) * random.random() * np.random.randn(*sh) * sigma + 1).clip(0.3, 3.0)
        kg = (k * v).clip(min=2.0)
        fg = fitness(kg)
        if fg > f:
            f, k = fg, kg.copy()
            if on_fitter is not None:
                on_fitter(k)
    return f, k
