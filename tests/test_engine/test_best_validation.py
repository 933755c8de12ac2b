"""The last epoch is validated on the model best.pt will hold (utils/engine/best_validation.py): that model is the one
reading best.pt back gives, bit for bit, and when the last epoch is written to best.pt its validation is reported as
best.pt's and not run again; otherwise best.pt is validated after training as before."""
import logging

import numpy as np
import pytest

from tests.helpers.engine_helpers import fake_loss, tiny_parts
from utils import backend
from utils.backend import torch
from utils.engine.loop import TrainLoop
from utils.engine.parts import RunFolder, RunOptions

SIZE = 64


def _perturbed(model, seed=0):
    """model with every float parameter and BatchNorm statistic moved off the fp16 grid, so a missing or different
    rounding shows."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for k, v in model.state_dict().items():
            if v.dtype == torch.float32 and v.numel() and not k.endswith("anchors"):
                noise = rng.normal(0, 0.05, tuple(v.shape)).astype(np.float32)
                if k.endswith("running_var"):
                    noise = np.abs(noise)
                v.copy_(v + backend.from_numpy(noise))
    return model


def _model_and_task(kind):
    from models.yolo import DetectionModel
    if kind == "detect":
        from utils.tasks.detect import DETECT
        return DetectionModel("yolov5n.yaml", nc=2), DETECT
    from models.tasks import SegmentationModel
    from utils.tasks.segment import SEGMENT
    return SegmentationModel("yolov5n-seg.yaml", nc=2), SEGMENT


def _numpy_state(model):
    return {k: backend.to_numpy(v).copy() for k, v in model.state_dict().items()}


def _first_output(out):
    while isinstance(out, (list, tuple)):
        out = out[0]
    return backend.to_numpy(out)


@pytest.mark.parametrize("kind", ["detect", "segment"])
def test_the_model_validated_is_the_one_best_pt_gives(kind, tmp_path):
    """Equal state dicts and equal outputs, to the bit, between as_best_pt_holds(EMA) and attempt_load of the best.pt
    the last epoch writes from that EMA (final_checkpoint, the stripped fp16 form); and not the fp32 EMA's weights."""
    from models.experimental import attempt_load
    from models.yolo import inference_copy
    from utils.checkpoint import save_checkpoint
    from utils.checkpoint.training import final_checkpoint
    from utils.engine.best_validation import as_best_pt_holds
    from utils.torch_utils import ModelEMA
    model, task = _model_and_task(kind)
    ema = ModelEMA(_perturbed(model))
    best = tmp_path / "best.pt"
    save_checkpoint(final_checkpoint(ema.ema, {"epochs": 1}), best)
    held = as_best_pt_holds(ema.ema, backend.device("cpu"), task.build_model, best)
    loaded = attempt_load(best, device="cpu", fuse=True, build_model=task.build_model)
    a, b = _numpy_state(held), _numpy_state(loaded)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    x = backend.from_numpy(np.random.default_rng(1).random((2, 3, SIZE, SIZE), dtype=np.float32))
    with torch.no_grad():
        y_held, y_loaded, y_ema = (_first_output(m(x)) for m in (held, loaded, inference_copy(ema.ema)))
    assert np.array_equal(y_held, y_loaded)
    assert not np.array_equal(y_held, y_ema)  # the fp32 EMA's own figures would be another model's
    assert not held.training and not any(p.requires_grad for p in held.parameters())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in held.modules())  # folded, as attempt_load(fuse)


def _list_loss(pred, targets):
    """fake_loss over a detection model's training outputs (one map per level)."""
    return fake_loss(torch.cat([p.reshape(p.shape[0], -1) for p in pred], 1), targets)


