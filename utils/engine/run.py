"""One training run: build the parts, run the loop with the default hooks."""
from utils.distributed import DistContext
from utils.engine.build import build_training
from utils.engine.train_loop import TrainLoop, default_hooks


def train(hyp, opt, device, dist=None):
    """Train once; returns the final (P, R, mAP50, mAP50-95, val box, obj, cls) (zeros on DDP ranks other than 0).
    dist: this process's DistContext, built once by train.py (a single process when None)."""
    parts = build_training(opt, hyp, device, dist or DistContext())
    try:
        return TrainLoop(parts, default_hooks(parts)).train()
    finally:
        parts.plots.close()  # a failed or stopped run still leaves whole plot files, not half-written ones
