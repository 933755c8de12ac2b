"""Classification: ultralytics' classify/train.py as a task of the engine. ImageFolder data with the official
augmentations (utils/classify/), a ClassificationModel (a detection network cut at --cutoff with a Classify head),
cross-entropy with label smoothing, top-1/top-5 validation, and results.csv with the official columns: train/loss,
<split>/loss (val/loss, or test/loss when the dataset validates on test/), metrics/accuracy_top1,
metrics/accuracy_top5, lr/0. Fitness (best.pt) is the top-1 accuracy.

The engine builds a classification run with utils/engine/classify_build.py (its options, optimizer and schedule
rules differ from detection's: no warmup, no gradient accumulation, the learning rate linear from lr0 to 0.01 lr0)."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.from_record import build_any_model
from models.tasks import ClassificationModel, Classify
from utils.backend import torch
from utils.classify.dataset import IMAGENET_MEAN, IMAGENET_STD, training_loader
from utils.classify.evaluate import evaluate_classifier
from utils.classify.loss import ClassificationLoss
from utils.classify.plots import plot_classification_batch
from utils.tasks.task import Task

LRF = 0.01  # the final learning rate as a fraction of lr0 (official classify/train.py's fixed lrf)


def normalize_images(imgs):
    """0-1 RGB images -> the ImageNet-normalised input the classifiers are trained on (official Normalize)."""
    mean = torch.tensor(IMAGENET_MEAN, dtype=imgs.dtype, device=imgs.device).reshape(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=imgs.dtype, device=imgs.device).reshape(1, 3, 1, 1)
    return (imgs - mean) / std


def top1_fitness(results):
    """The number best.pt is chosen by: top-1 accuracy (results: (top1, top5, loss) rows)."""
    return np.asarray(results, dtype=np.float64)[..., 0]


def _validate(model, dataloader, data=None, compute_loss=None, verbose=False, plots=False, save_dir=None,
              plot_jobs=None, **_):
    """The trainer's validation in utils.evaluation.validate_model's call and return shape: ((top1, top5, loss),
    per-class top-1, None), the top-1/top-5 row printed; detection's options (thresholds) do not apply. plots (the
    last epoch's validation): the table of every class, and test_images.jpg in save_dir,
    the first 25 validation images captioned true-predicted, as official classify/train.py draws it after the
    last epoch (drawn by plot_jobs, the run's plot helpers)."""
    first_batch = None
    if plots and save_dir is not None and plot_jobs is not None:
        f = Path(save_dir) / "test_images.jpg"
        names = getattr(model, "names", None)
        first_batch = (lambda images, labels, pred: plot_jobs.submit(  # noqa: E731
            f.name, plot_classification_batch, images, labels, None, f, predictions=pred, names=names))
    # each epoch's top-1/top-5 in one row; the last epoch's (plots), the run's final figures, class by class
    results, per_class = evaluate_classifier(model, dataloader, compute_loss=compute_loss,
                                             prepare_images=normalize_images, verbose=verbose or plots, summary=True,
                                             first_batch=first_batch)
    return results, per_class, None


def _loss(model, hyp, fused_iou=False):
    return ClassificationLoss(hyp.get("label_smoothing", 0.0), world_size=hyp.get("world_size", 1))


def _no_class_weights(labels, nc):
    return np.ones(nc)


@dataclass(frozen=True)
class ClassifyTask(Task):
    """Task with the official classification results columns; val_split names the split validated on."""
    val_split: str = "val"

    def results_keys(self, n_lr_groups=3):
        return ["train/loss", f"{self.val_split}/loss", "metrics/accuracy_top1", "metrics/accuracy_top5", "lr/0"]

    def results_row(self, train_losses, results, lrs, next_lrs):
        top1, top5, val_loss = list(results)[:3]
        # official logs optimizer.param_groups[0]['lr'] after scheduler.step(): the next epoch's lr
        return [list(train_losses)[0], val_loss, top1, top5, list(next_lrs)[0]]


CLASSIFY = ClassifyTask(
    name="classify",
    build_dataloader=training_loader,  # (path, imgsz, batch_size, augment=, cache=, workers=, shuffle=, seed=, ...)
    build_model=build_any_model,
    model_class=ClassificationModel,
    head=Classify,
    check_head=None,
    class_weights=_no_class_weights,
    build_loss=_loss,
    loss_names=("loss",),
    metric_names=("metrics/accuracy_top1", "metrics/accuracy_top5"),
    fitness=top1_fitness,
    build_evaluator=None,  # validation is `validate` (no per-box evaluator)
    postprocess=None,
    plot_labels=None,
    plot_batch=plot_classification_batch,
    prepare_images=normalize_images,
    validate=_validate,
    batch_plots=("train_images.jpg",),
    validate_best=False,
    results_plot=False,
)
