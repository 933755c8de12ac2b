"""A logger never stops a run: a logger package that raises on every call costs one warning line, and the run (the
real TrainLoop on a tiny model, with the trainer's ResultsLogHook) completes with its results.csv. The logger
packages are replaced by fake modules in sys.modules, so this runs on both backends without any of them installed;
what the fakes record also pins what the integrations send (official project/run names, per-epoch values)."""
import dataclasses
import importlib.machinery
import logging
import sys
import types

import pytest

from tests.helpers.engine_helpers import tiny_parts
from utils.engine.hooks import ResultsLogHook
from utils.engine.loop import TrainLoop
from utils.loggers import Loggers, read_results_csv
from utils.loggers.options import LogOptions


class Unreachable(ConnectionError):
    pass


class Raising:
    """Every attribute is a function that raises, as a client whose service cannot be reached."""

    def __init__(self):
        self.calls = 0

    def __getattr__(self, name):
        if name == "summary":  # run.summary[key] = value
            return self

        def fail(*args, **kwargs):
            self.calls += 1
            raise Unreachable(f"{name}: connection refused\ndetails that must not reach the log")
        return fail

    def __setitem__(self, key, value):
        self.calls += 1
        raise Unreachable("summary: connection refused")


def fake_module(name, **attrs):
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)  # importlib.util.find_spec answers from sys.modules
    m.__dict__.update(attrs)
    return m


def run_opt(save_dir, **kw):
    o = dict(project="runs/train", name="exp", entity=None, upload_dataset=False, bbox_interval=-1,
             artifact_alias="latest", epochs=3, save_period=-1, exist_ok=False, resume=False, evolve=False,
             noplots=True, sync_bn=False, data="", imgsz=8)
    o.update(kw)
    return LogOptions.of(o)  # the loggers' options of a run with these flags


def train_with(loggers, epochs=3):
    parts = tiny_parts(epochs=epochs, imgsz=8)
    parts.options = dataclasses.replace(parts.options, noplots=True)
    loop = TrainLoop(parts, [ResultsLogHook(loggers)])
    loop.train()
    loggers.on_run_end(loggers.save_dir / "last.pt", loggers.save_dir / "best.pt", loop.epoch, loop.record.results)
    return loop


def warnings_of(caplog, name):
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.getMessage().startswith(name)]


def test_a_logger_that_raises_on_every_call_costs_one_warning(tmp_path, monkeypatch, caplog):
    run = Raising()
    wandb = fake_module("wandb", run=None, init=lambda **kw: run, Settings=lambda **kw: kw)
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setenv("WANDB_MODE", "offline")
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg = Loggers(tmp_path, run_opt(tmp_path), {"lr0": 0.01}, include=("csv", "wandb"))
        assert lg.cloud["wandb"]  # started: init itself worked
        train_with(lg)
    warned = warnings_of(caplog, "W&B")
    assert len(warned) == 1 and run.calls == 1  # the first failure switched it off: no call after it
    assert "Unreachable: summary: connection refused" in warned[0].getMessage()
    assert "details" not in warned[0].getMessage()  # one line
    assert not lg.cloud["wandb"]
    assert [r["epoch"] for r in read_results_csv(tmp_path / "results.csv")] == [0, 1, 2]


def test_a_logger_that_cannot_start_costs_one_warning(tmp_path, monkeypatch, caplog):
    def refuse(**kwargs):
        raise Unreachable("comet.com: timed out")
    comet = fake_module("comet_ml", Experiment=refuse, OfflineExperiment=refuse)
    monkeypatch.setitem(sys.modules, "comet_ml", comet)
    monkeypatch.setenv("COMET_API_KEY", "not-a-key")
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg = Loggers(tmp_path, run_opt(tmp_path), {}, include=("csv", "comet"))
        train_with(lg, epochs=2)
    warned = warnings_of(caplog, "Comet")
    assert len(warned) == 1 and "could not start" in warned[0].getMessage()
    assert len(read_results_csv(tmp_path / "results.csv")) == 2


class Recorder:
    """A stand-in client object that records every call (attribute path, args, kwargs) and returns another one."""

    def __init__(self, log, path="", **values):
        self._log, self._path, self._values = log, path, values

    def __getattr__(self, name):
        if name in self._values:
            return self._values[name]
        return Recorder(self._log, f"{self._path}.{name}".lstrip("."))

    def __call__(self, *args, **kwargs):
        self._log.append((self._path, args, kwargs))
        return Recorder(self._log, f"{self._path}()")

    def __setitem__(self, key, value):
        self._log.append((f"{self._path}[]", (key, value), {}))


@pytest.mark.parametrize("project, name, want_project, want_name", [("runs/train", "exp", "YOLOv5", None),
                                                                     ("work/my-proj", "trial", "my-proj", "trial")])
def test_wandb_run_names_follow_official(tmp_path, monkeypatch, project, name, want_project, want_name):
    log = []
    run = Recorder(log, "run", id="abc")
    wandb = fake_module("wandb", run=None, init=lambda **kw: log.append(("init", (), kw)) or run,
                        Settings=lambda **kw: kw, Image=lambda f, caption: caption, Artifact=Recorder(log, "Artifact"))
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setenv("WANDB_MODE", "offline")
    lg = Loggers(tmp_path, run_opt(tmp_path, project=project, name=name, entity="team"), {"lr0": 0.01},
                 include=("csv", "wandb"))
    train_with(lg, epochs=2)
    init = next(kw for what, _, kw in log if what == "init")
    assert (init["project"], init["name"], init["entity"], init["job_type"]) == (want_project, want_name, "team",
                                                                                "Training")
    assert init["config"]["hyp"] == {"lr0": 0.01} and init["config"]["epochs"] == 3
    epochs = [args[0] for what, args, _ in log if what == "run.log" and "train/box_loss" in args[0]]
    assert len(epochs) == 2 and len(epochs[0]) == 13  # the 13 values once per epoch, nothing per step
    assert [what for what, _, _ in log].count("run.finish") == 1


def test_not_configured_is_one_info_line_and_no_logger(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "wandb", fake_module("wandb"))
    for var in ("WANDB_MODE", "WANDB_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg = Loggers(tmp_path, run_opt(tmp_path, entity="team"), {}, include=("csv", "wandb"))
    lines = [r.getMessage() for r in caplog.records]
    assert sum("installed but not configured" in m and "W&B" in m for m in lines) == 1
    assert sum("--entity team" in m for m in lines) == 1  # the flag is named as doing nothing here
    assert "wandb" not in lg.cloud


def test_a_close_that_hangs_is_given_up(tmp_path, monkeypatch, caplog):
    import threading
    import time
    import utils.loggers as loggers_pkg
    release = threading.Event()
    run = Recorder([], "run", id="abc", finish=lambda: release.wait(30))  # a close waiting on a stuck helper
    wandb = fake_module("wandb", run=None, init=lambda **kw: run, Settings=lambda **kw: kw, Image=lambda f, caption: f)
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(loggers_pkg, "FINISH_LIMIT_S", 0.5)
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg = Loggers(tmp_path, run_opt(tmp_path), {}, include=("csv", "wandb"))
        t0 = time.time()
        train_with(lg, epochs=1)
        waited = time.time() - t0
    release.set()
    warned = warnings_of(caplog, "W&B")
    assert waited < 10 and len(warned) == 1 and "finish did not end within" in warned[0].getMessage()
