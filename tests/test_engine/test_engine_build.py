"""utils/engine/build.py in-process on a tiny dataset (64 px, 8 images): the parts of a new run (EMA copied after
AutoAnchor, optimizer groups and weight decay, schedule, scaled loss gains, run folder files), and of a resumed run
(state, optimizer and EMA from last.pt, RNG streams restored last)."""
import random

import numpy as np
import pytest
import yaml

from tests.helpers.door_guard import guard_steps
from tests.helpers.train_helpers import make_tiny_dataset
from utils import backend
from utils.distributed import DistContext
from utils.engine.parts import FastPaths, RunOptions, TrainingState
from utils.loss import LossHyp


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=64)


def _opt(data, save_dir, *args):
    import train
    opt = train.parse_opt(True, args=["--data", str(data), "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64",
                                      "--epochs", "2", "--device", "cpu", "--workers", "0", "--noplots", *args])
    opt.save_dir = str(save_dir)
    return opt


def _floats(model):
    return {k: backend.to_numpy(v).copy() for k, v in model.state_dict().items() if v.dtype.is_floating_point}


def _array(x):
    return backend.to_numpy(x) if hasattr(x, "detach") else np.asarray(x)


def test_build_a_new_run(data, tmp_path, monkeypatch):
    import utils.engine.build as build
    import utils.tasks.detect
    from utils.engine.hyp import load_hyp

    unrounded_anchors = []

    def autoanchor_replacing_anchors(dataset, model, thr, imgsz):  # stands in for AutoAnchor finding better anchors
        with backend.no_grad():
            model.model[-1].anchors.mul_(1.5)
            model.model[-1].anchors.add_(1e-4)  # a value fp16 cannot hold
        unrounded_anchors.append(backend.to_numpy(model.model[-1].anchors).copy())
    monkeypatch.setattr(utils.tasks.detect, "check_anchors", autoanchor_replacing_anchors)  # the task's head check
    opt = _opt(data, tmp_path / "exp", "--batch-size", "24")
    called = []
    guard_steps(monkeypatch, called)  # no step sees the namespace: it gets the frozen DetectorInputs
    parts = build.build_training(opt, opt.hyp, backend.device("cpu"), DistContext())
    assert called == ["hyperparameters", "settings_files", "read_data", "start_model", "input_size", "loaders", "loss"]
    hyp = load_hyp(opt.hyp)

    model, ema = _floats(parts.model), _floats(parts.ema.ema)
    assert model.keys() == ema.keys()
    for k in model:  # the EMA starts from the model as AutoAnchor left it
        np.testing.assert_array_equal(ema[k], model[k], err_msg=k)
    # then rounded to fp16 values, as the official trainer's model.half().float(): anchors, weights and BN statistics
    rounded = {k: v.astype(np.float16).astype(v.dtype) for k, v in model.items()}
    assert all(np.array_equal(rounded[k], model[k]) for k in model)
    (found,) = unrounded_anchors  # what AutoAnchor found, rounded like everything else
    np.testing.assert_array_equal(model["model.24.anchors"], found.astype(np.float16).astype(np.float32))
    assert not np.array_equal(model["model.24.anchors"], found)
    groups = parts.optimizer.param_groups
    assert [g["lr"] for g in groups] == [g["initial_lr"] for g in groups] == [hyp["lr0"]] * 3  # lf(0) = 1
    # batch 24 accumulates round(64 / 24) = 3 batches: weight decay scaled by 24 * 3 / 64
    assert [g["weight_decay"] for g in groups] == [0.0, pytest.approx(hyp["weight_decay"] * 1.125), 0.0]
    s = parts.schedule
    assert (s.warmup_iters, s.base_lrs, s.batch_size, s.epochs) == (100, (hyp["lr0"],) * 3, 24, 2)
    assert s.lagging_lr_step  # official train.py's scheduler.last_epoch = start_epoch - 1
    m = parts.model
    assert m.hyp["box"] == pytest.approx(hyp["box"]) and m.hyp["cls"] == pytest.approx(hyp["cls"] * 2 / 80)
    assert m.hyp["obj"] == pytest.approx(hyp["obj"] * (64 / 640) ** 2) and m.nc == 2
    assert parts.hyp is m.hyp and parts.opt_hyp == hyp
    # the loss and the hooks get typed values, not the model's attributes or the whole opt
    assert parts.compute_loss.hyp == LossHyp.from_dict(parts.hyp) and parts.recorded_opt["hyp"] == hyp
    assert parts.fast == FastPaths(multi_tensor=bool(opt.multi_tensor_optimizer), fused_iou=bool(opt.bbox_iou_optim))
    assert parts.options == RunOptions.from_opt(opt) and parts.options.patience == opt.patience
    assert parts.state == TrainingState() and parts.val_loader is not None and parts.loggers is not None
    assert yaml.safe_load((tmp_path / "exp" / "hyp.yaml").read_text()) == hyp  # as loaded, not scaled
    assert yaml.safe_load((tmp_path / "exp" / "opt.yaml").read_text())["hyp"] == hyp
    assert parts.run.last == tmp_path / "exp" / "weights" / "last.pt" and parts.run.weights.is_dir()


@pytest.mark.slow  # trains one epoch on real images, then builds the resumed run
def test_build_a_resumed_run(data, tmp_path):
    import train
    from models.from_record import build_model
    from utils.checkpoint import load_checkpoint
    from utils.engine.build import build_training
    from utils.engine.hooks import CheckpointHook
    from utils.engine.loop import HookBase, TrainLoop

    class StopAfterFirstEpoch(HookBase):
        def after_epoch(self):
            self.loop.request_stop()

    opt = _opt(data, tmp_path / "exp", "--batch-size", "4", "--noautoanchor")
    parts = build_training(opt, opt.hyp, backend.device("cpu"), DistContext())
    TrainLoop(parts, [CheckpointHook(), StopAfterFirstEpoch()]).train()  # last.pt of epoch 0 of 2, unstripped
    last = tmp_path / "exp" / "weights" / "last.pt"
    ck = load_checkpoint(last, map_location="cpu", build_models=build_model)

    random.random(), np.random.rand(), backend.manual_seed(123)  # streams elsewhere now: the build must restore them
    ropt = train.resume_opt(train.parse_opt(True, args=["--resume", str(last)]))
    resumed = build_training(ropt, ropt.hyp, backend.device("cpu"), DistContext())
    rng = ck["rng"]
    assert random.getstate()[1] == tuple(rng["python"][1])  # restored last: nothing in the build drew after it
    assert np.array_equal(np.random.get_state()[1], rng["numpy"][1])
    assert np.array_equal(_array(backend.get_rng_state()), _array(rng["framework"]))
    st = resumed.state
    assert (st.start_epoch, st.last_opt_step, st.resumed) == (1, ck["last_opt_step"], True) and st.last_opt_step >= 0
    assert resumed.ema.updates == ck["updates"] > 0
    assert [g["lr"] for g in resumed.optimizer.param_groups] == [g["lr"] for g in ck["optimizer"]["param_groups"]]
    assert resumed.schedule.base_lrs == tuple(g["initial_lr"] for g in ck["optimizer"]["param_groups"])
    model, saved = _floats(resumed.model), _floats(ck["model"])
    for k in model:  # this project's last.pt resumes from its exact fp32 weights
        np.testing.assert_array_equal(model[k], saved[k], err_msg=k)
