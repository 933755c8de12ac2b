"""Model and training helpers that users import from utils.torch_utils as in ultralytics: ModelEMA, smart_optimizer,
de_parallel, intersect_dicts, EarlyStopping, model_info, select_device (re-exported from utils.backend).

Framework calls go through utils.backend (the multi-tensor EMA update and optimizer arguments are its function set);
nothing here branches on the backend.
"""
import math
import random
from copy import deepcopy

import numpy as np

from utils import backend
from utils.backend import nn, torch, select_device  # noqa: F401  (select_device re-exported for ultralytics users)
from utils.log import LOGGER, colorstr
from utils.model_stats import count_flops, fuse_conv_and_bn, model_summary  # noqa: F401  (ultralytics import names)
from utils.tta import scale_img  # noqa: F401  (ultralytics import path; test-time augmentation owns it)


# ----------------------------------------------------------------------------------------------------------------
# Small helpers
def is_parallel(model):
    return type(model).__name__ in ("DataParallel", "DistributedDataParallel")


def de_parallel(model):
    """The bare model inside a DP/DDP wrapper (state dicts and attributes live there)."""
    return model.module if is_parallel(model) else model


def intersect_dicts(da, db, exclude=()):
    """Entries of da whose key is in db with the same shape, skipping keys that contain any of `exclude`
    (used to transfer pretrained weights into a model with another class count or anchors)."""
    return {k: v for k, v in da.items()
            if k in db and all(x not in k for x in exclude) and tuple(v.shape) == tuple(db[k].shape)}


def round_to_half(model):
    """Every floating parameter and buffer of model rounded to the nearest fp16 value, kept in its own dtype and
    tensor (in place: an optimizer made earlier still holds the same parameters). The official trainers do this to
    a new run's model after AutoAnchor (`model.half().float()`), so a run starts from the same weights there and
    here; a resumed run keeps its exact weights."""
    with backend.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.dtype.is_floating_point:
                t.copy_(t.half().to(t.dtype))


def is_norm(module):
    """BatchNorm, SyncBatchNorm, GroupNorm, LayerNorm, InstanceNorm...: found by type name so it holds for both
    frameworks' classes (their norm weights get no weight decay)."""
    return any("Norm" in c.__name__ for c in type(module).__mro__ if c.__module__.split(".")[0] != "builtins")


def model_info(model, verbose=False, imgsz=640):
    """Log the official summary line ('YOLOv5n summary: 214 layers, ... GFLOPs'); the counting lives in
    utils.model_stats (shared with models/yolo.py)."""
    LOGGER.info(model_summary(model, img_size=imgsz, verbose=verbose))


# ----------------------------------------------------------------------------------------------------------------
# Optimizer
def param_groups_by_name(model):
    """Three lists, found by parameter name and module type (never by position):
    weights with decay (conv/linear weights), norm weights (no decay), biases (no decay)."""
    decay, norm, bias = [], [], []
    for module_name, m in model.named_modules():
        for p_name, p in m.named_parameters(recurse=False):
            if p_name == "bias":
                bias.append(p)
            elif p_name == "weight" and is_norm(m):
                norm.append(p)
            else:
                decay.append(p)
    return decay, norm, bias


