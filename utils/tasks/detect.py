"""Detection, the task every default names: the official YOLOv5 detector's dataset, head, loss, metrics and plots."""
from models.from_record import build_model
from models.yolo import Detect, DetectionModel
from utils.autoanchor import check_anchors
from utils.data.loader import create_dataloader
from utils.data.class_weights import labels_to_class_weights
from utils.evaluation.runner import evaluator_for_dataset
from utils.loss import ComputeLoss, LossHyp
from utils.metrics import fitness
from utils.nms import non_max_suppression
from utils.plots import plot_images, plot_labels
from utils.tasks.task import Task


def _check_head(dataset, model, hyp, imgsz):
    check_anchors(dataset, model=model, thr=hyp["anchor_t"], imgsz=imgsz)


def _loss(model, hyp, fused_iou):
    return ComputeLoss(model, hyp=LossHyp.from_dict(hyp), fused_iou=fused_iou)


DETECT = Task(
    name="detect",
    build_dataloader=create_dataloader,
    build_model=build_model,
    model_class=DetectionModel,
    head=Detect,
    check_head=_check_head,
    class_weights=labels_to_class_weights,
    build_loss=_loss,
    loss_names=("box_loss", "obj_loss", "cls_loss"),
    metric_names=("metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95"),
    fitness=fitness,
    build_evaluator=evaluator_for_dataset,
    postprocess=non_max_suppression,
    plot_labels=plot_labels,
    plot_batch=plot_images,
)
