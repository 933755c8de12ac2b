"""Segmentation's steps in the one validation loop (utils/evaluation/loop.py), used by segment/val.py and the
trainer: (im, targets, paths, shapes, masks) batches through the model, NMS with the mask coefficients and a
SegmentationEvaluator.

    evaluator = seg_evaluator(data, names, overlap=True)
    results, maps, times = run_validation(model, loader, evaluator, steps=SegmentationSteps, nm=32, compute_loss=loss)

validate_seg_model() is the trainer's call (Task.validate of utils/tasks/segment.py), with the signature and return
of utils.evaluation.validate_model. NMS has no time limit here (the official one makes the figures follow the
machine load).
"""
import functools
import math
from pathlib import Path

from utils.evaluation.detection_steps import DetectionSteps
from utils.evaluation.evaluator import IOU_THRESHOLDS
from utils.evaluation.runner import validate_model
from utils.nms import non_max_suppression
from utils.segment.evaluator import SegmentationEvaluator


def mask_count(model):
    """Mask coefficients per detection: the Segment head's nm for a model built here (training's, or a .pt file's
    behind DetectMultiBackend), else the official default 32 (exported models)."""
    if hasattr(model, "pt"):  # DetectMultiBackend
        if not model.pt:
            return 32
        model = model.model
    try:
        return int(model.model[-1].nm)
    except (AttributeError, IndexError, TypeError):
        return 32


class SegmentationSteps(DetectionSteps):
    """Detection's steps with the masks: the batch carries the loader's masks after the shapes; the model's output
    is (decoded predictions, prototypes, raw maps); nm: the mask coefficients per detection (None: mask_count's)."""

    loss_names = ("box", "seg", "obj", "cls")

    def __init__(self, model, evaluator, nm=None, **options):
        super().__init__(model, evaluator, **{**options, "n_loss_items": len(self.loss_names)})
        self.nm = mask_count(model) if nm is None else nm

    def forward(self, model, batch, keep=2):  # (decoded, protos) kept; the raw maps too only when the loss needs them
        return super().forward(model, batch, keep=keep)

    def add_loss(self, out, batch):
        if self.compute_loss:
            targets, masks = batch[1], batch[4]
            self.loss += self.compute_loss((out[2], out[1]), targets, masks.to(self.device).float())[1]

    def postprocess(self, out, batch):
        return non_max_suppression(out[0], self.conf_thres, self.iou_thres, multi_label=True,
                                   agnostic=self.evaluator.single_cls, max_det=self.max_det, nm=self.nm,
                                   time_limit=math.inf)

    def update(self, batch_i, batch, out, preds):
        im, targets, paths, shapes, masks = batch
        self.evaluator.update(preds, out[1], targets, masks, shapes, tuple(im.shape[2:]), paths)
        self.evaluator.plot_batch(batch_i, im, targets, [p[:, :6] for p in preds], paths, max_det=self.max_det,
                                  masks=masks)


def seg_evaluator(data, names, save_dir=Path(""), single_cls=False, plots=True, verbose=False, task="val",
                  save_txt=False, save_conf=False, save_json=False, weights=None, overlap=False):
    """A SegmentationEvaluator for a checked dataset dict (evaluator_for_dataset's arguments, plus overlap: the
    loader's masks are one overlap image per picture)."""
    from utils.segment.coco_json import CocoSegPredictions  # noqa: PLC0415 (pycocotools only when saving JSON)
    nc = 1 if single_cls else int(data["nc"])
    names = dict(names or data.get("names", {}))
    if single_cls:
        names = {0: names.get(0, "item")}
    coco = CocoSegPredictions.for_dataset(data, save_dir, weights) if save_json else None
    return SegmentationEvaluator(nc, names, overlap=overlap, native=save_json, iouv=IOU_THRESHOLDS,
                                 single_cls=single_cls, plots=plots, save_dir=save_dir, verbose=verbose, task=task,
                                 save_txt=save_txt, save_conf=save_conf, coco=coco)


def validate_seg_model(model, dataloader, data, single_cls=False, half=False, compute_loss=None, save_dir=Path(""),
                       plots=True, verbose=False, conf_thres=0.001, iou_thres=0.6, max_det=300, augment=False,
                       save_txt=False, save_hybrid=False, save_conf=False, save_json=False, task="val",
                       plot_jobs=None, task_plugin=None, overlap=False, table=None):
    """The trainer's validation of an in-memory segmentation model (the EMA each epoch, best.pt at the end) on its
    validation loader: utils.evaluation.validate_model with segmentation's evaluator and steps, plus overlap (the
    loader's mask layout). The model is left in fp32."""
    return validate_model(model, dataloader, data, single_cls=single_cls, half=half, compute_loss=compute_loss,
                          save_dir=save_dir, plots=plots, verbose=verbose, conf_thres=conf_thres, iou_thres=iou_thres,
                          max_det=max_det, augment=augment, save_txt=save_txt, save_conf=save_conf,
                          save_json=save_json, task=task, plot_jobs=plot_jobs, table=table,
                          build_evaluator=functools.partial(seg_evaluator, overlap=overlap), steps=SegmentationSteps)
