"""The task plug-in: the fields a task fills and the engine, evaluator, loaders and checkpoint readers call."""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple

from utils.checkpoint.kind import check_detection_record


NOMINAL_BATCH = 64  # the YOLO detector trainer's nominal batch (utils/engine/schedule.NBS)


@dataclass(frozen=True)
class TrainInputs:
    """The flags build_training() itself reads, typed and frozen from the run's RecordedFlags (typed_options,
    utils/checkpoint/run_options.py). A task's trainer steps read a subclass of it that adds their own flags
    (TrainerSteps.inputs): the detector's DetectorInputs (utils/engine/yolo_steps.py), classification's
    ClassifierInputs (utils/tasks/classify.py)."""
    data: str = ""  # the dataset: a data YAML, or an ImageFolder root (classification)
    weights: str = ""  # the checkpoint to start from; a resumed run's last.pt
    resume: bool = False  # settled by the entry script: True only while a run is resumed
    save_dir: str = ""  # the run folder the entry script claimed
    seed: int = 0
    imgsz: int = 640
    batch_size: int = 16  # the total over the ranks; -1: AutoBatch
    epochs: int = 100
    optimizer: str = "SGD"
    amp: Any = None  # --amp/--no-amp: None (the device decides), True or False
    cache: Any = None  # None, 'ram', 'disk' or 'val' (detection: the validation images only)


@dataclass(frozen=True)
class TrainData:
    """What one run trains and validates on, as a task's trainer step `read_data` found it."""
    data: dict  # the dataset dict (path, train, val, nc, names, ...): validation, loggers and checkpoints read it
    nc: int
    names: Any  # {index: name} (data YAMLs) or a list (classification's train/ folders, as official)
    train: Any  # what the train loader reads (a list file or folder of a data YAML, an ImageFolder split)
    val: Any
    loader_options: dict = field(default_factory=dict)  # more keywords for both loaders (classification's classes)


@dataclass(frozen=True)
class TrainerSteps:
    """How a task's trainer differs from the YOLO detector's, step by step, for utils/engine/build.py's
    build_training(). A step left None is the detector's own (utils/engine/yolo_steps.py), which detection and
    segmentation use; classification fills every one (utils/tasks/classify.py). Every step is called once per run.
    No step sees the argparse namespace: `inputs` below are the typed, frozen flags the steps read."""
    # the record of the flags the steps read: a TrainInputs subclass, made once per run from its
    # RecordedFlags by typed_options (detector: DetectorInputs)
    inputs: Optional[type] = None
    # (inputs, hyp as given to build_training) -> the hyperparameter dict (detector: the checked --hyp file)
    hyperparameters: Optional[Callable] = None
    # (RecordedFlags, hyp) -> {file name: dict} written into the run folder; its 'opt.yaml' is what every checkpoint
    # records as 'opt' (detector: hyp.yaml and official_opt's opt.yaml)
    settings_files: Optional[Callable] = None
    read_data: Optional[Callable] = None  # (inputs, dist) -> TrainData (detector: the data YAML, --single-cls)
    # (task, inputs, hyp, TrainData, device, last.pt read or None, dist) -> the model on device: a resumed run's (its
    # classes checked against the data's) or a new one (detector: --cfg / --weights, --freeze)
    start_model: Optional[Callable] = None
    input_size: Optional[Callable] = None  # (model, --imgsz) -> (imgsz, grid size) (detector: a stride multiple)
    # (task, inputs, RunOptions, hyp, TrainData, imgsz, gs, total batch size, dist) -> (train loader, train dataset,
    # val loader or None on other ranks), both loaders EarlyStartLoader-wrapped
    loaders: Optional[Callable] = None
    # (task, inputs, model, hyp, TrainData, train dataset, imgsz, device, FastPaths, dist) -> (compute_loss, hyp as the
    # loss uses it) (detector: the loss gains scaled to the head, the class weights attached to the model)
    loss: Optional[Callable] = None
    # the images an optimizer step stands for: gradients accumulate up to it, the weight decay is scaled to it and
    # the first epochs warm up (hyp's warmup_*); None: one step per batch at the epoch's lr, the weight decay as given,
    # no warmup (official classify/train.py)
    nominal_batch: Optional[int] = NOMINAL_BATCH
    # the lr step at each epoch's end lags one epoch behind (Schedule.lagging_lr_step): the official detection and
    # segmentation trainers; official classify/train.py steps to the next epoch's lr
    lagging_lr_step: bool = True


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
    # how its trainer differs from the YOLO detector's (None steps: the detector's), see TrainerSteps
    trainer: TrainerSteps = TrainerSteps()

    def for_options(self, inputs):
        """The task as a run with these inputs (its TrainerSteps' record) trains it (classification: which split
        validates); itself here."""
        return self

    def results_keys(self, n_lr_groups=3):
        """results.csv's columns after 'epoch': train losses, metrics, val losses, learning rates."""
        return ([f"train/{n}" for n in self.loss_names] + list(self.metric_names) +
                [f"val/{n}" for n in self.loss_names] + [f"x/lr{i}" for i in range(n_lr_groups)])

    def results_row(self, train_losses, results, lrs, next_lrs):
        """results.csv's values after 'epoch', in results_keys() order. lrs: the group lrs the epoch trained with;
        next_lrs: after the epoch's lr step (what official classification logs)."""
        return list(train_losses) + list(results) + list(lrs)
