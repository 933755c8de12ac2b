"""Model and training helpers that users import from utils.torch_utils as in ultralytics: ModelEMA, smart_optimizer,
de_parallel, intersect_dicts, EarlyStopping, model_info, the smart_* helpers, profile, prune, RANK/LOCAL_RANK/
WORLD_SIZE, and select_device, which logs the official device line as it selects (utils/device_header.py; library code
selects silently through utils.backend).

Framework calls go through utils.backend (the multi-tensor EMA update and optimizer arguments are its function set);
nothing here branches on the backend.
"""
import contextlib
import math
import random
import time
from copy import deepcopy

import numpy as np

from utils import backend
from utils.backend import nn, torch
from utils.classifier_output import reshape_classifier_output, smartCrossEntropyLoss  # noqa: F401  (ultralytics)
from utils.device_header import select_and_log_device
from utils.distributed.context import DistContext
from utils.log import LOGGER, colorstr
from utils.model_stats import fuse_conv_and_bn, gflops_on, model_summary  # noqa: F401  (ultralytics import names)
from utils.tta import scale_img  # noqa: F401  (ultralytics import path; test-time augmentation owns it)


# ultralytics' process globals: -1, -1, 1 in a single process (DistContext reads the launcher's variables)
_CTX = DistContext.from_env()
LOCAL_RANK = _CTX.local_rank if _CTX.distributed else -1
RANK = _CTX.rank if _CTX.distributed else -1
WORLD_SIZE = _CTX.world_size


def select_device(device="", batch_size=0, newline=True):
    """ultralytics' select_device: the device for --device, the `YOLOv5 🚀 ...` line logged; a GPU that is not there
    is one line (DeviceError, a ValueError)."""
    return select_and_log_device(device, batch_size)


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


def copy_attr(a, b, include=(), exclude=()):
    """b's public attributes set on a (only those in include, when given; none in exclude)."""
    for k, v in b.__dict__.items():
        if (len(include) and k not in include) or k.startswith("_") or k in exclude:
            continue
        setattr(a, k, v)


def initialize_weights(model):
    """The official BN settings (eps 1e-3, momentum 0.03). Activations stay out of place: while training, autograd
    must keep the input of an in-place SiLU for its gradient and so clones it first, one extra kernel per Conv
    (57 per yolov5s forward) for no memory saved."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eps = 1e-3
            m.momentum = 0.03


def time_sync(device=None):
    """Wall-clock seconds after the device's queued work is done (so a timed block includes its GPU kernels)."""
    backend.wait_for_work(device)
    return time.time()


def smart_inference_mode(torch_1_9=True):
    """Decorator for inference functions: gradients off (both frameworks; see utils.backend.inference_mode)."""
    return backend.inference_mode()


def smart_amp_autocast(enabled, device="cuda"):
    """The autocast context for device: fp16 on CUDA when enabled (or the dtype given as enabled), bf16 on the CPU
    when enabled is a bfloat16 dtype; otherwise a context that does nothing."""
    dtype = enabled if not isinstance(enabled, bool) else None
    return backend.autocast(torch.device("cuda" if "cuda" in str(device) else "cpu"), enabled=bool(enabled),
                            dtype=dtype)


@contextlib.contextmanager
def torch_distributed_zero_first(local_rank):
    """Local rank 0 runs the block first, the node's other ranks after it (a dataset scan written once, then read)."""
    waits = backend.dist_ready() and local_rank not in (-1, 0)
    if waits:
        backend.dist_barrier()
    yield
    if backend.dist_ready() and local_rank == 0:
        backend.dist_barrier()


def smart_DDP(model):
    """model wrapped for DDP on this process's GPU (LOCAL_RANK), or on the CPU when it has no GPU."""
    device = next(model.parameters()).device
    return backend.ddp_wrap(model, device, max(LOCAL_RANK, 0))


