"""Instance segmentation as a task of the engine (segment/train.py): the polygon dataset with its masks, the
Segment head, the box + mask loss, box and mask metrics (results.csv's official segmentation columns), mask plots.

The mask layout (--no-overlap) and the mask size (--mask-ratio) are the run's options, so the task is made for
them: segment_task(mask_ratio=4, overlap=True). SEGMENT is the official defaults' task.
"""
import functools

import numpy as np

import models.tasks  # noqa: F401  (registers Segment and Proto in models.yolo's YAML table)
from models.from_record import build_any_model
from models.tasks import Segment, SegmentationModel
from utils.autoanchor import check_anchors
from utils.checkpoint.kind import check_detection_record
from utils.checkpoint.records import CheckpointError
from utils.data.class_weights import labels_to_class_weights
from utils.loss import LossHyp
from utils.segment.dataset import create_seg_dataloader
from utils.segment.loss import SegmentationLoss
from utils.segment.plots import plot_images_and_masks
from utils.segment.validation import seg_evaluator, validate_seg_model
from utils.nms import non_max_suppression
from utils.plots import plot_labels
from utils.tasks.task import Task

LOSS_NAMES = ("box_loss", "seg_loss", "obj_loss", "cls_loss")
METRIC_NAMES = tuple(f"metrics/{m}({k})" for k in ("B", "M")
                     for m in ("precision", "recall", "mAP_0.5", "mAP_0.5:0.95"))
_FITNESS_WEIGHTS = np.array([0.0, 0.0, 0.1, 0.9, 0.0, 0.0, 0.1, 0.9])


def seg_fitness(x):
    """The number best.pt is chosen by, as official segmentation: 0.1 mAP50 + 0.9 mAP50-95 of the boxes plus the
    same of the masks, over rows of [box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, ...]."""
    return (np.asarray(x)[..., :8] * _FITNESS_WEIGHTS).sum(-1)


def check_segment_pretrained(record, source):
    """--weights for segmentation: a segmentation or a detection model (its backbone and head transfer, as
    official); a classifier is refused in one line."""
    kind = str(record.get("class", "")).rsplit(".", 1)[-1]
    if kind == "SegmentationModel":
        return
    if kind == "ClassificationModel":
        raise CheckpointError(f"{source} is a YOLOv5 classification checkpoint: segment/train.py starts from a "
                              "segmentation or detection model (yolov5n-seg.pt, yolov5n.pt) or --weights '' --cfg.")
    check_detection_record(record, source)


def _check_head(dataset, model, hyp, imgsz):
    check_anchors(dataset, model=model, thr=hyp["anchor_t"], imgsz=imgsz)  # AutoAnchor, as detection


def _loss(model, hyp, fused_iou, overlap):
    return SegmentationLoss(model, overlap=overlap, fused_iou=fused_iou, hyp=LossHyp.from_dict(hyp))


def _postprocess(preds, *args, **kwargs):
    return non_max_suppression(preds, *args, nm=32, **kwargs)


def segment_task(mask_ratio=4, overlap=True):
    """The segmentation Task for --mask-ratio and the overlap layout (not --no-overlap)."""
    return Task(
        name="segment",
        log_graph=False,  # as official segment/train.py
        build_dataloader=functools.partial(create_seg_dataloader, overlap_mask=overlap,
                                           mask_downsample_ratio=int(mask_ratio)),
        build_model=build_any_model,
        model_class=SegmentationModel,
        head=Segment,
        check_head=_check_head,
        class_weights=labels_to_class_weights,
        build_loss=functools.partial(_loss, overlap=overlap),
        loss_names=LOSS_NAMES,
        metric_names=METRIC_NAMES,
        fitness=seg_fitness,
        build_evaluator=functools.partial(seg_evaluator, overlap=overlap),
        postprocess=_postprocess,
        plot_labels=plot_labels,
        plot_batch=functools.partial(plot_images_and_masks, overlap=overlap),
        validate=functools.partial(validate_seg_model, overlap=overlap),
        check_pretrained=check_segment_pretrained,
    )


SEGMENT = segment_task()
