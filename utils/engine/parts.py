"""What build_training() hands the training loop: the built parts of one run, and where a run stands."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from utils import backend
from utils.distributed import DistContext
from utils.plot_jobs import PlotJobs


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
    fused_clip: bool = False  # --multi_tensor_optimizer: one multi-tensor norm for the gradient clip
    state: TrainingState = field(default_factory=TrainingState)
    # what the hooks need
    opt: Any = None  # the run's options (argparse.Namespace)
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
