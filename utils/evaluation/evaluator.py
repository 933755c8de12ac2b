"""DetectionEvaluator: YOLOv5's validation figures from NMS outputs, fed one batch at a time.

    evaluator = DetectionEvaluator(nc=80, names=model.names)
    for im, targets, paths, shapes in loader:
        preds = non_max_suppression(model(im)[0], 0.001, 0.6, multi_label=True)
        evaluator.update(preds, targets, shapes, im.shape[2:], paths)
    metrics = evaluator.compute()                  # prints the table; metrics.mp, .mr, .map50, .map50_95, .maps()

Boxes are matched in original image pixels at the IoU thresholds iouv (0.5:0.95 by 0.05): each label with at most
one prediction of its class, highest IoU first (utils.metrics.match_predictions). AP is COCO's 101-point
interpolation; P and R are read at the confidence where the smoothed mean F1 over classes peaks (ap_per_class).
With plots, compute() also draws the PR/F1/P/R curves and the confusion matrix into save_dir.
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from utils.evaluation.matching import labels_in_pixels, match_image
from utils.inference.label_txt import RunLabelFiles
from utils.log import LOGGER
from utils.metrics import ConfusionMatrix, ap_per_class
from utils.plot_jobs import inline
from utils.plots import images_as_drawn, output_to_target, plot_images

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)  # mAP@0.5:0.95
TABLE_HEADER = ("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95")
_ROW = "%22s" + "%11i" * 2 + "%11.3g" * 4


def _numpy(x):
    if isinstance(x, np.ndarray):
        return x
    from utils.backend import to_numpy  # framework choice: numpy-only callers load none
    return to_numpy(x)


@dataclass
class DetectionMetrics:
    """What compute() returns. Per-class arrays cover the classes that have labels (ap_class), in class order."""
    nc: int
    seen: int = 0  # images
    mp: float = 0.0  # mean precision
    mr: float = 0.0  # mean recall
    map50: float = 0.0
    map50_95: float = 0.0
    nt: np.ndarray = None  # (nc,) labels per class
    ap_class: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    p: np.ndarray = field(default_factory=lambda: np.zeros(0))
    r: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ap50: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ap: np.ndarray = field(default_factory=lambda: np.zeros(0))  # mAP50-95 of each class in ap_class

    def maps(self):
        """(nc,) mAP50-95 per class; a class without labels gets the overall mAP50-95 (what train.py weighs by)."""
        maps = np.zeros(self.nc) + self.map50_95
        for i, c in enumerate(self.ap_class):
            maps[c] = self.ap[i]
        return maps

    def results(self, losses=()):
        """(P, R, mAP50, mAP50-95, *losses): the first value val.run returns."""
        return (self.mp, self.mr, self.map50, self.map50_95, *losses)


class DetectionEvaluator:
    """Accumulates a validation pass and computes P, R, mAP50, mAP50-95 overall and per class.

    nc, names: class count and {id: name}; iouv: IoU thresholds; single_cls: every prediction counts as class 0;
    plots: confusion matrix, curves and the first batches' images into save_dir; verbose: per-class rows in the
    printed table; task: the split named in the no-labels warning; save_txt/save_conf: labels/<image>.txt per image,
    each written whole (utils.inference.label_txt.RunLabelFiles); coco: a CocoPredictions collecting --save-json entries, or None."""

    table_header = TABLE_HEADER  # the table's first line: the validation progress bar's text

    def __init__(self, nc, names, iouv=IOU_THRESHOLDS, single_cls=False, plots=False, save_dir=Path(""),
                 verbose=False, task="val", save_txt=False, save_conf=False, coco=None):
        self.nc, self.names, self.iouv = int(nc), dict(names), np.asarray(iouv)
        self.single_cls, self.plots, self.save_dir = single_cls, plots, Path(save_dir)
        self.verbose, self.task = verbose, task
        self.save_txt, self.save_conf, self.coco = save_txt, save_conf, coco
        self.label_files = RunLabelFiles(self.save_dir / "labels")  # written only with save_txt
        self.confusion_matrix = ConfusionMatrix(nc=self.nc)
        self.stats = []  # per image: (correct (n, T) bool, conf (n,), predicted class (n,), label classes (m,))
        self.seen = 0
        self.table = []  # compute()'s table: header, `all` row, per-class rows (printed or not)
        self.draw = inline  # draw(what, fn, *args, **kwargs) makes a plot file; run_validation hands a PlotJobs.submit

    def update(self, preds, targets, shapes, input_hw, paths=None):
        """One batch. preds: per image (n, 6) [xyxy, conf, cls] (NMS output, tensor or numpy) in pixels of the
        letterboxed input; targets: (m, 6) [image index, cls, x, y, w, h] normalized to the input (the loader's);
        shapes: per image (original (h, w), ((gain_h, gain_w), (pad_w, pad_h))) as the loader gives them;
        input_hw: the batch's (height, width); paths: the image files (needed with save_txt or coco)."""
        labels_all = labels_in_pixels(targets, input_hw)
        for si, pred in enumerate(preds):
            pred = _numpy(pred).astype(np.float32)
            labels = labels_all[labels_all[:, 0] == si, 1:]
            self.seen += 1
            if pred.shape[0] == 0:
                if self.save_txt:  # no file, or an empty one over an earlier run's (RunLabelFiles)
                    self.label_files.write(paths[si], pred, shapes[si][0], self.save_conf)
                if labels.shape[0]:  # every label missed
                    self.stats.append((np.zeros((0, len(self.iouv)), dtype=bool), np.zeros(0), np.zeros(0),
                                       labels[:, 0]))
                    if self.plots:
                        self.confusion_matrix.process_batch(detections=None, labels=labels[:, 0])
                continue
            if self.single_cls:
                pred[:, 5] = 0
            correct, predn, labelsn = match_image(pred, labels, input_hw, shapes[si][0], shapes[si][1], self.iouv)
            if labels.shape[0] and self.plots:
                self.confusion_matrix.process_batch(predn, labelsn)
            self.stats.append((correct, pred[:, 4], pred[:, 5], labels[:, 0]))
            if self.save_txt:
                self.label_files.write(paths[si], predn, shapes[si][0], self.save_conf)
            if self.coco is not None:
                self.coco.add(predn, paths[si])

    def plot_batch(self, batch_i, im, targets, preds, paths, max_det=300):
        """With plots, the first three batches as val_batch{i}_labels.jpg and val_batch{i}_pred.jpg."""
        if not self.plots or batch_i >= 3:
            return
        labels = labels_in_pixels(targets, im.shape[2:])
        im = images_as_drawn(im)
        for kind, targets in (("labels", labels), ("pred", output_to_target(preds, max_det=max_det))):
            f = self.save_dir / f"val_batch{batch_i}_{kind}.jpg"
            self.draw(f.name, plot_images, im, targets, paths, f, self.names)

    def compute(self):
        """The figures of everything updated so far; prints the table (the `all` row, per-class rows when verbose
        and nc > 1) and, with plots, writes the curves and the confusion matrix. Returns DetectionMetrics."""
        m = DetectionMetrics(self.nc, self.seen)
        stats = [np.concatenate(x, 0) for x in zip(*self.stats)]
        if self.plots:  # handed over before the curves: the dearest drawing starts first
            self.draw("confusion_matrix.png", self.confusion_matrix.plot, save_dir=self.save_dir,
                      names=list(self.names.values()))
        if len(stats) and stats[0].any():
            _, _, m.p, m.r, _, ap, m.ap_class = ap_per_class(*stats, plot=self.plots, save_dir=self.save_dir,
                                                             names=self.names, draw=self.draw)
            m.ap50, m.ap = ap[:, 0], ap.mean(1)  # AP@0.5, AP@0.5:0.95
            m.mp, m.mr, m.map50, m.map50_95 = m.p.mean(), m.r.mean(), m.ap50.mean(), m.ap.mean()
        m.nt = np.bincount(stats[3].astype(int), minlength=self.nc) if len(stats) else np.zeros(self.nc, int)
        class_rows = [_ROW % (self.names.get(int(c), str(c)), m.seen, m.nt[c], m.p[i], m.r[i], m.ap50[i], m.ap[i])
                      for i, c in enumerate(m.ap_class)] if self.nc > 1 and len(stats) else []
        self._publish_table(_ROW % ("all", m.seen, m.nt.sum(), m.mp, m.mr, m.map50, m.map50_95), class_rows,
                            int(m.nt.sum()))
        return m

    def _publish_table(self, all_row, class_rows, n_labels):
        """Prints the `all` row, and the per-class rows when verbose; keeps the whole table (header included) in
        self.table for a caller that learns only afterwards whether it wants the per-class rows (the trainer's last
        epoch, which becomes best.pt's validation when it is the best epoch)."""
        self.table = [self.table_header, all_row, *class_rows]
        LOGGER.info(all_row)
        if n_labels == 0:
            LOGGER.warning(f"WARNING: no labels found in {self.task} set, can not compute metrics without labels")
        for row in class_rows if self.verbose else ():
            LOGGER.info(row)

    def evaluate_coco(self, metrics, im_files=()):
        """--save-json: write the predictions file; when pycocotools scored it, its mAPs replace metrics' overall
        mAP50 and mAP50-95 (in place). Returns metrics."""
        if self.coco is not None:
            res = self.coco.save_and_evaluate(im_files)
            if res is not None:
                metrics.map50_95, metrics.map50 = res
        return metrics
