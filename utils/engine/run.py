"""One training run: hold the run folder, build the parts, run the loop with the default hooks."""
import contextlib

from utils.distributed import DistContext
from utils.engine.build import build_training
from utils.engine.hooks import default_hooks
from utils.engine.loop import TrainLoop
from utils.run_lock import hold_run_folder
from utils.tasks.detect import DETECT


def train(hyp, opt, device, dist=None, task_plugin=DETECT, build=None):
    """Train once; returns the final (P, R, mAP50, mAP50-95, val box, obj, cls) (zeros on DDP ranks other than 0).
    dist: this process's DistContext, built once by train.py (a single process when None); task_plugin: the
    utils.tasks.Task trained (detection for train.py); build: what makes the run's parts (None: build_training; a
    classification run: utils.engine.classify_build.build_classification_training). The process that writes the run
    folder (DDP: rank 0; the other ranks never write there) locks it first, before anything in it changes: a second
    run into a live folder stops in one line (utils/run_lock.py)."""
    dist = dist or DistContext()
    build = build or build_training  # looked up per call, not bound at import
    with hold_run_folder(opt.save_dir) if dist.is_main else contextlib.nullcontext():
        parts = build(opt, hyp, device, dist, task_plugin)
        try:
            return TrainLoop(parts, default_hooks(parts)).train()
        finally:
            parts.plots.close()  # a failed or stopped run still leaves whole plot files, not half-written ones
