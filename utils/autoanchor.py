"""AutoAnchor: check that the model's anchors fit the dataset's boxes (best possible recall) and, when they do not,
compute new ones by k-means on the label widths/heights followed by a genetic refinement, as ultralytics does.

The maths is in numpy (label statistics are small and live on the host); only the final write into the Detect
layer's anchor buffer touches the framework.
"""
import random

import numpy as np

from utils.backend import from_numpy, no_grad, to_numpy
from utils.general import LOGGER, colorstr

PREFIX = colorstr("AutoAnchor: ")


def check_anchor_order(m):
    """Anchors must grow with the stride (P3 smallest); flip the levels when they run the other way."""
    a = to_numpy(m.anchors).prod(-1).mean(-1).reshape(-1)  # mean anchor area per level
    da = a[-1] - a[0]
    ds = float(to_numpy(m.stride)[-1] - to_numpy(m.stride)[0])
    if da and np.sign(da) != np.sign(ds):
        LOGGER.info(f"{PREFIX}Reversing anchor order")
        with no_grad():
            m.anchors.copy_(from_numpy(to_numpy(m.anchors)[::-1].copy()).to(m.anchors.device))


def _metric(k, wh, thr):
    """x: (n_boxes, n_anchors) ratio metric, best: per-box best anchor ratio (1 is a perfect fit)."""
    r = wh[:, None] / k[None]
    x = np.minimum(r, 1 / r).min(2)
    return x, x.max(1)


def _label_wh(dataset, imgsz, jitter=False):
    """Label widths/heights in pixels at the training size (longest side = imgsz)."""
    shapes = imgsz * dataset.shapes / dataset.shapes.max(1, keepdims=True)
    if jitter:  # +-10% scale, as the official check does, so the result does not hinge on one exact size
        shapes = shapes * np.random.uniform(0.9, 1.1, size=(shapes.shape[0], 1))
    parts = [np.asarray(l)[:, 3:5] * s for s, l in zip(shapes, dataset.labels) if len(l)]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 2), np.float32)


def check_anchors(dataset, model, thr=4.0, imgsz=640):
    """Log the best possible recall (BPR) of the current anchors; below 0.98, replace them by kmean_anchors when
    those score better. Returns (bpr, anchors_replaced)."""
    m = model.module.model[-1] if hasattr(model, "module") else model.model[-1]  # Detect
    wh = _label_wh(dataset, imgsz, jitter=True)
    stride = to_numpy(m.stride).reshape(-1, 1, 1)
    anchors = to_numpy(m.anchors) * stride  # pixels
    if not len(wh):
        LOGGER.warning(f"{PREFIX}WARNING: no labels, anchors left as they are")
        return 0.0, False

    def bpr_aat(k):
        x, best = _metric(k, wh, thr)
        return float((best > 1 / thr).mean()), float((x > 1 / thr).sum(1).mean())

    bpr, aat = bpr_aat(anchors.reshape(-1, 2))
    s = f"\n{PREFIX}{aat:.2f} anchors/target, {bpr:.3f} Best Possible Recall (BPR). "
    if bpr > 0.98:
        LOGGER.info(f"{s}Current anchors are a good fit to dataset ✅")
        return bpr, False
    LOGGER.info(f"{s}Anchors are a poor fit to dataset ⚠️, attempting to improve...")
    na = anchors.size // 2
    new = kmean_anchors(dataset, n=na, img_size=imgsz, thr=thr, gen=1000, verbose=False)
    new_bpr = bpr_aat(new)[0]
    if new_bpr > bpr:
        with no_grad():
            t = from_numpy((new.reshape(anchors.shape) / stride).astype(np.float32)).to(m.anchors.device)
            m.anchors.copy_(t.to(m.anchors.dtype))
        check_anchor_order(m)
        LOGGER.info(f"{PREFIX}Done ✅ (optional: update model *.yaml to use these anchors in the future)")
        return new_bpr, True
    LOGGER.info(f"{PREFIX}Done ⚠️ (original anchors better than new anchors, proceeding with original anchors)")
    return bpr, False


