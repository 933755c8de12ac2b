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


@pytest.mark.parametrize("fault", ["nan", "ctrl-c", "disk-full"])
def test_faults_leave_last_pt_untouched(fault, data, tmp_path, monkeypatch):
    """A fault in epoch 1 leaves last.pt exactly as epoch 0 wrote it, with no temporary files around."""
    import errno
    import train
    from utils.backend import torch
    import utils.engine.train_loop
    from utils.engine.errors import NonFiniteLossError, TrainingError
    from utils.engine.train_loop import TrainLoop
    seen = {}
    orig_step = TrainLoop.run_step
    orig_save = utils.engine.train_loop.save_checkpoint

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
    monkeypatch.setattr(utils.engine.train_loop, "save_checkpoint", save)
    expect = {"nan": (NonFiniteLossError, "epoch 1, iteration 0"), "ctrl-c": (KeyboardInterrupt, None),
              "disk-full": (TrainingError, "disk full")}[fault]
    with pytest.raises(expect[0], match=expect[1]):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=8, epochs=2, device="cpu",
                  workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True)
    last = tmp_path / "exp" / "weights" / "last.pt"
    assert seen and _sha(last) == seen["sha"]
    assert _load(last)["epoch"] == 0
    assert sorted(p.name for p in last.parent.iterdir()) == ["best.pt", "last.pt"]
