"""Detection metrics: box IoU, AP per class (COCO-style 101-point interpolation), confusion matrix, fitness, curves.

Everything after NMS runs in numpy: the statistics are small, and numpy behaves the same under both backends.
`bbox_iou` (the loss IoU with its fused OneFlow path) lives in utils/iou.py and is re-exported here because
ultralytics users import it from utils.metrics.

Plots stay within a memory bound whatever the number of classes (the project takes up to 10,000): a confusion matrix
of more than MATRIX_CELLS classes is drawn with classes grouped into MATRIX_CELLS ranges (the exact counts stay in
ConfusionMatrix.matrix; it pickles as its non-zero cells, so handing it to a plot helper copies no dense matrix),
and curve plots draw at most MAX_CURVES classes' curves beside the mean over all. Before, one 10,000-class matrix
took 12.7 GB to draw.
"""
import warnings
from pathlib import Path

import cv2
import numpy as np

from utils.atomic_files import save_figure
from utils.plot_jobs import inline
from utils.plots import pyplot


def __getattr__(name):
    """`from utils.metrics import bbox_iou`, as ultralytics users write it, without importing the framework with this
    module: the plot helpers unpickle the curve and confusion-matrix drawings from here, and forked before the
    framework's import (utils/plot_jobs.fork_early) they would otherwise import it too (1.6 s of CPU each)."""
    if name == "bbox_iou":
        from utils.iou import bbox_iou
        return bbox_iou
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_trapz = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed trapz
MATRIX_CELLS = 100  # classes per side drawn one cell each; above, cells are class ranges (about 100 per side)
MAX_CURVES = 100  # class curves drawn in a curve plot; above, an even sample of them beside the mean of all


def fitness(x):
    """Model fitness used to pick best.pt: 0.1 * mAP@0.5 + 0.9 * mAP@0.5:0.95 over rows of [P, R, mAP50, mAP50-95]."""
    w = np.array([0.0, 0.0, 0.1, 0.9])
    return (np.asarray(x)[..., :4] * w).sum(-1)


def _as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    from utils.backend import to_numpy  # framework choice: numpy in, numpy out, no framework loaded
    return to_numpy(x)


def box_iou(box1, box2, eps=1e-7):
    """Pairwise IoU of xyxy boxes: (N,4) x (M,4) -> (N,M). Numpy in, numpy out; tensors in, tensor out."""
    if not isinstance(box1, np.ndarray) or not isinstance(box2, np.ndarray):
        from utils.backend import torch  # framework choice: only tensor input needs it
        a1, a2, b1, b2 = box1[:, None, :2], box1[:, None, 2:4], box2[None, :, :2], box2[None, :, 2:4]
        inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(min=0).prod(2)
        area1 = (box1[:, 2] - box1[:, 0]) * (box1[:, 3] - box1[:, 1])
        area2 = (box2[:, 2] - box2[:, 0]) * (box2[:, 3] - box2[:, 1])
        return inter / (area1[:, None] + area2[None, :] - inter + eps)
    a1, a2, b1, b2 = box1[:, None, :2], box1[:, None, 2:4], box2[None, :, :2], box2[None, :, 2:4]
    inter = np.clip(np.minimum(a2, b2) - np.maximum(a1, b1), 0, None).prod(2)
    area1 = (box1[:, 2] - box1[:, 0]) * (box1[:, 3] - box1[:, 1])
    area2 = (box2[:, 2] - box2[:, 0]) * (box2[:, 3] - box2[:, 1])
    return inter / (area1[:, None] + area2[None, :] - inter + eps)


def match_predictions(detections, labels, iouv):
    """Which detections are true positives at each IoU threshold (val.py's process_batch).

    detections (N,6) [xyxy, conf, cls], labels (M,5) [cls, xyxy], iouv (T,) thresholds -> bool (N,T).
    At every threshold each label is matched to at most one detection and vice versa, highest IoU first."""
    detections, labels, iouv = _as_numpy(detections), _as_numpy(labels), np.asarray(_as_numpy(iouv))
    correct = np.zeros((detections.shape[0], iouv.shape[0]), dtype=bool)
    if not len(detections) or not len(labels):
        return correct
    iou = box_iou(labels[:, 1:5].astype(np.float32), detections[:, :4].astype(np.float32))
    return match_by_iou(iou, labels[:, 0], detections[:, 5], iouv)


