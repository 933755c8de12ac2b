"""What the trainer writes at the end of each epoch and at the end of training (needs a framework: lives apart from
the package's framework-free readers).

A training checkpoint is the official ultralytics one (model and EMA in fp16, the optimizer in PyTorch's layout
with the official group order, ``opt`` with ``hyp`` inline, git, date) followed by this project's exact-resume
state under keys official code ignores: fp32 copies of model and EMA (fp16 rounding would change a resumed run),
the python/numpy/framework RNG states, the AMP scaler, last_opt_step, per-class maps, best_epoch, the scaled hyp,
names and nc. The final checkpoint is stripped as the official ``strip_optimizer`` does it.
"""
import collections
import logging
import os
import random
from datetime import datetime
from pathlib import Path

import numpy as np

from utils.backend_choice import BACKEND_NAMES
from utils.checkpoint.encoder import Half
from utils.checkpoint.files import load_checkpoint, save_checkpoint
from utils.checkpoint.optimizer_state import complete_torch_groups, optimizer_state_for_backend
from utils.checkpoint.run_options import git_info

OFFICIAL_KEYS = ("epoch", "best_fitness", "model", "ema", "updates", "optimizer", "opt", "git", "date")
LOGGER = logging.getLogger("yolov5")
_ROOT = Path(__file__).resolve().parents[2]


def get_rng_states():
    """The generators a resumed run continues. framework_backend names the backend whose generator wrote
    'framework': PyTorch's and OneFlow's CPU generator states differ in size and layout, so a resume decides by that
    name whether the state can be put back."""
    from utils import backend  # framework choice: the package imports none until a run needs one
    return {"python": random.getstate(), "numpy": np.random.get_state(), "framework": backend.get_rng_state(),
            "framework_backend": backend.BACKEND}


def framework_rng_writer(s, current, current_state_size):
    """The backend whose generator wrote s['framework']: the recorded name, or for files written before the name
    was recorded, the current backend when the state has its generator's size, else the other one."""
    recorded = s.get("framework_backend")
    if recorded:
        return str(recorded)
    state = s.get("framework")
    size = int(np.asarray(state.numpy() if hasattr(state, "numpy") else state).size) if state is not None else -1
    if size == current_state_size:
        return current
    return next((name for name in BACKEND_NAMES if name != current), "another backend")


def set_rng_states(s):
    """Put back the python and numpy generators, and the framework's when this backend wrote it. Returns None when
    everything was restored, else the backend that wrote the framework state left out (a resume across backends)."""
    from utils import backend  # framework choice: the package imports none until a run needs one
    random.setstate(_as_tuple(s["python"]))
    np.random.set_state(_as_tuple(s["numpy"]))
    if s.get("framework") is None:
        return None
    writer = framework_rng_writer(s, backend.BACKEND, int(np.asarray(backend.get_rng_state()).size))
    if writer != backend.BACKEND:
        return writer
    backend.set_rng_state(np.asarray(backend.to_numpy(s["framework"]) if hasattr(s["framework"], "numpy")
                                     else s["framework"], dtype=np.uint8))
    return None


def _as_tuple(x):
    """random.setstate wants nested tuples; a serialiser may hand lists back."""
    return tuple(_as_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def float_state_dict(model):
    """The state dict with floating tensors in fp32 (the exact weights, whatever AMP or .half() did)."""
    return collections.OrderedDict((k, v.detach().float() if v.dtype.is_floating_point else v.detach())
                                   for k, v in model.state_dict().items())


def best_fitness_value(v):
    """best_fitness as official code stores it (a 1-element numpy array) or as a number -> float."""
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0]) if v is not None else 0.0


def training_checkpoint(epoch, model, ema, optimizer, recorded_opt, best_fitness, extra):
    """The dict saved as last.pt/best.pt/epochN.pt: official keys first, then ``extra`` (this project's resume
    state) and the fp32 copies of model and EMA. ``model`` must be the bare model (no DDP wrapper);
    ``recorded_opt`` the options as official checkpoints hold them (run_options.official_opt)."""
    optimizer_state = complete_torch_groups(optimizer_state_for_backend(optimizer.state_dict(), "torch"))
    ckpt = {"epoch": epoch, "best_fitness": float(best_fitness), "model": Half(model), "ema": Half(ema.ema),
            "updates": ema.updates, "optimizer": optimizer_state, "opt": recorded_opt,
            "git": git_info(str(_ROOT)), "date": datetime.now().isoformat(),
            "model_float32": float_state_dict(model), "ema_float32": float_state_dict(ema.ema)}
    ckpt.update(extra)
    return ckpt


def stripped_checkpoint(model, source):
    """The final checkpoint as the official ``strip_optimizer`` leaves it: model = ``model`` (the EMA) in fp16;
    optimizer, ema, updates, best_fitness None; epoch -1; opt, git and date from ``source`` (a checkpoint dict).
    The model's parameters must already have requires_grad off (the EMA's always have)."""
    out = {k: source.get(k) for k in OFFICIAL_KEYS}
    out.update(epoch=-1, best_fitness=None, model=Half(model), ema=None, updates=None, optimizer=None)
    return out


def final_checkpoint(ema_model, recorded_opt):
    """The stripped checkpoint of the epoch training ends with, straight from memory: what strip_optimizer would
    make of that epoch's last.pt, without writing the full checkpoint and reading it back."""
    return stripped_checkpoint(ema_model, {"opt": recorded_opt, "git": git_info(str(_ROOT)),
                                           "date": datetime.now().isoformat()})


def log_stripped(f, saved_as=""):
    mb = os.path.getsize(saved_as or f) / 1e6
    LOGGER.info(f"Optimizer stripped from {f},{f' saved as {saved_as},' if saved_as else ''} {mb:.1f}MB")


def strip_optimizer(f="best.pt", s="", save=save_checkpoint, also=(), build_model=None):
    """Make a final checkpoint as the official trainer does: model = the EMA in fp16 with requires_grad off;
    optimizer, ema, updates, best_fitness None; epoch -1. This project's exact-resume keys are dropped.
    also: files that hold the same checkpoint as f (best.pt saved in the same epoch as last.pt), written from the
    same stripped contents instead of being read and stripped again. build_model(record, source): the model
    builder the stored model is rebuilt with (models.from_record.build_model; this package knows no model class)."""
    if build_model is None:
        raise TypeError("strip_optimizer needs build_model= (e.g. models.from_record.build_model)")
    level = LOGGER.level
    LOGGER.setLevel(logging.WARNING)  # rebuilding the model would print its layer table again
    try:
        x = load_checkpoint(f, map_location="cpu", build_models=build_model)
    finally:
        LOGGER.setLevel(level)
    model = x["ema"] if x.get("ema") is not None else x["model"]
    for p in model.parameters():
        p.requires_grad_(False)
    save(stripped_checkpoint(model, x), s or f, *also)
    for src in (f, *also):
        log_stripped(src, s)