def smart_optimizer(model, name="Adam", lr=0.001, momentum=0.9, decay=1e-5, fused=False):
    """SGD/Adam/AdamW with the official three parameter groups, in the official order (lr0, lr1, lr2 in results.csv):
    group 0 biases (no decay; the warmup_bias_lr group), group 1 weights with decay, group 2 norm weights (no decay).
    All groups are passed to the constructor at once: OneFlow's fused SGD crashes on groups added later."""
    decay_w, norm_w, biases = param_groups_by_name(model)
    device = next(model.parameters()).device
    groups = [{"params": biases, "weight_decay": 0.0},
              {"params": decay_w, "weight_decay": decay},
              {"params": norm_w, "weight_decay": 0.0}]
    # fused/foreach step where the framework has one ('RMSProp' is official classify/train.py's spelling)
    kw = backend.optimizer_kwargs("RMSprop" if name == "RMSProp" else name, fused, device)
    if name == "Adam":
        opt = backend.optimizer_class("Adam")(groups, lr=lr, betas=(momentum, 0.999), **kw)
    elif name == "AdamW":
        opt = backend.optimizer_class("AdamW")(groups, lr=lr, betas=(momentum, 0.999), weight_decay=0.0, **kw)
    elif name == "SGD":
        opt = backend.optimizer_class("SGD")(groups, lr=lr, momentum=momentum, nesterov=True, **kw)
    elif name == "RMSProp":  # classify/train.py's fourth choice
        opt = backend.optimizer_class("RMSprop")(groups, lr=lr, momentum=momentum, **kw)  # OneFlow's own: no momentum
    else:
        raise NotImplementedError(f"Optimizer {name} not implemented: use SGD, Adam or AdamW (classification: or "
                                  "RMSProp).")
    LOGGER.info(f"{colorstr('optimizer:')} {name}(lr={lr}) with parameter groups "
                f"{len(norm_w)} weight(decay=0.0), {len(decay_w)} weight(decay={decay}), {len(biases)} bias")
    return opt


# ----------------------------------------------------------------------------------------------------------------
# EMA
class ModelEMA:
    """Exponential moving average of the model's state dict (weights and BN buffers), with the official ramp:
    d = decay * (1 - exp(-updates / tau)), so early updates follow the model closely."""

    def __init__(self, model, decay=0.9999, tau=2000, updates=0, fused=False):
        self.ema = deepcopy(de_parallel(model)).eval()
        self.updates = updates
        self.decay_max, self.tau = decay, tau
        self.fused = fused
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def decay(self, updates):
        return self.decay_max * (1 - math.exp(-updates / self.tau))

    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = de_parallel(model).state_dict()
        with backend.no_grad():
            pairs = [(v, msd[k]) for k, v in self.ema.state_dict().items() if v.dtype.is_floating_point]
            backend.ema_update_([e for e, _ in pairs], [m for _, m in pairs], d, self.fused)  # multi-tensor if fused

    def update_attr(self, model, include=(), exclude=("process_group", "reducer")):
        """Copy plain attributes (nc, hyp, names, stride...) from the model to the EMA."""
        for k, v in model.__dict__.items():
            if (len(include) and k not in include) or k.startswith("_") or k in exclude:
                continue
            setattr(self.ema, k, v)


# ----------------------------------------------------------------------------------------------------------------
# Early stopping
class EarlyStopping:
    """Stop when fitness has not improved for `patience` epochs (patience 0 disables)."""

    def __init__(self, patience=30):
        self.best_fitness = 0.0
        self.best_epoch = 0
        self.patience = patience or float("inf")
        self.possible_stop = False

    def __call__(self, epoch, fitness):
        if fitness >= self.best_fitness:  # >= so that a run stuck at 0 fitness early on still counts as improving
            self.best_epoch = epoch
            self.best_fitness = fitness
        delta = epoch - self.best_epoch
        self.possible_stop = delta >= (self.patience - 1)
        stop = delta >= self.patience
        if stop:
            LOGGER.info(f"Stopping training early as no improvement observed in last {self.patience} epochs. "
                        f"Best results observed at epoch {self.best_epoch}, best model saved as best.pt.\n"
                        f"To update EarlyStopping(patience={self.patience}) pass a new patience value, "
                        f"i.e. `python train.py --patience 300` or use `--patience 0` to disable EarlyStopping.")
        return stop


def set_seed(seed=0, deterministic=False):
    """Seed python, numpy and the framework (the per-worker loader seeds derive from the same value)."""
    random.seed(seed)
    np.random.seed(seed)
    backend.manual_seed(seed)
    if deterministic:
        backend.set_deterministic()