def match_by_iou(iou, label_cls, det_cls, iouv):
    """match_predictions for a given (M, N) IoU matrix of labels x detections (boxes, or masks in segmentation)."""
    iou, iouv = np.asarray(iou), np.asarray(iouv)
    correct = np.zeros((iou.shape[1], iouv.shape[0]), dtype=bool)
    if not iou.size:
        return correct
    iou = iou * (np.asarray(label_cls).reshape(-1, 1) == np.asarray(det_cls).reshape(1, -1))  # wrong class: no match
    for k, thr in enumerate(iouv):
        li, di = np.nonzero(iou >= thr)
        if not li.size:
            continue
        matches = np.stack((li, di, iou[li, di]), 1)
        if li.size > 1:
            matches = matches[matches[:, 2].argsort()[::-1]]
            matches = matches[np.unique(matches[:, 1], return_index=True)[1]]  # one label per detection
            matches = matches[np.unique(matches[:, 0], return_index=True)[1]]  # one detection per label
        correct[matches[:, 1].astype(int), k] = True
    return correct


def process_batch(detections, labels, iouv, pred_masks=None, gt_masks=None, overlap=False, masks=False):
    """Official val.py's and segment/val.py's name for match_predictions: detections (N,6) [xyxy, conf, cls], labels
    (M,5) [cls, xyxy], iouv (T,) -> the (N, T) bool tensor of true positives, on iouv's device. masks: match by the
    IoU of gt_masks (M,H,W; with overlap one (1,H,W) mask holding label i+1) and pred_masks (N,h,w) instead, the
    ground truth resized bilinearly to the predictions' size when it differs."""
    from utils.backend import torch  # framework choice: the answer is a tensor, as official
    det, lab = _as_numpy(detections), _as_numpy(labels)
    if masks:
        iou = _mask_iou(_as_numpy(gt_masks), _as_numpy(pred_masks), len(lab), overlap)
    else:
        iou = box_iou(lab[:, 1:5].astype(np.float32), det[:, :4].astype(np.float32))
    correct = match_by_iou(iou.reshape(len(lab), len(det)), lab[:, 0], det[:, 5], _as_numpy(iouv))
    return torch.tensor(correct, dtype=torch.bool, device=getattr(iouv, "device", "cpu"))


def _mask_iou(gt, pred, nl, overlap):
    """(nl, N) IoU of ground-truth and predicted 0/1 masks, as official process_batch(masks=True) computes it."""
    gt = gt.astype(np.float32)
    if overlap:  # one mask whose value i+1 marks label i
        gt = (gt.reshape(-1, *gt.shape[-2:])[:1] == np.arange(1, nl + 1).reshape(-1, 1, 1)).astype(np.float32)
    h, w = pred.shape[1:]
    if gt.shape[1:] != (h, w):  # cv2's INTER_LINEAR samples as bilinear interpolate(align_corners=False)
        gt = np.stack([cv2.resize(m, (w, h), interpolation=cv2.INTER_LINEAR) for m in gt]).reshape(-1, h, w) > 0.5
    gt, pred = gt.reshape(len(gt), -1).astype(np.float32), pred.reshape(len(pred), -1).astype(np.float32)
    inter = gt @ pred.T
    return inter / (gt.sum(1)[:, None] + pred.sum(1)[None] - inter + 1e-7)


def smooth(y, f=0.05):
    """Box filter of width about 2*f*len(y), edges padded with the end values."""
    nf = round(len(y) * f * 2) // 2 + 1  # odd number of taps
    p = np.ones(nf // 2)
    yp = np.concatenate((p * y[0], y, p * y[-1]), 0)
    return np.convolve(yp, np.ones(nf) / nf, mode="valid")


def compute_ap(recall, precision):
    """AP of one PR curve: precision envelope (monotone from the right), integrated at 101 recall points (COCO).
    Returns (ap, envelope precision, recall) with sentinels added at both ends."""
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([1.0], precision, [0.0]))
    mpre = np.flip(np.maximum.accumulate(np.flip(mpre)))
    x = np.linspace(0, 1, 101)
    ap = _trapz(np.interp(x, mrec, mpre), x)
    return ap, mpre, mrec


