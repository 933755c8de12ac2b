"""The options a checkpoint carries (``opt``; read_resumed_checkpoint reads them for train.py's and
classify/train.py's ``--resume``), checked before they are used: each one this script knows must have its flag's
type and a size that a run can use, or the resume stops in one line naming the checkpoint, the option and its value.
A checkpoint is a file like any other: edited, damaged or foreign, its values must not reach the trainer as they
are."""
import argparse
import math
from pathlib import Path, PurePath

from utils.checkpoint import CheckpointError, load_checkpoint
from utils.engine.errors import TrainingError
from utils.paths import get_latest_run
from utils.yaml_files import describe

# upper bounds on what a saved option may ask the process to allocate or loop over
LIMITS = {"epochs": 1_000_000, "batch_size": 65_536, "imgsz": 16_384, "workers": 1_024, "patience": 10 ** 9,
          "save_period": 10 ** 9, "seed": 2 ** 63 - 1, "label_smoothing": 1.0}
CHOICES = {"optimizer": ("SGD", "Adam", "AdamW")}
TEXT_OR_FLAG = {"upload_dataset"}  # official: --upload_dataset [val] stores True or 'val'


def _fits(v, default):
    if default is None:
        return True  # an option with no default (evolve, cache...) takes what its flag takes; checked where used
    if isinstance(default, bool):
        return isinstance(v, bool)
    if isinstance(default, int):
        return isinstance(v, int) and not isinstance(v, bool)
    if isinstance(default, float):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if isinstance(default, str):
        return isinstance(v, (str, PurePath)) or v is None  # official defaults such as --evolve_population are Paths
    if isinstance(default, list):
        return isinstance(v, (list, tuple)) or isinstance(v, int) and not isinstance(v, bool)
    return True


def check_saved_options(saved, defaults, source):
    """Raise TrainingError unless every option of saved that defaults names has the default's type and fits
    LIMITS. The options --resume replaces and this script's unknown keys are left alone."""
    for k, v in saved.items():
        if k in ("hyp", "resume", "weights", "cfg", "save_dir") or k not in defaults:  # hyp: checked by hyp.py
            continue
        ok = _fits(v, defaults[k]) or (k in TEXT_OR_FLAG and isinstance(v, str))
        if ok and k in CHOICES:
            ok = v in CHOICES[k]
        if ok and k in LIMITS and isinstance(v, (int, float)) and not isinstance(v, bool):
            ok = -1 <= v <= LIMITS[k]
        if not ok:
            raise TrainingError(f"--resume: {source}: its saved option {k}={describe(v)} is not what --{k} takes "
                                f"(like {describe(defaults[k])}); the checkpoint was edited or damaged: start a new "
                                f"run with --weights {source}.")


def read_resumed_checkpoint(opt):
    """(path, record read without tensors, its saved options as a dict or whatever else it holds) of the checkpoint
    opt.resume names: a path, or True for the newest last*.pt under opt.project. The caller checks that it is a
    resumable run of its own task. A missing or unreadable file raises TrainingError."""
    last = Path(opt.resume if isinstance(opt.resume, str) else get_latest_run(opt.project))
    if not last.is_file():
        raise TrainingError(f"--resume: no checkpoint found at '{last}'. Give the path of a run's weights/last.pt.")
    try:
        ckpt = load_checkpoint(last, tensors=False, build_models=False)
    except CheckpointError as e:
        raise TrainingError(f"--resume: {e}") from e
    saved = ckpt.get("opt") if isinstance(ckpt, dict) else None
    saved = vars(saved) if isinstance(saved, argparse.Namespace) else saved  # a Namespace reads as its dict
    return last, ckpt, _paths_as_text(saved)


def _paths_as_text(saved):
    """The saved options with path objects as text: the official parser's defaults are pathlib Paths (an official
    last.pt keeps evolve_population=PosixPath('data/hyps') when the flag was not given), this project's flags
    take text."""
    if not isinstance(saved, dict):
        return saved
    return {k: str(v) if isinstance(v, PurePath) else v for k, v in saved.items()}
