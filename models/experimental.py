"""Loading trained weights: ``attempt_load`` for official ultralytics .pt files and this project's checkpoints.

Official files pickle whole model objects; we never unpickle those classes. The checkpoint is read as plain data
(utils/checkpoint/), the model is rebuilt from its stored yaml, and the weights are copied in. That also makes
v6.x (``models.yolo.Model``) and v7.0 (``models.yolo.DetectionModel``) files, Focus/SPP-era configs and files
that kept ``model.24.anchor_grid`` load the same way.
"""
import logging
import math
from pathlib import Path

import numpy as np

from models.from_record import build_any_model
from utils.backend import nn, torch
from utils.checkpoint import load_any
from utils.checkpoint.kind import pick_model_record
from utils.downloads import attempt_download  # noqa: F401  (ultralytics users import it from here)
from utils.log import LOGGER


def mixconv_channels(c2, k, equal_ch=True):
    """Output channels per kernel size of a MixConv2d (arXiv 1907.09595): equal_ch splits c2 as evenly as whole
    numbers allow (c2 points spaced evenly over the groups, each counted where its floor falls); otherwise each group
    gets channels in inverse proportion to its kernel area, so every group holds about the same number of weights
    (least squares, rounded, of c_0 + ... + c_(n-1) = c2 and c_(g-1) k_(g-1)^2 = c_g k_g^2 for g = 1..n, the last
    equation wrapping round to c_0: ultralytics' system, so that the same YAML builds the same layers)."""
    n = len(k)
    if equal_ch:
        groups = np.floor(np.linspace(0, n - 1e-6, c2))
        return [int((groups == g).sum()) for g in range(n)]
    a = np.zeros((n + 1, n))
    a[0] = 1
    for g in range(1, n + 1):
        a[g, g - 1] += k[g - 1] ** 2
        a[g, g % n] -= k[g % n] ** 2
    b = np.zeros(n + 1)
    b[0] = c2
    return [int(c) for c in np.linalg.lstsq(a, b, rcond=None)[0].round()]


class MixConv2d(nn.Module):
    """Mixed depth-wise convolution: one grouped conv per kernel size in k, outputs concatenated, then BN and SiLU."""

    def __init__(self, c1, c2, k=(1, 3), s=1, equal_ch=True):
        super().__init__()
        widths = mixconv_channels(c2, k, equal_ch)
        self.m = nn.ModuleList([nn.Conv2d(c1, c, kk, s, kk // 2, groups=math.gcd(c1, c), bias=False)
                                for kk, c in zip(k, widths)])
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(torch.cat([m(x) for m in self.m], 1)))


class Ensemble(nn.ModuleList):
    """Several models run on the same input; their decoded detections are concatenated (NMS merges them)."""

    def forward(self, x, augment=False, profile=False, visualize=False):
        y = [m(x, augment=augment)[0] for m in self]
        return torch.cat(y, 1), None


def load_single(weights, device=None, inplace=True, fuse=True, build_model=build_any_model):
    """One checkpoint file -> float32 model in eval mode (fused when asked). build_model: the task's model builder
    (Task.build_model); by default any YOLOv5 task's model, as ultralytics' attempt_load loads whatever the file
    holds (load_model, behind val.py and detect.py, passes detection's, which names other tasks' files)."""
    w = Path(weights)
    ckpt = load_any(w)  # plain data for both formats: ModelRecord with a numpy state dict
    return model_from_record(pick_model_record(ckpt, w), w, device, inplace, fuse, build_model)


def model_from_record(record, source, device=None, inplace=True, fuse=True, build_model=build_any_model):
    """A stored model's record (utils.checkpoint.ModelRecord) -> the float32 model in eval mode that load_single
    gives for a file holding it (fused when asked); source: the file it is, or will be, read from."""
    level = LOGGER.level
    LOGGER.setLevel(logging.WARNING)  # rebuilt, not new: its layer table is not printed (ultralytics unpickles it)
    try:
        model = build_model(record, source=str(source))
    finally:
        LOGGER.setLevel(level)
    model.pt_path = str(source)  # where it came from, as ultralytics' attempt_load records it
    if device is not None:
        model = model.to(device)
    for m in model.modules():
        if hasattr(m, "inplace") and type(m).__name__ == "Detect":
            m.inplace = inplace
    model.requires_grad_(False)  # an inference model, as ultralytics loads it (its summary says 0 gradients)
    if fuse and hasattr(model, "fuse"):
        model = model.fuse()
    return model.eval()


def attempt_load(weights, device=None, inplace=True, fuse=True, build_model=build_any_model):
    """Load a path or a list of paths. One path gives the model; several give an :class:`Ensemble` carrying the
    largest stride, the first model's names and nc, as ultralytics does."""
    paths = weights if isinstance(weights, (list, tuple)) else [weights]
    models = [load_single(w, device=device, inplace=inplace, fuse=fuse, build_model=build_model) for w in paths]
    if len(models) == 1:
        return models[0]
    ensemble = Ensemble(models)
    ncs = {int(m.yaml["nc"]) for m in models}
    if len(ncs) > 1:
        raise ValueError(f"Ensemble models have different class counts {sorted(ncs)}: {paths}")
    for k in ("names", "nc", "yaml"):
        setattr(ensemble, k, getattr(models[0], k, None))
    ensemble.stride = models[max(range(len(models)), key=lambda i: float(models[i].stride.max()))].stride
    LOGGER.info(f"Ensemble created with {[str(p) for p in paths]}")
    return ensemble.eval()
