"""Classification: ultralytics' classify/train.py as a task of the engine. ImageFolder data with the official
augmentations (utils/classify/), a ClassificationModel (a detection network cut at --cutoff with a Classify head),
cross-entropy with label smoothing, top-1/top-5 validation, and results.csv with the official columns: train/loss,
<split>/loss (val/loss, or test/loss when the dataset validates on test/), metrics/accuracy_top1,
metrics/accuracy_top5, lr/0. Fitness (best.pt) is the top-1 accuracy.

Its trainer steps (TrainerSteps, what build_training asks the task) differ from the YOLO detector's as official
classify/train.py: hyperparameters from the flags (--lr0, --decay, --label-smoothing; momentum 0.9, lrf 0.01), the
ImageFolder splits, the model --model names (utils/classify/training.py), --imgsz as given, the loss without gains,
no nominal batch (no warmup, no gradient accumulation, the weight decay as given), opt.yaml = vars(opt)."""
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.from_record import build_any_model
from models.tasks import ClassificationModel, Classify
from utils.backend import torch
from utils.classify.dataset import IMAGENET_MEAN, IMAGENET_STD, training_loader
from utils.classify.evaluate import evaluate_classifier
from utils.classify.loss import ClassificationLoss
from utils.classify.plots import plot_classification_batch
from utils.classify.training import (check_resumed_classes, classification_model, dataset_splits, recorded_options,
                                     split_classes)
from utils.data import EarlyStartLoader
from utils.distributed.collectives import main_process_first
from utils.log import LOGGER
from utils.tasks.task import Task, TrainData, TrainerSteps, TrainInputs

LRF = 0.01  # the final learning rate as a fraction of lr0 (official classify/train.py's fixed lrf)
MOMENTUM = 0.9  # official classify/train.py: smart_optimizer(..., momentum=0.9, ...)


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
class ClassifierInputs(TrainInputs):
    """The flags classification's steps read besides the build's own (classify/train.py's)."""
    model: str = "yolov5s-cls.pt"  # a classification or detection checkpoint, or a detection model YAML
    pretrained: Any = True  # True, or 'False' (any case) to start from random weights
    cutoff: Any = None  # the layer a detection network is cut at (None: DEFAULT_CUTOFF)
    dropout: Any = None  # the Dropout layers' fraction (None: as the model has it)
    lr0: float = 0.001
    decay: float = 5e-5
    label_smoothing: float = 0.1
    verbose: bool = False


def _hyperparameters(inputs, hyp=None):
    """The flags carry them (official classify/train.py has no --hyp)."""
    return {"lr0": inputs.lr0, "lrf": LRF, "momentum": MOMENTUM, "weight_decay": inputs.decay,
            "label_smoothing": inputs.label_smoothing}


def _settings_files(flags, hyp):
    return {"opt.yaml": recorded_options(flags)}  # official: vars(opt), no hyp.yaml


def _read_data(inputs, dist):
    """The ImageFolder splits and their one class list (train/'s folders), a list as official models carry it."""
    root, train_dir, val_dir = dataset_splits(inputs.data)
    names, source = split_classes(train_dir, val_dir)
    data = {"path": str(root), "train": str(train_dir), "val": str(val_dir), "nc": len(names),
            "names": dict(enumerate(names))}
    return TrainData(data=data, nc=len(names), names=list(names), train=train_dir, val=val_dir,
                     loader_options={"classes": names, "source": source})


def _start_model(task, inputs, hyp, data, device, ckpt, dist):
    """A resumed run's model (train/ must still hold its classes), or the one --model names."""
    if ckpt is not None:
        model = ckpt["model"]
        check_resumed_classes(model, data.names, inputs.weights)
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        with main_process_first(dist):
            model = classification_model(inputs, data.nc)
    model = model.to(device)
    model.names, model.nc = list(data.names), data.nc  # official: the train folder's classes, as a list
    if dist.is_main:
        model.info()  # GFLOPs at 640 px, as official model_info prints them
        if inputs.verbose:
            LOGGER.info(model)
        LOGGER.info(f"Training {inputs.model} on {data.data['path']} dataset with {data.nc} classes")
    return model


def _input_size(model, imgsz):
    return imgsz, 32  # --imgsz as given (official classification checks no stride multiple)


def _loaders(task, inputs, options, hyp, data, imgsz, gs, batch_size, dist):
    """(train loader, train dataset, val loader or None on other ranks): ImageFolder loaders over the run's class
    list; options.workers is already official's min(os.cpu_count() - 1, --workers)."""
    bs = batch_size // dist.world_size
    with main_process_first(dist):
        train_loader, dataset = task.build_dataloader(
            data.train, imgsz=imgsz, batch_size=bs, augment=True, cache=inputs.cache, workers=options.workers,
            shuffle=True, seed=inputs.seed, rank=dist.rank if dist.distributed else 0, world_size=dist.world_size,
            **data.loader_options)
    val_loader = None
    if dist.is_main:
        val_loader = EarlyStartLoader(task.build_dataloader(data.val, imgsz=imgsz, batch_size=bs * 2, augment=False,
                                                            cache=inputs.cache, workers=options.workers,
                                                            **data.loader_options)[0])
    return EarlyStartLoader(train_loader), dataset, val_loader


def _train_loss(task, inputs, model, hyp, data, dataset, imgsz, device, fast, dist):
    return task.build_loss(model, {**hyp, "world_size": dist.world_size}, False), hyp


TRAINER = TrainerSteps(inputs=ClassifierInputs, hyperparameters=_hyperparameters, settings_files=_settings_files,
                       read_data=_read_data, start_model=_start_model, input_size=_input_size, loaders=_loaders,
                       loss=_train_loss, nominal_batch=None, lagging_lr_step=False)


@dataclass(frozen=True)
class ClassifyTask(Task):
    """Task with the official classification results columns; val_split names the split validated on."""
    val_split: str = "val"

    def for_options(self, inputs):
        """results.csv names the split validated on: val/loss, or test/loss when the dataset has test/."""
        return dataclasses.replace(self, val_split=dataset_splits(inputs.data)[2].name)

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
    trainer=TRAINER,
)
