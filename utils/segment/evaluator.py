"""SegmentationEvaluator: segment/val.py's box and mask figures from NMS outputs and prototypes, one batch at a
time (DetectionEvaluator's matching and AP, with the masks matched by mask IoU at the prototype resolution).

    evaluator = SegmentationEvaluator(nc, names, overlap=False)
    for im, targets, paths, shapes, masks in loader:
        preds, protos = model(im)[:2]
        preds = non_max_suppression(preds, 0.001, 0.6, multi_label=True, nm=32)
        evaluator.update(preds, protos, targets, masks, shapes, im.shape[2:], paths)
    metrics = evaluator.compute()     # .box and .mask: DetectionMetrics (mp, mr, map50, map50_95, maps())
"""
from dataclasses import dataclass

import numpy as np

from utils.evaluation.evaluator import DetectionEvaluator, DetectionMetrics
from utils.evaluation.matching import labels_in_pixels, match_image
from utils.metrics import ap_per_class, match_by_iou
from utils.plots import images_as_drawn, output_to_target
from utils.segment.masks import (mask_iou, overlap_to_instances, process_mask, process_mask_native, resize_masks,
                                 scale_image)
from utils.segment.plots import plot_images_and_masks

TABLE_HEADER = ("%22s" + "%11s" * 10) % ("Class", "Images", "Instances", "Box(P", "R", "mAP50", "mAP50-95)",
                                         "Mask(P", "R", "mAP50", "mAP50-95)")
_ROW = "%22s" + "%11i" * 2 + "%11.3g" * 8
PLOT_BATCHES, PLOT_IMAGES, PLOT_MAX_DET = 3, 16, 15  # val_batch0-2, 16 pictures each, 15 predictions per picture


def _numpy(x):
    if isinstance(x, np.ndarray):
        return x
    from utils.backend import to_numpy
    return to_numpy(x)


@dataclass
class SegmentationMetrics:
    box: DetectionMetrics
    mask: DetectionMetrics

    def results(self, losses=()):
        """(box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, *losses): what segment/val.run returns first."""
        return (*self.box.results(), *self.mask.results(), *losses)

    def maps(self):
        """(nc,) per class: box mAP50-95 + mask mAP50-95, as the official segmentation metrics sum them."""
        return self.box.maps() + self.mask.maps()


