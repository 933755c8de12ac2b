"""The task plug-in: the fields a task fills and the engine, evaluator, loaders and checkpoint readers call."""
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from utils.checkpoint.kind import check_detection_record


@dataclass(frozen=True)
class Task:
    """One task's pieces. Every callable keeps the signature detection's has, so the callers need no branch."""
    name: str  # 'detect' (later 'segment', 'classify')
    # dataset: (path, imgsz, batch_size, stride, single_cls, **loader options) -> (loader, dataset)
    build_dataloader: Callable
    # model: a record read from a checkpoint -> the live model (the checkpoint readers' and writer's model builder)
    build_model: Callable
    model_class: type  # the network built from a --cfg yaml: (cfg, ch, nc, anchors) -> model
    head: type  # the output layer class (export mode, inplace, stride)
    # before training, on the main process: (dataset, model, hyp, imgsz) -> None (detection: AutoAnchor)
    check_head: Optional[Callable]
    # per-class weights from the training labels: (labels, nc) -> numpy array (the loss's and --image-weights')
    class_weights: Callable
    # loss: (model, hyp dict, fused_iou) -> fn(predictions, targets) -> (loss * batch size, loss items)
    build_loss: Callable
    loss_names: Tuple[str, ...]  # the loss items, in order: progress bar columns and results.csv train/ and val/
    metric_names: Tuple[str, ...]  # results.csv metrics/ columns, in the order the evaluator's results give them
    fitness: Callable  # results rows -> the number best.pt is chosen by
    # evaluation: (data, names, save_dir, **options) -> evaluator with update(...)/compute()/plot_batch(...)
    build_evaluator: Callable
    postprocess: Callable  # raw predictions -> per-image results (detection: NMS), called by validation
    plot_labels: Callable  # (labels, names, save_dir) -> labels.jpg
    plot_batch: Callable  # (images, targets, paths, fname, *batch extras) -> a train_batch mosaic
    # Added for the tasks after detection (their defaults are detection's behaviour). A batch's items after
    # (images, targets, paths, shapes), e.g. segmentation's masks, go to the loss after the targets and to plot_batch.
    # validate: the trainer's validation of an in-memory model, with utils.evaluation.validate_model's signature and
    # return; None: validate_model itself (DetectionEvaluator over NMS outputs).
    validate: Optional[Callable] = None
    # --weights: (model record, source) -> None, raising when the stored model is not one this task trains from
    check_pretrained: Callable = check_detection_record
    # (float 0-1 images on the device) -> the network's input; None: the images as they are (classification: the
    # ImageNet mean/std)
    prepare_images: Optional[Callable] = None
    # whether TensorBoard gets the model graph before the first step (official detection and classification trainers
    # write it; official segment/train.py does not, and tracing the model costs 0.5 s or more of the run's start)
    log_graph: bool = True
    # the pictures of the first training batches, one file per batch (official classify/train.py: one, of 25 images)
    batch_plots: tuple = ("train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg")
    # whether training ends with best.pt validated again, with plots and per-class figures, as the run's results
    # (official detection and segmentation trainers); False (official classify/train.py): the last epoch's
    # validation is the run's final one and draws the task's plots
    validate_best: bool = True
    # results.png from results.csv at the end (official detection and segmentation trainers; classify/train.py
    # draws none)
    results_plot: bool = True

    def results_keys(self, n_lr_groups=3):
        """results.csv's columns after 'epoch': train losses, metrics, val losses, learning rates."""
        return ([f"train/{n}" for n in self.loss_names] + list(self.metric_names) +
                [f"val/{n}" for n in self.loss_names] + [f"x/lr{i}" for i in range(n_lr_groups)])

    def results_row(self, train_losses, results, lrs, next_lrs):
        """results.csv's values after 'epoch', in results_keys() order. lrs: the group lrs the epoch trained with;
        next_lrs: after the epoch's lr step (what official classification logs)."""
        return list(train_losses) + list(results) + list(lrs)