def ap_per_class(tp, conf, pred_cls, target_cls, plot=False, save_dir=".", names=(), eps=1e-16, prefix="",
                 draw=None):
    """AP, and P/R/F1 at the confidence with the best mean F1, for each class that has labels.
    plot: the PR/F1/P/R curves into save_dir, each made by draw(what, fn, *args) (utils.plot_jobs; default: here).

    tp (N,T) bool per detection and IoU threshold, conf (N,), pred_cls (N,), target_cls (M,) classes of all labels.
    Returns tp, fp, p, r, f1 (each (nc,)), ap (nc,T), unique classes (nc,) int - nc counts classes with labels."""
    tp, conf, pred_cls, target_cls = (np.asarray(a) for a in (tp, conf, pred_cls, target_cls))
    tp = tp.reshape(len(conf), -1) if tp.ndim < 2 else tp
    i = np.argsort(-conf)
    tp, conf, pred_cls = tp[i], conf[i], pred_cls[i]
    unique_classes, nt = np.unique(target_cls, return_counts=True)
    nc = unique_classes.shape[0]
    px, py = np.linspace(0, 1, 1000), []  # confidence grid for P/R/F1 curves
    ap, p, r = np.zeros((nc, tp.shape[1])), np.zeros((nc, 1000)), np.zeros((nc, 1000))
    for ci, c in enumerate(unique_classes):
        i = pred_cls == c
        n_l, n_p = nt[ci], i.sum()
        if n_p == 0 or n_l == 0:
            continue
        fpc = (1 - tp[i]).cumsum(0)
        tpc = tp[i].cumsum(0)
        recall = tpc / (n_l + eps)
        precision = tpc / (tpc + fpc)
        # conf decreases along the detections; np.interp needs increasing x, hence the negations
        r[ci] = np.interp(-px, -conf[i], recall[:, 0], left=0)
        p[ci] = np.interp(-px, -conf[i], precision[:, 0], left=1)
        for j in range(tp.shape[1]):
            ap[ci, j], mpre, mrec = compute_ap(recall[:, j], precision[:, j])
            if plot and j == 0:
                py.append(np.interp(px, mrec, mpre))  # precision at mAP@0.5
    f1 = 2 * p * r / (p + r + eps)
    if plot:
        names = names if isinstance(names, dict) else dict(enumerate(names))
        names = dict(enumerate([v for k, v in names.items() if k in unique_classes]))
        save_dir = Path(save_dir)
        draw = draw or inline
        draw("PR_curve.png", plot_pr_curve, px, py, ap, save_dir / f"{prefix}PR_curve.png", names)
        for y, label, name in ((f1, "F1", "F1"), (p, "Precision", "P"), (r, "Recall", "R")):
            draw(f"{name}_curve.png", plot_mc_curve, px, y, save_dir / f"{prefix}{name}_curve.png", names, ylabel=label)
    i = smooth(f1.mean(0), 0.1).argmax() if nc else 0  # confidence with the best (smoothed) mean F1
    p, r, f1 = p[:, i], r[:, i], f1[:, i]
    tp = (r * nt).round()
    fp = (tp / (p + eps) - tp).round()
    return tp, fp, p, r, f1, ap, unique_classes.astype(int)


