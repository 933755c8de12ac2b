"""What build_training() hands the training loop: the built parts of one run, and where a run stands."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from utils import backend
from utils.checkpoint.run_options import typed_options
from utils.distributed import DistContext
from utils.plot_jobs import PlotJobs
from utils.tasks import Task
from utils.tasks.detect import DETECT


@dataclass(frozen=True)
class RunFolder:
    """runs/train/expN and the checkpoint files in it."""
    save_dir: Path

    @property
    def weights(self):
        return self.save_dir / "weights"

    @property
    def last(self):
        return self.weights / "last.pt"

    @property
    def best(self):
        return self.weights / "best.pt"


@dataclass(frozen=True)
class Precision:
    """--amp/--no-amp as utils/precision.py resolved it: the autocast dtype (None: fp32) and the input layout."""
    dtype: Any = None
    channels_last: bool = False

    @property
    def autocast(self):
        return self.dtype is not None


@dataclass(frozen=True)
class RunOptions:
    """The train.py flags that the build, the launch checks and the loop's hooks act on, typed and read once (the
    hooks never see opt). A training script without one of them (classify/train.py) makes its own RunOptions, where
    the flag it lacks keeps its default here: no script fakes another's flags."""
    workers: int = 8
    single_cls: bool = False
    noval: bool = False  # validate the final epoch only
    nosave: bool = False  # save the final checkpoint only
    noplots: bool = False
    evolve: bool = False  # a generation of --evolve: no final evaluation
    save_period: int = -1  # epochN.pt every this many epochs (< 1: never)
    image_weights: bool = False
    patience: int = 100  # early-stop patience, in epochs without improvement
    # read by the build only
    rect: bool = False
    quad: bool = False
    multi_scale: bool = False
    noautoanchor: bool = False
    sync_bn: bool = False
    cos_lr: bool = False

    @classmethod
    def from_opt(cls, opt):
        """A training script's options (train.py's and segment/train.py's have every one)."""
        return typed_options(cls, vars(opt))


@dataclass(frozen=True)
class FastPaths:
    """This project's speed flags, read once: --multi_tensor_optimizer (multi-tensor optimizer step, EMA update and
    gradient-clip norm) and --bbox_iou_optim (the fused CIoU of the loss)."""
    multi_tensor: bool = field(default=False, metadata={"flag": "multi_tensor_optimizer"})
    fused_iou: bool = field(default=False, metadata={"flag": "bbox_iou_optim"})

    @classmethod
    def of(cls, flags):
        """From the run's RecordedFlags (a script without one of the flags: off)."""
        return typed_options(cls, flags)


@dataclass
class TrainingState:
    """Where a run stands between epochs: all zero for a new run, read from last.pt when it resumes."""
    start_epoch: int = 0
    last_opt_step: int = -1  # integrated iteration of the last optimizer step (accumulation counts from it)
    best_fitness: float = 0.0
    best_epoch: int = 0
    maps: Optional[np.ndarray] = None  # per-class mAP50-95 of the last validation (--image-weights reads it)
    resumed: bool = False


@dataclass
class TrainingParts:
    """The parts of one run. The loop's step uses the first group; hooks read the rest."""
    # the step
    model: Any  # DDP-wrapped when distributed
    optimizer: Any
    compute_loss: Any  # (predictions, targets) -> (loss, loss_items (3,))
    train_loader: Any  # batches (uint8 images, targets, paths, shapes)
    schedule: Any  # utils.engine.schedule.Schedule
    device: Any
    epochs: int
    ema: Any = None  # utils.torch_utils.ModelEMA; the main process only
    scaler: Any = field(default_factory=lambda: backend.grad_scaler("cpu", enabled=False))  # AMP off: a stand-in
    precision: Precision = field(default_factory=Precision)
    dist: DistContext = field(default_factory=DistContext)
    imgsz: int = 640
    gs: int = 32  # grid size: the model's largest stride (at least 32)
    multi_scale: bool = False
    quad: bool = False
    fast: FastPaths = field(default_factory=FastPaths)  # the step reads .multi_tensor (the gradient-clip norm)
    state: TrainingState = field(default_factory=TrainingState)
    # what the hooks need
    task: Task = field(default_factory=lambda: DETECT)  # the task plug-in (utils/tasks/): loss names, plots, metrics
    options: RunOptions = field(default_factory=RunOptions)
    recorded_opt: dict = field(default_factory=dict)  # the options as every checkpoint records them ('opt')
    hyp: dict = field(default_factory=dict)  # scaled as the loss uses them, weight decay scaled to the batch
    opt_hyp: dict = field(default_factory=dict)  # as loaded: what opt.yaml and checkpoints record
    data: dict = field(default_factory=dict)  # the dataset dict (check_dataset)
    nc: int = 1
    names: Any = None
    is_coco: bool = False
    dataset: Any = None  # the training dataset (labels for --image-weights)
    val_loader: Any = None  # the main process only
    run: Optional[RunFolder] = None
    loggers: Any = None  # utils.loggers.Loggers; None on other ranks and under --evolve
    plots: PlotJobs = field(default_factory=lambda: PlotJobs(processes=False))  # draws the run's plot files