class FakeValidation:
    """Stands for hooks.validate: the results whose fitness (0.1 mAP50 + 0.9 mAP50-95) is the epoch's entry of
    `fitness`, or `best_pt`'s for the validation of a model read from best.pt; records every call."""

    def __init__(self, fitness, best_pt=0.5):
        self.fitness, self.best_pt, self.calls = list(fitness), best_pt, []

    def __call__(self, parts, model, plots=False, **kw):
        from_file = hasattr(model, "pt_path") and "table" not in kw  # attempt_load marks the models it reads
        self.calls.append({"model": model, "plots": plots, "from_file": from_file, **kw})
        f = self.best_pt if from_file else self.fitness.pop(0)
        if "table" in kw:
            kw["table"][:] = ["HEADER-ROW", f"all-row {f}", "class-row a", "class-row b"]
        return (0.0, 0.0, f, f, 0.0, 0.0, 0.0), np.zeros(2)


def _run(tmp_path, monkeypatch, fitness, noplots=False, epochs=2):
    import utils.engine.hooks as hooks
    from models.yolo import DetectionModel
    fake = FakeValidation(fitness)
    monkeypatch.setattr(hooks, "validate", fake)
    parts = tiny_parts(epochs=epochs, nb=1, size=SIZE, loss=_list_loss, model=DetectionModel("yolov5n.yaml", nc=2),
                       run=RunFolder(save_dir=tmp_path), options=RunOptions(noplots=noplots))
    parts.run.weights.mkdir(parents=True)
    loop = TrainLoop(parts, [hooks.ValidationHook(), hooks.CheckpointHook(), hooks.FinishHook()])
    loop.train()
    return fake, loop


@pytest.mark.parametrize("noplots", [False, True], ids=["plots", "noplots"])
def test_a_last_epoch_that_is_best_is_best_pts_validation(tmp_path, monkeypatch, caplog, noplots):
    with caplog.at_level(logging.INFO, logger="yolov5"):
        fake, loop = _run(tmp_path, monkeypatch, [0.2, 0.3], noplots=noplots)
    assert len(fake.calls) == 2  # no third pass over the validation set
    last = fake.calls[-1]
    assert "table" in last and last["plots"] is not noplots  # best.pt's plots, from the last epoch's pass
    assert loop.record.saved_in_epoch[loop.parts.run.best] == 1 and loop.record.results[2] == 0.3
    text = caplog.text
    assert f"Validating {loop.parts.run.best}..." in text and "summary: 157 layers" in text  # folded, as fuse says
    report = text[text.index("Validating"):]
    assert [r for r in ("HEADER-ROW", "all-row 0.3", "class-row a", "class-row b") if r in report] == \
        ["HEADER-ROW", "all-row 0.3", "class-row a", "class-row b"]  # the per-class rows, printed only now
    assert "class-row a" not in text[:text.index("Validating")]


def test_an_earlier_best_epoch_is_validated_from_best_pt(tmp_path, monkeypatch, caplog):
    """best.pt holds epoch 0: the last epoch's pass (on the model its best.pt would have been) is not best.pt's, so
    best.pt is read back and validated with plots and per-class rows, and its figures are the run's results."""
    with caplog.at_level(logging.INFO, logger="yolov5"):
        fake, loop = _run(tmp_path, monkeypatch, [0.3, 0.2])
    assert len(fake.calls) == 3
    final = fake.calls[-1]
    assert final["from_file"] and final["verbose"] and final["plots"]
    assert final["model"].pt_path == str(loop.parts.run.best)
    assert loop.record.saved_in_epoch[loop.parts.run.best] == 0 and loop.record.results[2] == 0.5
    assert "class-row a" not in caplog.text  # the last epoch's per-class rows were not best.pt's: never printed


def test_only_the_last_epoch_runs_on_best_pts_model(tmp_path, monkeypatch):
    """Earlier epochs validate a folded copy of the fp32 EMA, without plots or a kept table."""
    fake, _ = _run(tmp_path, monkeypatch, [0.1, 0.2, 0.3], epochs=3)
    assert ["table" in c for c in fake.calls] == [False, False, True]
    assert [c["plots"] for c in fake.calls] == [False, False, True]