class ConfusionMatrix:
    """(nc+1) x (nc+1) counts, rows = predicted class, columns = true class; index nc is background.

    The counts are kept as their non-zero cells: a dense 10,000-class matrix is 800 MB, and with transparent huge
    pages the background column alone (one cell per row) makes all of it resident. `matrix` gives the dense array
    the official class has (made when first asked for, and used from then on, so that code writing into it keeps
    working); tp_fp() and plot() never need it."""

    def __init__(self, nc, conf=0.25, iou_thres=0.45):
        self.nc, self.conf, self.iou_thres = nc, conf, iou_thres
        self._cells = {}  # (predicted, true) -> count
        self._dense = None

    @property
    def matrix(self):
        if self._dense is None:
            rows, cols, counts = self._coo()
            dense = np.zeros((self.nc + 1, self.nc + 1))
            dense[rows, cols] = counts
            self._dense, self._cells = dense, {}
        return self._dense

    @matrix.setter
    def matrix(self, value):
        self._dense, self._cells = np.asarray(value, dtype=np.float64), {}

    def _add(self, predicted, true):
        if self._dense is not None:
            self._dense[predicted, true] += 1
        else:
            key = (int(predicted), int(true))
            self._cells[key] = self._cells.get(key, 0) + 1

    def _coo(self):
        """(rows, cols, counts) of the non-zero cells."""
        if self._dense is not None:
            rows, cols = np.nonzero(self._dense)
            return rows, cols, self._dense[rows, cols]
        if not self._cells:
            return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
        keys = np.array(list(self._cells), dtype=np.int64).reshape(-1, 2)
        return keys[:, 0], keys[:, 1], np.array(list(self._cells.values()), dtype=np.float64)

    def process_batch(self, detections, labels):
        """detections (N,6) [xyxy, conf, cls] or None; labels (M,5) [cls, xyxy] (or (M,) classes with None)."""
        if detections is None:
            for gc in _as_numpy(labels).astype(int).reshape(-1):
                self._add(self.nc, gc)  # missed: background predicted
            return
        detections, labels = _as_numpy(detections), _as_numpy(labels)
        detections = detections[detections[:, 4] > self.conf]
        gt_classes = labels[:, 0].astype(int)
        detection_classes = detections[:, 5].astype(int)
        iou = box_iou(labels[:, 1:5], detections[:, :4])
        li, di = np.nonzero(iou > self.iou_thres)
        matches = np.stack((li, di, iou[li, di]), 1) if li.size else np.zeros((0, 3))
        if li.size > 1:
            matches = matches[matches[:, 2].argsort()[::-1]]
            matches = matches[np.unique(matches[:, 1], return_index=True)[1]]
            matches = matches[matches[:, 2].argsort()[::-1]]
            matches = matches[np.unique(matches[:, 0], return_index=True)[1]]
        n = matches.shape[0] > 0
        m0, m1 = matches[:, 0].astype(int), matches[:, 1].astype(int)
        for i, gc in enumerate(gt_classes):
            j = m0 == i
            if n and j.sum() == 1:
                self._add(detection_classes[m1[j]][0], gc)  # matched (right or wrong class)
            else:
                self._add(self.nc, gc)  # missed
        if n:
            for i, dc in enumerate(detection_classes):
                if not (m1 == i).any():
                    self._add(dc, self.nc)  # false alarm on background

    def __getstate__(self):
        """Pickled as its non-zero cells (handed to a plot helper: no dense matrix is copied)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_cells", "_dense")}
        state["_coo"] = self._coo()
        return state

    def __setstate__(self, state):
        rows, cols, counts = state.pop("_coo")
        self.__dict__.update(state)
        self._dense = None
        self._cells = {(int(r), int(c)): float(n) for r, c, n in zip(rows, cols, counts)}

    def tp_fp(self):
        rows, cols, counts = self._coo()
        tp = np.bincount(rows[rows == cols], counts[rows == cols], minlength=self.nc + 1)
        fp = np.bincount(rows, counts, minlength=self.nc + 1) - tp
        return tp[:-1], fp[:-1]

    def plot(self, normalize=True, save_dir="", names=()):
        plt = pyplot()
        nc, nn = self.nc, len(names)
        array, edges = _matrix_for_plot(self._coo(), nc, normalize)
        array[array < 0.005] = np.nan  # hide near-zero cells
        cells = array.shape[0] - 1  # drawn cells per side, background apart
        grouped = cells < nc
        ticklabels = (list(names) + ["background"]) if 0 < nn < 99 and nn == nc and not grouped else None
        fig, ax = plt.subplots(1, 1, figsize=(12, 9), tight_layout=True)
        im = ax.imshow(array, cmap="Blues", vmin=0.0)
        fig.colorbar(im, ax=ax)
        if nc < 30:
            for (yi, xi), v in np.ndenumerate(array):
                if not np.isnan(v):
                    ax.text(xi, yi, f"{v:.2f}", ha="center", va="center", fontsize=8 if nc < 10 else 5)
        if ticklabels:
            ax.set_xticks(range(nc + 1), ticklabels, rotation=90, fontsize=8 if nc < 50 else 5)
            ax.set_yticks(range(nc + 1), ticklabels, fontsize=8 if nc < 50 else 5)
        elif grouped:  # cell k holds classes edges[k]..edges[k+1]-1: label a few cells with their first class
            ticks = list(range(0, cells, max(1, cells // 10)))
            ax.set_xticks(ticks + [cells], [str(edges[k]) for k in ticks] + ["bg"], fontsize=6)
            ax.set_yticks(ticks + [cells], [str(edges[k]) for k in ticks] + ["bg"], fontsize=6)
        ax.set_xlabel("True" + (f" (classes in groups of {edges[1] - edges[0]})" if grouped else ""))
        ax.set_ylabel("Predicted")
        ax.set_title("Confusion Matrix")
        save_figure(fig, Path(save_dir) / "confusion_matrix.png", dpi=250)
        plt.close(fig)

    def print(self):
        for i in range(self.nc + 1):
            print(" ".join(map(str, self.matrix[i])))


def _matrix_for_plot(coo, nc, normalize, cells=MATRIX_CELLS):
    """The array drawn for the non-zero cells coo = (rows, cols, counts) of an (nc+1)^2 matrix (row/column nc:
    background), and the first class of each drawn cell. Up to `cells` classes: the matrix itself (normalized per
    true class). Above: classes in consecutive ranges of equal width, each drawn cell the share of the labels of its
    true classes predicted as its predicted classes (a drawn column still sums to 1 when normalized). Its size is
    that of the drawing (at most cells + 1 per side), never that of the matrix."""
    rows, cols, counts = coo
    col_sums = np.bincount(cols, counts, minlength=nc + 1)
    values = counts / (col_sums[cols] + 1e-9) if normalize else counts
    width = max(1, -(-nc // cells))  # classes per drawn cell
    groups = -(-nc // width)
    group_of = lambda i: np.where(i == nc, groups, i // width)  # noqa: E731 (background: the last cell)
    out = np.zeros((groups + 1, groups + 1))
    np.add.at(out, (group_of(rows), group_of(cols)), values)
    if normalize and width > 1:
        widths = np.append(np.minimum(width, nc - np.arange(groups) * width), 1)  # classes in each drawn column
        out /= widths.reshape(1, -1)
    return out, np.arange(groups) * width


def _curves_shown(n, limit=MAX_CURVES):
    """Indices of the class curves drawn: all up to limit, else an even sample of limit of them."""
    return np.arange(n) if n <= limit else np.linspace(0, n - 1, limit).round().astype(int)


# ----------------------------------------------------------------------------------------------------------------
# Curves
def plot_pr_curve(px, py, ap, save_dir=Path("pr_curve.png"), names=()):
    plt = pyplot()
    fig, ax = plt.subplots(1, 1, figsize=(9, 6), tight_layout=True)
    py = np.stack(py, axis=1) if len(py) else np.zeros((len(px), 0))
    if 0 < len(names) < 21:  # a legend per class only when it stays readable
        for i, y in enumerate(py.T):
            ax.plot(px, y, linewidth=1, label=f"{names[i]} {ap[i, 0]:.3f}")
    elif py.shape[1]:
        ax.plot(px, py[:, _curves_shown(py.shape[1])], linewidth=1, color="grey")  # the mean below is of all
    if py.shape[1]:
        ax.plot(px, py.mean(1), linewidth=3, color="blue", label=f"all classes {ap[:, 0].mean():.3f} mAP@0.5")
    ax.set_xlabel("Recall")
    ax.set_ylabel("Precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(bbox_to_anchor=(1.04, 1), loc="upper left")
    ax.set_title("Precision-Recall Curve")
    save_figure(fig, save_dir, dpi=250)
    plt.close(fig)


def plot_mc_curve(px, py, save_dir=Path("mc_curve.png"), names=(), xlabel="Confidence", ylabel="Metric"):
    plt = pyplot()
    fig, ax = plt.subplots(1, 1, figsize=(9, 6), tight_layout=True)
    if 0 < len(names) < 21:
        for i, y in enumerate(py):
            ax.plot(px, y, linewidth=1, label=f"{names[i]}")
    elif len(py):
        ax.plot(px, py[_curves_shown(len(py))].T, linewidth=1, color="grey")  # the mean below is of all
    if len(py):
        y = smooth(py.mean(0), 0.05)
        ax.plot(px, y, linewidth=3, color="blue", label=f"all classes {y.max():.2f} at {px[y.argmax()]:.3f}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(bbox_to_anchor=(1.04, 1), loc="upper left")
    ax.set_title(f"{ylabel}-Confidence Curve")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_figure(fig, save_dir, dpi=250)
    plt.close(fig)
