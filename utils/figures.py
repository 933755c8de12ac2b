"""matplotlib for the project's figures, and the official figure functions its own runs do not draw.

pyplot() is the one place the Agg backend is chosen (files only, never a window): it imports matplotlib on first use,
so processes that never draw never load it. utils/plots.py re-exports everything here under the official import path
(`from utils.plots import plot_val_study, imshow_cls, hist2d`). No framework is imported (the plot helpers of
utils/plot_jobs.py are forked before it and import this module): a tensor handed in is converted by utils.backend,
already loaded by whoever made the tensor. Figures are written through utils/atomic_files.save_figure.
"""
import math
from pathlib import Path

import numpy as np

from utils.atomic_files import save_figure
from utils.augmentations import denormalize
from utils.log import LOGGER


def pyplot():
    """matplotlib.pyplot with the Agg backend. The plotting backend must be chosen before pyplot loads, so matplotlib
    is imported here, on first use."""
    import matplotlib  # plotting-backend choice: Agg before pyplot loads
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # plotting-backend choice: after matplotlib.use
    return plt


def _numpy(x):
    if isinstance(x, (np.ndarray, list, tuple)):
        return np.asarray(x)
    from utils.backend import to_numpy  # framework choice: only a tensor gets here, its framework loaded already
    return to_numpy(x.float() if hasattr(x, "float") else x)


def hist2d(x, y, n=100):
    """For each point (x[i], y[i]), the log of how many points share its cell of an (n-1) x (n-1) grid spanning the
    data (official's colouring of dense scatter plots)."""
    x, y = np.asarray(x), np.asarray(y)
    xedges, yedges = np.linspace(x.min(), x.max(), n), np.linspace(y.min(), y.max(), n)
    counts = np.histogram2d(x, y, (xedges, yedges))[0]
    xi = np.clip(np.digitize(x, xedges) - 1, 0, counts.shape[0] - 1)  # the last edge belongs to the last cell
    yi = np.clip(np.digitize(y, yedges) - 1, 0, counts.shape[1] - 1)
    return np.log(counts[xi, yi])


STUDY_COLUMNS = (3, 8)  # of a study_*.txt row (P, R, mAP50, mAP50-95, 3 val losses, 3 times in ms): mAP, inference


def plot_val_study(file="", dir="", x=None):
    """The study_*.txt files `val.py --task study` writes (one row per image size: P R mAP50 mAP50-95, the val
    losses, pre-process / inference / NMS ms per image) -> study.png beside them: each file's mAP50-95 (%) against
    inference time, from the second size (the first one's time includes the warm-up) up to its best mAP.
    file: one of the files (its folder is read), else dir. x: the image sizes (unused in the figure, as official).
    Returns study.png's path, or None when the folder holds no study file."""
    save_dir = Path(file).parent if file else Path(dir)
    files = sorted(save_dir.glob("study*.txt"))
    if not files:
        LOGGER.warning(f"plot_val_study: no study*.txt in {save_dir.resolve()}, nothing to plot")
        return None
    plt = pyplot()
    fig, ax = plt.subplots(1, 1, figsize=(8, 4), tight_layout=True)
    for f in files:
        try:
            y = np.loadtxt(f, dtype=np.float32, ndmin=2)[:, list(STUDY_COLUMNS)].T
        except (ValueError, IndexError) as e:
            plt.close(fig)
            raise ValueError(f"{f}: not a val.py --task study file ({e})") from None
        start, stop = min(1, y.shape[1] - 1), int(y[0].argmax()) + 1
        ax.plot(y[1, start:stop], y[0, start:stop] * 100, ".-", linewidth=2, markersize=8,
                label=f.stem.replace("study_coco_", "").replace("yolo", "YOLO"))
    ax.grid(alpha=0.2)
    ax.set_xlabel("GPU Speed (ms/img)")
    ax.set_ylabel("COCO AP val")
    ax.legend(loc="lower right")
    out = save_dir / "study.png"
    LOGGER.info(f"Saving {out}...")
    try:
        save_figure(fig, out, dpi=300)
    finally:
        plt.close(fig)
    return out


def imshow_cls(im, labels=None, pred=None, names=None, nmax=25, verbose=False, f=Path("images.jpg")):
    """A grid of up to nmax images of a normalised (B, 3, H, W) classification batch, each titled with its class
    name (and '—' the predicted one with pred), written to f. names: list or dict (default class0, class1, ...)."""
    x = denormalize(np.array(_numpy(im), dtype=np.float32))  # a copy: the caller's batch stays normalised
    names = names or [f"class{i}" for i in range(1000)]
    labels = None if labels is None else [int(v) for v in _numpy(labels).reshape(-1)]
    pred = None if pred is None else [int(v) for v in _numpy(pred).reshape(-1)]
    n = min(len(x), nmax)
    cols = max(1, min(8, round(n ** 0.5)))
    plt = pyplot()
    fig, ax = plt.subplots(max(1, math.ceil(n / cols)), cols)
    ax = np.atleast_1d(ax).ravel()
    for i, a in enumerate(ax):
        a.axis("off")
        if i >= n:
            continue
        a.imshow(x[i].transpose(1, 2, 0).clip(0.0, 1.0))
        if labels is not None:
            a.set_title(names[labels[i]] + (f"—{names[pred[i]]}" if pred is not None else ""), fontsize=8,
                        verticalalignment="top")
    try:
        save_figure(fig, f, dpi=300, bbox_inches="tight")
    finally:
        plt.close(fig)
    if verbose:
        LOGGER.info(f"Saving {f}")
        if labels is not None:
            LOGGER.info("True:     " + " ".join(f"{names[i]:3s}" for i in labels[:nmax]))
        if pred is not None:
            LOGGER.info("Predicted:" + " ".join(f"{names[i]:3s}" for i in pred[:nmax]))
    return f
