"""Faults: a non-finite loss, Ctrl-C or a full disk during epoch 1 leaves last.pt exactly as epoch 0 wrote
it (no partial or temporary files); the non-finite loss names its epoch and iteration."""
import hashlib
from pathlib import Path

import pytest

from tests.helpers.train_helpers import make_tiny_dataset


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=96)


def _load(path):
    from utils.checkpoint import load_checkpoint
    return load_checkpoint(path, tensors=False, build_models=False)


def _sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


# Ctrl-C and a full disk meet framework-free code (the loop's stop, the write module); the NaN loss, which the backend
# computes, holds the OneFlow side of the same run, the same epoch-0 last.pt and the same check of it
_FAULT_COVER = pytest.mark.oneflow_covered_by("tests/test_scripts/test_train_faults.py::test_faults_leave_last_pt_untouched")


@pytest.mark.parametrize("fault", ["nan", pytest.param("ctrl-c", marks=_FAULT_COVER),
                                   pytest.param("disk-full", marks=_FAULT_COVER)])
def test_faults_leave_last_pt_untouched(fault, data, tmp_path, monkeypatch):
    """A fault in epoch 1 leaves last.pt exactly as epoch 0 wrote it, with no temporary files around."""
    import errno
    import train
    from utils.backend import torch
    import utils.engine.hooks
    from utils.engine.errors import NonFiniteLossError, TrainingError
    from utils.engine.loop import TrainLoop
    seen = {}
    orig_step = TrainLoop.run_step
    orig_save = utils.engine.hooks.save_checkpoint

    def step(self, batch):
        if self.epoch == 1 and self.iter == 0:
            seen["sha"] = _sha(self.parts.run.last)
            if fault == "nan":
                self.parts.compute_loss = lambda p, t: (torch.tensor([float("nan")]),
                                                        torch.tensor([0.1, float("nan"), 0.]))
            elif fault == "ctrl-c":
                raise KeyboardInterrupt
        return orig_step(self, batch)

    def save(obj, path, *also):  # also: best.pt, written from the same encoding when the epoch improved
        if fault == "disk-full" and "sha" in seen:
            raise OSError(errno.ENOSPC, "No space left on device")
        return orig_save(obj, path, *also)

    monkeypatch.setattr(TrainLoop, "run_step", step)
    monkeypatch.setattr(utils.engine.hooks, "save_checkpoint", save)
    expect = {"nan": (NonFiniteLossError, "epoch 1, iteration 0"), "ctrl-c": (KeyboardInterrupt, None),
              "disk-full": (TrainingError, "disk full")}[fault]
    with pytest.raises(expect[0], match=expect[1]):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=8, epochs=2, device="cpu",
                  workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True)
    last = tmp_path / "exp" / "weights" / "last.pt"
    assert seen and _sha(last) == seen["sha"]
    assert _load(last)["epoch"] == 0
    assert sorted(p.name for p in last.parent.iterdir()) == ["best.pt", "last.pt"]


@pytest.mark.parametrize("epoch", [0, 1])
def test_non_finite_weights_are_never_saved(epoch, data, tmp_path, monkeypatch):
    """Weights that turned NaN (a NaN lr0 does it: the step after the last loss read poisons them) stop training at
    the save, in one message that says what is on disk; last.pt stays as the previous epoch wrote it (at epoch 0:
    none is written)."""
    import train
    from utils import backend
    from utils.engine.errors import NonFiniteWeightsError
    from utils.engine.loop import TrainLoop
    seen = {}
    orig_step = TrainLoop.run_step

    def step(self, batch):
        out = orig_step(self, batch)
        if self.epoch == epoch and self.iter == self.nb - 1:  # after the epoch's last loss was read
            seen["sha"] = _sha(self.parts.run.last) if self.parts.run.last.exists() else None
            with backend.no_grad():
                next(self.parts.model.parameters()).view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(TrainLoop, "run_step", step)
    on_disk = "no checkpoint was written yet" if epoch == 0 else "last.pt holds epoch 0"
    with pytest.raises(NonFiniteWeightsError, match=f"Epoch {epoch}: .*first in model: model.0.conv.weight.*{on_disk}"):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=8, epochs=2, device="cpu",
                  workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True, noval=True)
    weights = tmp_path / "exp" / "weights"
    if epoch == 0:
        assert seen["sha"] is None and list(weights.iterdir()) == []
    else:
        assert _sha(weights / "last.pt") == seen["sha"] and _load(weights / "last.pt")["epoch"] == 0
        assert sorted(p.name for p in weights.iterdir()) == ["best.pt", "last.pt"]


def test_weight_check_names_a_bad_ema_tensor_and_finds_inf():
    from tests.helpers.engine_helpers import tiny_parts
    from utils import backend
    from utils.engine.errors import NonFiniteWeightsError
    from utils.engine.finite_weights import check_weights_before_save
    parts = tiny_parts()
    check_weights_before_save(parts, 3)  # finite: nothing raised
    name, t = list(parts.ema.ema.state_dict().items())[-1]
    with backend.no_grad():
        t.view(-1)[0] = float("inf")
    with pytest.raises(NonFiniteWeightsError, match=f"Epoch 3: .*first in ema: {name}.*nothing was saved"):
        check_weights_before_save(parts, 3)
    nan = backend.torch.tensor([float("nan")])
    assert backend.all_finite([backend.torch.ones(2)]) and not backend.all_finite([backend.torch.ones(2), nan])


def test_non_finite_loss_at_epoch_0_says_no_checkpoint_exists(data, tmp_path, monkeypatch):
    import train
    from utils import backend
    from utils.engine.errors import NonFiniteLossError
    from utils.engine.loop import TrainLoop
    orig_step = TrainLoop.run_step

    def step(self, batch):
        self.parts.compute_loss = lambda p, t: (backend.torch.tensor([float("nan")]),
                                                backend.torch.tensor([0.1, float("nan"), 0.]))
        return orig_step(self, batch)

    monkeypatch.setattr(TrainLoop, "run_step", step)
    with pytest.raises(NonFiniteLossError, match="epoch 0, iteration 0 .*no checkpoint was written yet") as e:
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=8, epochs=2, device="cpu",
                  workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True, noval=True)
    assert "last.pt" not in str(e.value)