class SegmentationEvaluator(DetectionEvaluator):
    """overlap: the loader's masks are one overlap image per picture (else one mask per instance, in target
    order); native: masks at the input size (process_mask_native, as --save-json uses) instead of the
    prototype resolution."""

    table_header = TABLE_HEADER

    def __init__(self, nc, names, overlap=False, native=False, **kwargs):
        super().__init__(nc, names, **kwargs)
        self.overlap, self.native = overlap, native
        self.batches = 0  # update() calls so far: one per batch
        self.pred_masks_for_plot = []  # the last batch's first PLOT_MAX_DET masks per picture, while plots are drawn

    def update(self, preds, protos, targets, masks, shapes, input_hw, paths=None):
        labels_all = labels_in_pixels(targets, input_hw)
        # only the batches and pictures val_batch*_pred.jpg shows keep their masks (native ones are input-sized)
        keep_for_plot = self.plots and self.batches < PLOT_BATCHES
        self.batches += 1
        self.pred_masks_for_plot = []
        protos = _numpy(protos).astype(np.float32)
        masks = _numpy(masks)
        first = 0  # per-instance masks are concatenated in target order
        for si, pred in enumerate(preds):
            pred = _numpy(pred).astype(np.float32)
            labels = labels_all[labels_all[:, 0] == si, 1:]
            nl, t = labels.shape[0], len(self.iouv)
            if self.overlap:
                gt = overlap_to_instances(masks[si], nl)
            else:
                gt = masks[first:first + nl].astype(np.float32)
                first += nl
            self.seen += 1
            if pred.shape[0] == 0:
                if self.save_txt:  # no file, or an empty one over an earlier run's (RunLabelFiles)
                    self.label_files.write(paths[si], pred[:, :6], shapes[si][0], self.save_conf)
                if nl:
                    empty = np.zeros((0, t), dtype=bool)
                    self.stats.append((empty, empty, np.zeros(0), np.zeros(0), labels[:, 0]))
                    if self.plots:
                        self.confusion_matrix.process_batch(detections=None, labels=labels[:, 0])
                continue
            if self.native:
                pm = process_mask_native(protos[si], pred[:, 6:], pred[:, :4], input_hw)
            else:
                pm = process_mask(protos[si], pred[:, 6:], pred[:, :4], input_hw)
            if keep_for_plot and si < PLOT_IMAGES:
                self.pred_masks_for_plot.append(pm[:PLOT_MAX_DET].astype(np.uint8))
            if self.single_cls:
                pred[:, 5] = 0
            correct_box, predn, labelsn = match_image(pred[:, :6], labels, input_hw, shapes[si][0], shapes[si][1],
                                                      self.iouv)
            correct_mask = np.zeros_like(correct_box)
            if nl:
                if gt.shape[1:] != pm.shape[1:]:
                    gt = (resize_masks(gt, pm.shape[1:]) > 0.5).astype(np.float32)
                iou = mask_iou(gt.reshape(nl, -1), pm.reshape(len(pm), -1))
                correct_mask = match_by_iou(iou, labels[:, 0], pred[:, 5], self.iouv)
                if self.plots:
                    self.confusion_matrix.process_batch(predn, labelsn)
            self.stats.append((correct_mask, correct_box, pred[:, 4], pred[:, 5], labels[:, 0]))
            if self.save_txt:
                self.label_files.write(paths[si], predn, shapes[si][0], self.save_conf)
            if self.coco is not None:  # masks on the original image, as the official --save-json encodes them
                native = scale_image(input_hw, (pm > 0.5).astype(np.uint8).transpose(1, 2, 0), shapes[si][0],
                                     shapes[si][1])
                self.coco.add(predn, paths[si], native.transpose(2, 0, 1))

    def plot_batch(self, batch_i, im, targets, preds, paths, max_det=300, masks=None):
        """With plots, the first three batches as val_batch{i}_labels.jpg (the loader's masks) and val_batch{i}_pred.jpg
        (each picture's first 15 predictions and their masks, those over 0.25 confidence drawn), as official
        segment/val.py. Call after update() of the same batch: the predicted masks are the ones it kept."""
        if not self.plots or batch_i >= PLOT_BATCHES:
            return
        labels = labels_in_pixels(targets, im.shape[2:])
        im = images_as_drawn(im, PLOT_IMAGES)
        if masks is not None:
            masks = _numpy(masks)
            if self.overlap:
                masks = masks[:PLOT_IMAGES]
            else:  # one mask per target row: keep the rows of the pictures drawn, with their targets
                keep = labels[:, 0] < PLOT_IMAGES
                labels, masks = labels[keep], masks[keep]
        pred_masks = [m for m in self.pred_masks_for_plot if len(m)]  # pictures with no prediction added none
        pred_masks = np.concatenate(pred_masks, 0) if pred_masks else None
        pred_targets = output_to_target([p[:PLOT_MAX_DET] for p in preds[:PLOT_IMAGES]], max_det=PLOT_MAX_DET)
        for kind, t, m, overlap in (("labels", labels, masks, self.overlap), ("pred", pred_targets, pred_masks, False)):
            f = self.save_dir / f"val_batch{batch_i}_{kind}.jpg"
            self.draw(f.name, plot_images_and_masks, im, t, paths, f, m, self.names, overlap)

    def compute(self):
        """The box and mask figures of everything updated so far; prints the table. Returns SegmentationMetrics."""
        box, mask = DetectionMetrics(self.nc, self.seen), DetectionMetrics(self.nc, self.seen)
        stats = [np.concatenate(x, 0) for x in zip(*self.stats)]
        if self.plots:  # handed over before the curves: the dearest drawing starts first
            self.draw("confusion_matrix.png", self.confusion_matrix.plot, save_dir=self.save_dir,
                      names=list(self.names.values()))
        if len(stats) and stats[0].any():
            for m, tp, prefix in ((box, stats[1], "Box"), (mask, stats[0], "Mask")):
                _, _, m.p, m.r, _, ap, m.ap_class = ap_per_class(tp, *stats[2:], plot=self.plots, prefix=prefix,
                                                                 save_dir=self.save_dir, names=self.names,
                                                                 draw=self.draw)
                m.ap50, m.ap = ap[:, 0], ap.mean(1)
                m.mp, m.mr, m.map50, m.map50_95 = m.p.mean(), m.r.mean(), m.ap50.mean(), m.ap.mean()
        nt = np.bincount(stats[4].astype(int), minlength=self.nc) if len(stats) else np.zeros(self.nc, int)
        box.nt = mask.nt = nt
        class_rows = [_ROW % (self.names.get(int(c), str(c)), self.seen, nt[c], box.p[i], box.r[i], box.ap50[i],
                              box.ap[i], mask.p[i], mask.r[i], mask.ap50[i], mask.ap[i])
                      for i, c in enumerate(box.ap_class)] if self.nc > 1 and len(stats) else []
        self._publish_table(_ROW % ("all", self.seen, nt.sum(), *box.results(), *mask.results()), class_rows,
                            int(nt.sum()))
        return SegmentationMetrics(box, mask)

    def evaluate_coco(self, metrics, im_files=()):
        """--save-json: write the predictions file (boxes and RLE masks); when pycocotools scored it, its box and
        mask mAPs replace metrics' overall mAP50 and mAP50-95 (in place), as official. Returns metrics."""
        if self.coco is not None:
            res = self.coco.save_and_evaluate(im_files)
            if res is not None:
                metrics.box.map50_95, metrics.box.map50, metrics.mask.map50_95, metrics.mask.map50 = res
        return metrics
