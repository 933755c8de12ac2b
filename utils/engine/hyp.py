"""Hyperparameters: read from a --hyp file (or a bare name found in data/hyps/), checked, and the loss gains rescaled.

Every value is checked when the file (or a resumed run's stored dict) is read, not at the first batch: each key the
trainer uses must be there, hold a finite number in its range, and a misspelt or missing key is named with the
file. A number written so that YAML reads it as text (`lr0: 1e-3` -- PyYAML wants `1.0e-3`) is taken as the number
it spells, as a user means it; text that is no number is one line.
"""
import math
from pathlib import Path

from utils.engine.errors import TrainingError
from utils.paths import ROOT, find_repo_file
from utils.yaml_files import describe, read_yaml


class HypError(TrainingError, ValueError):
    """A hyperparameter file or value that cannot be trained with; the message names the file, key and value."""


# key -> (low, high, low_inclusive), high inclusive: the ranges the trainer can use. Probabilities and HSV gains are
# fractions, momenta at most 1; the learning rate must be above 0 or nothing trains.
_FRACTION = (0.0, 1.0, True)
_NONNEGATIVE = (0.0, math.inf, True)
_POSITIVE = (0.0, math.inf, False)
REQUIRED = {
    "lr0": _POSITIVE, "lrf": _NONNEGATIVE, "momentum": (0.0, 1.0, True), "weight_decay": _NONNEGATIVE,
    "warmup_epochs": _NONNEGATIVE, "warmup_momentum": (0.0, 1.0, True), "warmup_bias_lr": _NONNEGATIVE,
    "box": _NONNEGATIVE, "cls": _NONNEGATIVE, "cls_pw": _POSITIVE, "obj": _NONNEGATIVE, "obj_pw": _POSITIVE,
    "anchor_t": _POSITIVE, "hsv_h": _FRACTION, "hsv_s": _FRACTION, "hsv_v": _FRACTION, "degrees": (0.0, 360.0, True),
    "translate": _FRACTION, "scale": _FRACTION, "shear": (0.0, 180.0, True),
    "perspective": (0.0, 0.1, True), "flipud": _FRACTION, "fliplr": _FRACTION,
}
OPTIONAL = {  # read with a default, or kept for the official files' sake (iou_t, fl_gamma)
    "mosaic": _FRACTION, "mixup": _FRACTION, "copy_paste": _FRACTION, "iou_t": _FRACTION,
    "fl_gamma": _NONNEGATIVE, "label_smoothing": (0.0, 1.0, True), "anchors": (0.0, 10.0, True),
}
_HINT = "see data/hyps/hyp.scratch-low.yaml"


def load_hyp(hyp):
    """A checked copy of the hyp dict, or the dict read from a path / bare name ('hyp.scratch-high.yaml')."""
    where = "hyperparameters"
    if isinstance(hyp, (str, Path)):
        where = find_repo_file(hyp, what="--hyp", prefer=(ROOT / "data" / "hyps",))
        hyp = read_yaml(where, what="--hyp file", error=HypError)
    if not isinstance(hyp, dict):
        raise HypError(f"{where}: holds a {type(hyp).__name__}, expected 'key: value' lines; {_HINT}.")
    return check_hyp(hyp, where)


def check_hyp(hyp, where="hyperparameters"):
    """hyp with every value a float in its range (numeric text converted); HypError naming the first bad key."""
    missing = [k for k in REQUIRED if k not in hyp]
    if missing:
        raise HypError(f"{where}: missing {', '.join(missing)}; every hyp file needs these {len(REQUIRED)} keys: "
                       f"{_HINT} (copy it and change the values).")
    out = dict(hyp)
    for k, v in hyp.items():
        rule = REQUIRED.get(k) or OPTIONAL.get(k)
        if rule is None:
            continue  # an extra key (e.g. a newer official one) is kept and unused, as ultralytics does
        out[k] = _number(v, k, rule, where)
    return out  # 'anchors' stays a number as written (hyp.VOC's 3.412): the model rounds it, as official


def _number(v, key, rule, where):
    low, high, low_inclusive = rule
    x = None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            pass
    if x is None:
        raise HypError(f"{where}: {key}: {describe(v)} is not a number; write e.g. {key}: 0.01 ({_HINT}).")
    if not math.isfinite(x):
        raise HypError(f"{where}: {key}: {describe(v)} is not a finite number; give a value "
                       f"{_range(low, high, low_inclusive)}.")
    if x > high or x < low or (x == low and not low_inclusive):
        raise HypError(f"{where}: {key}: {describe(v)} is out of range; give a value "
                       f"{_range(low, high, low_inclusive)}.")
    return x


def _range(low, high, low_inclusive):
    lo = f"{'>=' if low_inclusive else '>'} {low:g}"
    return lo if high == math.inf else f"{lo} and <= {high:g}"


def scale_hyp(hyp, nl, nc, imgsz, label_smoothing=0.0):
    """Loss gains in hyp files are tuned for 3 levels, 80 classes and 640 px: rescale them (returns a copy)."""
    hyp = dict(hyp)
    hyp["box"] *= 3 / nl
    hyp["cls"] *= nc / 80 * 3 / nl
    hyp["obj"] *= (imgsz / 640) ** 2 * 3 / nl
    hyp["label_smoothing"] = label_smoothing
    return hyp