def _kmeans(x, k, iters=30):
    """scipy.cluster.vq.kmeans when scipy is there, else Lloyd's algorithm with k-means++ seeding."""
    try:
        from scipy.cluster.vq import kmeans
        return kmeans(x, k, iter=iters)[0]
    except ImportError:
        pass
    rng = np.random
    centers = [x[rng.randint(len(x))]]
    for _ in range(1, k):
        d2 = np.min(((x[:, None] - np.array(centers)[None]) ** 2).sum(-1), 1)
        centers.append(x[rng.choice(len(x), p=d2 / d2.sum())] if d2.sum() > 0 else x[rng.randint(len(x))])
    c = np.array(centers, dtype=np.float64)
    for _ in range(iters * 10):
        assign = ((x[:, None] - c[None]) ** 2).sum(-1).argmin(1)
        new = np.array([x[assign == j].mean(0) if (assign == j).any() else c[j] for j in range(k)])
        if np.allclose(new, c):
            break
        c = new
    return c


def kmean_anchors(dataset, n=9, img_size=640, thr=4.0, gen=1000, verbose=True):
    """Anchors evolved for a dataset: k-means on whitened label wh, then `gen` generations of mutation keeping
    the fittest (fitness: mean best-anchor ratio over boxes that pass 1/thr). Returns (n, 2) float32 pixels,
    sorted small to large. `dataset` is a loaded dataset (with .shapes and .labels) or a dataset yaml path."""
    if isinstance(dataset, str):  # a data yaml: build the training set's label statistics
        from utils.dataloaders import LoadImagesAndLabels
        from utils.dataset_config import check_dataset
        data = check_dataset(dataset)
        dataset = LoadImagesAndLabels(data["train"], augment=True, rect=True)
    thr = 1 / thr
    wh0 = _label_wh(dataset, img_size)
    n_small = int((wh0 < 3.0).any(1).sum())
    if n_small:
        LOGGER.info(f"{PREFIX}WARNING ⚠️ Extremely small objects found: {n_small} of {len(wh0)} labels are <3 pixels")
    wh = wh0[(wh0 >= 2.0).any(1)].astype(np.float32)  # boxes of at least 2 px on a side

    def fitness(k):
        _, best = _metric(k, wh, 1 / thr)
        return float((best * (best > thr)).mean())

    def summary(k):
        k = k[np.argsort(k.prod(1))]
        x, best = _metric(k, wh0, 1 / thr)
        bpr, aat = (best > thr).mean(), (x > thr).mean() * n
        LOGGER.info(f"{PREFIX}thr={thr:.2f}: {bpr:.4f} best possible recall, {aat:.2f} anchors past thr\n"
                    f"{PREFIX}n={n}, img_size={img_size}, metric_all={x.mean():.3f}/{best.mean():.3f}-mean/best, "
                    f"past_thr={x[x > thr].mean() if (x > thr).any() else 0:.3f}-mean: "
                    + ", ".join(f"{round(a)},{round(b)}" for a, b in k))
        return k

    LOGGER.info(f"{PREFIX}Running kmeans for {n} anchors on {len(wh)} points...")
    try:
        assert n <= len(wh), "fewer boxes than anchors"
        s = wh.std(0)
        s[s == 0] = 1
        k = _kmeans(wh / s, n) * s
        assert len(k) == n, "k-means returned fewer centres than asked"
    except (AssertionError, ValueError) as e:
        LOGGER.warning(f"{PREFIX}WARNING ⚠️ k-means failed ({e}), switching to random init")
        k = np.sort(np.random.rand(n * 2)).reshape(n, 2) * img_size
    k = k.astype(np.float64)
    wh = wh.astype(np.float64)

    # Genetic refinement: mutate a random subset of anchor coordinates, keep the child when it is fitter.
    f, sh, mp, s = fitness(k), k.shape, 0.9, 0.1  # fitness, shape, mutation probability, sigma
    for _ in range(gen):
        v = np.ones(sh)
        while (v == 1).all():  # mutate until something changes
            v = ((np.random.random(sh) < mp) * random.random() * np.random.randn(*sh) * s + 1).clip(0.3, 3.0)
        kg = (k * v).clip(min=2.0)
        fg = fitness(kg)
        if fg > f:
            f, k = fg, kg.copy()
    if verbose:
        LOGGER.info(f"{PREFIX}Evolved anchors fitness {f:.4f}")
    return summary(k).astype(np.float32)
