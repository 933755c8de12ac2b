"""Deterministic mode without its NaN fill of new tensors (utils/backend/torch_backend.py: set_deterministic).

The fill only matters to a computation that reads memory it never wrote; the trainer's steps do not, so turning it
off must leave every number the same. The comparison runs the trainer's step on the CPU in both precisions it uses
(fp32, and bf16 autocast with channels_last input): with the fill, a read of unwritten memory would meet NaN and
the weights would differ (PyTorch only; OneFlow has no such switch)."""
import contextlib

import numpy as np
import pytest

from utils.backend import IS_TORCH, torch

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="PyTorch's deterministic mode")


@contextlib.contextmanager
def deterministic_mode(fill):
    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


def test_set_deterministic_keeps_deterministic_kernels_without_the_fill():
    from utils import backend
    with deterministic_mode(fill=True):
        backend.set_deterministic()
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.utils.deterministic.fill_uninitialized_memory is False


def _train_steps(bf16, steps=2, batch=4, img=96):
    """The weights and losses after `steps` trainer steps from a seeded yolov5n (forward, loss, backward, clipped
    SGD with momentum, EMA)."""
    from models.yolo import Model
    from utils.loss import ComputeLoss
    from utils.paths import ROOT
    from utils.torch_utils import ModelEMA, set_seed, smart_optimizer
    from utils.yaml_files import read_yaml
    set_seed(0)
    model = Model(str(ROOT / "models" / "yolov5n.yaml"), nc=3)
    model.hyp = read_yaml(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml")
    model.train()
    loss_fn = ComputeLoss(model)
    optimizer = smart_optimizer(model, "SGD", 0.01, 0.937, 5e-4)
    ema = ModelEMA(model)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        imgs = torch.rand(batch, 3, img, img, generator=g)
        if bf16:
            imgs = imgs.contiguous(memory_format=torch.channels_last)
        xy = torch.rand(12, 2, generator=g) * 0.6 + 0.2
        wh = torch.rand(12, 2, generator=g) * 0.3 + 0.05
        targets = torch.cat([torch.arange(12).view(-1, 1) % batch, torch.arange(12).view(-1, 1) % 3, xy, wh], 1).float()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, items = loss_fn(model(imgs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        optimizer.zero_grad()
        ema.update(model)
        losses.append(items.detach().float().numpy().copy())
    weights = [p.detach().float().numpy().copy() for p in ema.ema.state_dict().values() if p.dtype.is_floating_point]
    return losses, weights


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16_channels_last"])
def test_training_steps_are_the_same_with_and_without_the_fill(bf16):
    results = []
    for fill in (True, False):
        with deterministic_mode(fill):
            if fill:  # the fill is live: unwritten memory reads as NaN
                assert torch.isnan(torch.empty(64)).all()
            results.append(_train_steps(bf16))
    (losses_fill, weights_fill), (losses, weights) = results
    assert all(np.isfinite(x).all() for x in losses_fill + weights_fill)  # no NaN met anywhere with the fill on
    for a, b in zip(losses_fill + weights_fill, losses + weights):
        np.testing.assert_array_equal(a, b)
