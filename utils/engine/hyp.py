"""Hyperparameters: read from a --hyp file (or a bare name found in data/hyps/), and the loss gains rescaled."""
from pathlib import Path

import yaml

from utils.paths import ROOT, find_repo_file


def load_hyp(hyp):
    """A copy of the hyp dict, or the dict read from a path / bare name ('hyp.scratch-high.yaml')."""
    if isinstance(hyp, (str, Path)):
        with open(find_repo_file(hyp, what="--hyp", prefer=(ROOT / "data" / "hyps",)), errors="ignore") as f:
            hyp = yaml.safe_load(f)
    return dict(hyp)


def scale_hyp(hyp, nl, nc, imgsz, label_smoothing=0.0):
    """Loss gains in hyp files are tuned for 3 levels, 80 classes and 640 px: rescale them (returns a copy)."""
    hyp = dict(hyp)
    hyp["box"] *= 3 / nl
    hyp["cls"] *= nc / 80 * 3 / nl
    hyp["obj"] *= (imgsz / 640) ** 2 * 3 / nl
    hyp["label_smoothing"] = label_smoothing
    return hyp
