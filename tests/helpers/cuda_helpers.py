"""Helpers for the CUDA test tier (tests marked `cuda`, selected with `pytest -m cuda`).

The tier runs on a GPU machine through benchmarks/gpu_kit.py. Its logic is also checked on the CPU: with
GPU_KIT_TEST_DEVICE=cpu (set by the kit's --device cpu dry run; read by the tests alone) the tests whose checks make
sense on the CPU run there with the device swapped, so that a broken test is found before time on a GPU machine is spent
on it. Without a GPU and without that variable every test of the tier skips, naming the reason.
"""
import contextlib
import io
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SWAP_ENV = "GPU_KIT_TEST_DEVICE"


def swapped_to_cpu():
    """True when the tier's logic is being checked on the CPU (no GPU here, GPU_KIT_TEST_DEVICE=cpu)."""
    from utils.backend import cuda_available
    return not cuda_available() and os.environ.get(SWAP_ENV, "").strip().lower() == "cpu"


def tier_device(cpu_ok=True):
    """cuda:0 on a GPU; the CPU when swapped and the test's checks hold there (cpu_ok); else the test skips."""
    from utils.backend import cuda_available, torch
    if cuda_available():
        return torch.device("cuda:0")
    if cpu_ok and swapped_to_cpu():
        return torch.device("cpu")
    why = "" if cpu_ok else " (this check has no CPU counterpart)"
    pytest.skip(f"needs a CUDA GPU{why}; {SWAP_ENV}=cpu runs the tier's CPU-checkable tests on the CPU")


def build_model(cfg="yolov5n.yaml", device="cpu", seed=0, img=64):
    """A detection model set up as train.py sets it (hyp scaled to the model and image size, gr=1), on device."""
    import yaml
    from models.yolo import DetectionModel
    from utils import backend
    from utils.engine.hyp import scale_hyp
    backend.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):
        model = DetectionModel(str(ROOT / "models" / cfg)).to(device)
    det = model.model[-1]
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        model.hyp = scale_hyp(yaml.safe_load(f), det.nl, det.nc, img)
    model.gr = 1.0
    return model


def synthetic_batches(n, bs, img, device, seed=0, per_image=6, nc=80):
    """n (uint8 images, targets [img, cls, x, y, w, h]) pairs drawn from a fixed generator: the same on every device."""
    from utils.backend import torch
    g = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        imgs = torch.tensor(g.integers(0, 256, (bs, 3, img, img), dtype=np.uint8)).to(device)
        k = bs * per_image
        wh = g.uniform(0.05, 0.5, (k, 2))
        xy = g.uniform(0.0, 1.0, (k, 2)) * (1 - wh) + wh / 2
        t = np.concatenate([np.repeat(np.arange(bs), per_image)[:, None], g.integers(0, nc, (k, 1)), xy, wh], 1)
        out.append((imgs, torch.tensor(t.astype(np.float32)).to(device)))
    return out


def train_steps(device, flags, steps, bs=4, img=64, lr=0.01, dtype=None, scaler=None, seed=0):
    """`steps` training steps the way TrainLoop.run_step takes them (autocast, loss, scaled backward, unscale, clip
    at 10, optimizer, EMA), with the seed's two flags on or off. Returns (losses as floats, model, ema)."""
    from utils import backend
    from utils.loss import ComputeLoss
    from utils.torch_utils import ModelEMA, smart_optimizer
    backend.set_deterministic()  # as train.py does: cuDNN's atomics would make two runs of one path differ too
    model = build_model(device=device, seed=seed, img=img).train()
    loss_fn = ComputeLoss(model, fused_iou=flags)
    optimizer = smart_optimizer(model, "SGD", lr=lr, momentum=0.937, decay=5e-4, fused=flags)
    ema = ModelEMA(model, fused=flags)
    if scaler is None:  # loss scaling for fp16 only: bf16 keeps fp32's exponent range (utils/precision.py)
        scaler = backend.grad_scaler(device, enabled=dtype is not None and dtype == backend.torch.float16)
    losses = []
    pool = synthetic_batches(2, bs, img, device, seed=seed)  # two batches in turn: learnable in 50 steps
    for i in range(steps):
        imgs, targets = pool[i % 2]
        with backend.autocast(device, enabled=dtype is not None, dtype=dtype):
            pred = model(imgs.float() / 255)
        loss, _ = loss_fn([p.float() for p in pred], targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        backend.clip_grad_norm_(model.parameters(), 10.0, fused=flags)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        ema.update(model)
        losses.append(float(loss.detach()))
    return losses, model, ema


def state_arrays(module):
    return {k: v.detach().float().cpu().numpy() for k, v in module.state_dict().items() if v.dtype.is_floating_point}


def relative_difference(a, b):
    """||a - b|| / ||b|| over every floating tensor of two state dicts (numpy arrays), as one figure."""
    num = sum(float(((a[k] - b[k]).astype(np.float64) ** 2).sum()) for k in b)
    den = sum(float((b[k].astype(np.float64) ** 2).sum()) for k in b)
    return (num / max(den, 1e-30)) ** 0.5


def kit_dataset(coco128_dir, tmp, n=None):
    """A data YAML over coco128's images (the first n as symlinks when n is given), train = val."""
    import json
    names = json.dumps({i: str(i) for i in range(80)})
    if n is None:
        y = Path(tmp) / "coco128.yaml"
        y.write_text(f"path: {coco128_dir}\ntrain: images/train2017\nval: images/train2017\nnames: {names}\n")
        return y
    d = Path(tmp) / f"c{n}"
    for sub in ("images", "labels"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    for im in sorted((Path(coco128_dir) / "images" / "train2017").glob("*.jpg"))[:n]:
        (d / "images" / im.name).symlink_to(im)
        lb = Path(coco128_dir) / "labels" / "train2017" / f"{im.stem}.txt"
        if lb.exists():
            (d / "labels" / lb.name).symlink_to(lb)
    y = d / "data.yaml"
    y.write_text(f"path: {d}\ntrain: images\nval: images\nnames: {names}\n")
    return y
