"""LossReadback: the losses are read back every N steps (and at an epoch's end), the running mean is the mean of
every step, and a non-finite loss is reported at the exact iteration it appeared, even when read later."""
import math

import numpy as np
import pytest

from utils.backend import device, torch
from utils.loss_readback import LossReadback, default_interval


def _run(rb, losses, nb=None):
    """Feed per-step [box, obj, cls]; returns [(step, read result)] for the steps that read back."""
    nb = nb or len(losses)
    reads = []
    for i, items in enumerate(losses):
        t = torch.tensor(np.asarray(items, dtype=np.float32))
        rb.add(i, t, t.sum().view(1) * 4)
        if rb.due(i, nb):
            reads.append((i, rb.read()))
    return reads


def test_reads_every_interval_and_at_the_end_with_the_exact_mean():
    rng = np.random.default_rng(0)
    losses = rng.uniform(0, 1, (10, 3))
    rb = LossReadback(device("cpu"), interval=4)
    reads = _run(rb, losses)
    assert [i for i, _ in reads] == [3, 7, 9] and all(r is None for _, r in reads)
    np.testing.assert_allclose(rb.mean, losses.astype(np.float32).astype(np.float64).mean(0), rtol=1e-12)
    rb.reset()
    assert rb.mean is None and rb.steps == 0
    _run(rb, losses[:2])
    np.testing.assert_allclose(rb.mean, losses[:2].astype(np.float32).mean(0), rtol=1e-6)


@pytest.mark.parametrize("bad", [[0.1, float("nan"), 0.2], [float("inf"), 0.1, 0.1]])
def test_non_finite_is_reported_at_its_own_step(bad):
    losses = [[0.5, 0.4, 0.3]] * 10
    losses[5] = bad
    losses[6] = [float("nan")] * 3  # a later bad step does not replace the first
    rb = LossReadback(device("cpu"), interval=4)
    reads = _run(rb, losses)
    assert reads[0] == (3, None)
    step, items = reads[1][1]
    assert reads[1][0] == 7 and step == 5
    assert [x if math.isfinite(x) else str(x) for x in items] == [x if math.isfinite(x) else str(x) for x in
                                                                   [round(v, 4) for v in bad]]


def test_non_finite_total_loss_alone_is_caught():
    rb = LossReadback(device("cpu"), interval=1)
    rb.add(0, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([float("inf")]))
    assert rb.read() == (0, [0.1, 0.2, 0.3])


def test_interval_from_the_environment(monkeypatch):
    from utils.errors import UserError
    monkeypatch.delenv("YOLO_LOSS_READBACK", raising=False)
    assert default_interval(device("cpu")) == 1  # nothing runs ahead of the host on the CPU
    monkeypatch.setenv("YOLO_LOSS_READBACK", "25")
    assert default_interval(device("cpu")) == 25 and LossReadback(device("cpu")).interval == 25
    for bad in ("0", "ten", "-3"):
        monkeypatch.setenv("YOLO_LOSS_READBACK", bad)
        with pytest.raises(UserError, match="YOLO_LOSS_READBACK"):
            default_interval(device("cpu"))


def test_training_stops_at_the_exact_iteration_when_reading_every_third_step(tmp_path, monkeypatch):
    """train.py with YOLO_LOSS_READBACK=3: a NaN loss at epoch 1, iteration 1 is read back at iteration 2 and
    stops training naming iteration 1; last.pt stays as epoch 0 wrote it."""
    import hashlib
    import train
    from tests.helpers.train_helpers import make_tiny_dataset
    from utils.engine.errors import NonFiniteLossError
    from utils.engine.loop import TrainLoop
    data = make_tiny_dataset(tmp_path / "data", n_train=8, n_val=2, size=64)
    monkeypatch.setenv("YOLO_LOSS_READBACK", "3")
    seen, orig = {}, TrainLoop.run_step

    def step(self, batch):
        if self.epoch == 1 and self.iter == 1:
            seen["sha"] = hashlib.sha256(self.parts.run.last.read_bytes()).hexdigest()
            real = self.parts.compute_loss
            self.parts.compute_loss = lambda p, t: tuple(x * float("nan") for x in real(p, t))
        out = orig(self, batch)
        seen.setdefault("steps", []).append((self.epoch, self.iter, self.losses_read is not None))
        return out

    monkeypatch.setattr(TrainLoop, "run_step", step)
    with pytest.raises(NonFiniteLossError, match="epoch 1, iteration 1 "):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=2, epochs=2, device="cpu",
                  workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True, noval=True)
    # epoch 0 (4 steps) read at iterations 2 and 3 (its last); epoch 1 got to iteration 2, its first read
    assert [s for s in seen["steps"] if s[2]] == [(0, 2, True), (0, 3, True)]
    assert seen["steps"][-1] == (1, 1, False)
    last = tmp_path / "exp" / "weights" / "last.pt"
    assert hashlib.sha256(last.read_bytes()).hexdigest() == seen["sha"]