def smart_resume(ckpt, optimizer, ema=None, weights="yolov5s.pt", epochs=300, resume=True):
    """(best_fitness, start_epoch, epochs) from a checkpoint, its optimizer and EMA state loaded (ultralytics' order
    and messages). A finished run cannot be resumed; a fine-tune past it trains `epochs` more."""
    best_fitness = 0.0
    start_epoch = ckpt["epoch"] + 1
    if ckpt.get("optimizer") is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
        best_fitness = ckpt["best_fitness"]
    if ema is not None and ckpt.get("ema") is not None:
        ema.ema.load_state_dict(ckpt["ema"].float().state_dict())
        ema.updates = ckpt["updates"]
    if resume:
        if start_epoch <= 0:
            raise ValueError(f"{weights} training to {epochs} epochs is finished, nothing to resume.\n"
                             f"Start a new training without --resume, i.e. 'python train.py --weights {weights}'")
        LOGGER.info(f"Resuming training from {weights} from epoch {start_epoch} to {epochs} total epochs")
    if epochs < start_epoch:
        LOGGER.info(f"{weights} has been trained for {ckpt['epoch']} epochs. Fine-tuning for {epochs} more epochs.")
        epochs += ckpt["epoch"]
    return best_fitness, start_epoch, epochs


def sparsity(model):
    """Fraction of the model's parameter values that are exactly zero."""
    total = zeros = 0
    for p in model.parameters():
        total += p.numel()
        zeros += int((p == 0).sum())
    return zeros / max(total, 1)


def prune(model, amount=0.3):
    """Zero the `amount` fraction of smallest-magnitude weights in every Conv2d (L1 unstructured, permanent)."""
    with backend.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                w = m.weight
                k = int(round(amount * w.numel()))
                if k:
                    flat = w.reshape(-1).clone()
                    flat[flat.abs().sort()[1][:k]] = 0  # the k smallest |w|
                    w.copy_(flat.view(w.shape))
    LOGGER.info(f"Model pruned to {sparsity(model):.3g} global sparsity")


def profile(input, ops, n=10, device=None):
    """Speed and size of each op on input (a tensor or a list of them): parameters, GFLOPs, forward and backward
    ms (mean of n runs), input and output shapes, one table row each; returns the rows as lists."""
    device = device or backend.select_device("")
    inputs = input if isinstance(input, list) else [input]
    ops = ops if isinstance(ops, list) else [ops]
    LOGGER.info(f"{'Params':>12s}{'GFLOPs':>12s}{'forward (ms)':>14s}{'backward (ms)':>14s}"
                f"{'input':>24s}{'output':>24s}")
    rows = []
    for x in inputs:
        x = x.to(device)
        x.requires_grad = True
        for m in ops:
            m = m.to(device) if hasattr(m, "to") else m
            params = sum(p.numel() for p in m.parameters()) if isinstance(m, nn.Module) else 0
            flops = gflops_on(m, tuple(x.shape)) if isinstance(m, nn.Module) else 0.0
            tf = tb = 0.0
            try:
                for _ in range(n):
                    t0 = time_sync(device)
                    y = m(x)
                    t1 = time_sync(device)
                    try:
                        (sum(yi.sum() for yi in y) if isinstance(y, list) else y).sum().backward()
                        tb += (time_sync(device) - t1) * 1000 / n
                    except RuntimeError:  # no gradient to take (an op without parameters on a leaf that needs none)
                        tb = float("nan")
                    tf += (t1 - t0) * 1000 / n
                s_in = tuple(x.shape)
                s_out = tuple(y.shape) if hasattr(y, "shape") else "list"
                LOGGER.info(f"{params:12}{flops:12.4g}{tf:14.4g}{tb:14.4g}{str(s_in):>24s}{str(s_out):>24s}")
                rows.append([params, flops, tf, tb, s_in, s_out])
            except Exception as e:  # one op that cannot run on this input is a row saying so, as ultralytics'
                LOGGER.info(str(e))
                rows.append(None)
    return rows


def model_info(model, detailed=False, verbose=True, imgsz=640):
    """Log the official summary line ('YOLOv5n summary: 214 layers, ... GFLOPs'), after a line per layer when
    detailed; nothing when not verbose (ultralytics' arguments). The counting lives in utils.model_stats (shared with
    models/yolo.py)."""
    if verbose:
        LOGGER.info(model_summary(model, img_size=imgsz, verbose=detailed))


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
        copy_attr(self.ema, model, include, exclude)


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
