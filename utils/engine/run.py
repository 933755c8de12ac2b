"""One training run: build the parts, run the loop with the default hooks."""
from utils.distributed import DistContext
from utils.engine.build import build_training
from utils.engine.train_loop import TrainLoop, default_hooks
from utils.tasks.detect import DETECT


def train(hyp, opt, device, dist=None, task_plugin=DETECT):
    """Train once; returns the final (P, R, mAP50, mAP50-95, val box, obj, cls) (zeros on DDP ranks other than 0).
    dist: this process's DistContext, built once by train.py (a single process when None); task_plugin: the
    utils.tasks.Task trained (detection for train.py)."""
    parts = build_training(opt, hyp, device, dist or DistContext(), task_plugin)
    try:
        return TrainLoop(parts, default_hooks(parts)).train()
    finally:
        parts.plots.close()  # a failed or stopped run still leaves whole plot files, not half-written ones
