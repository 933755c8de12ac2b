"""Resuming a last.pt written under the other backend: weights, optimizer, EMA and the Python and numpy random streams
come back; the framework's generator state (PyTorch's CPU generator holds 5056 bytes, OneFlow's 5000, laid out
differently) is left out by name (the checkpoint records which backend wrote it; older files by its size) and one
line says that stream restarts. Same-backend resume stays exact (tests/test_engine/test_resume.py,
tests/test_engine/test_engine_build.py)."""
import logging
import os
import random
import subprocess

import numpy as np
import pytest

from tests.helpers.train_helpers import ROOT, make_tiny_dataset
from utils import backend
from utils.backend_choice import BACKEND_NAMES
from utils.checkpoint.training import get_rng_states
from utils.engine.resume import restore_rng

OTHER = next(name for name in BACKEND_NAMES if name != backend.BACKEND)
GENERATOR_BYTES = {"torch": 5056, "oneflow": 5000}  # CPU generator state sizes (torch 2.x, OneFlow 0.9.0)


def _framework():
    return np.asarray(backend.get_rng_state()).copy()


def _move_streams_elsewhere():
    random.random(), np.random.rand(), backend.manual_seed(123)


def _restore(rng, caplog):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="yolov5"):
        restore_rng({"rng": rng}, name="run/weights/last.pt")
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _assert_portable_restored(saved):
    assert random.getstate() == saved["python"]
    assert np.array_equal(np.random.get_state()[1], saved["numpy"][1])


def test_checkpoint_records_the_framework_rng_writer():
    s = get_rng_states()
    assert s["framework_backend"] == backend.BACKEND and np.asarray(s["framework"]).size == _framework().size
    assert _framework().size == GENERATOR_BYTES[backend.BACKEND]


def test_foreign_framework_state_is_skipped_by_name(caplog):
    saved = get_rng_states()
    foreign = dict(saved, framework=np.arange(GENERATOR_BYTES[OTHER]).astype(np.uint8), framework_backend=OTHER)
    _move_streams_elsewhere()
    before = _framework()
    lines = _restore(foreign, caplog)
    _assert_portable_restored(saved)
    assert np.array_equal(_framework(), before), "the framework stream must be left as this run's seed put it"
    assert len(lines) == 1, lines
    assert "run/weights/last.pt" in lines[0] and "restarts" in lines[0]
    assert BACKEND_NAMES[OTHER] in lines[0] and BACKEND_NAMES[backend.BACKEND] in lines[0]
    # the name decides, not the size: a foreign state of this backend's size is still left out
    same_size = dict(foreign, framework=saved["framework"])
    _move_streams_elsewhere()
    before = _framework()
    assert len(_restore(same_size, caplog)) == 1 and np.array_equal(_framework(), before)


def test_files_without_the_record_fall_back_to_the_state_size(caplog):
    saved = get_rng_states()
    old_foreign = {k: v for k, v in saved.items() if k != "framework_backend"}
    old_foreign["framework"] = np.zeros(GENERATOR_BYTES[OTHER], np.uint8)
    _move_streams_elsewhere()
    before = _framework()
    lines = _restore(old_foreign, caplog)
    _assert_portable_restored(saved)
    assert np.array_equal(_framework(), before)
    assert len(lines) == 1 and BACKEND_NAMES[OTHER] in lines[0], lines
    # an older file from this backend restores exactly, silently
    old_own = {k: v for k, v in saved.items() if k != "framework_backend"}
    _move_streams_elsewhere()
    assert _restore(old_own, caplog) == []
    assert np.array_equal(_framework(), np.asarray(saved["framework"]))


def test_same_backend_restores_every_stream_exactly(caplog):
    saved = get_rng_states()
    draws = (random.random(), float(np.random.rand()), float(backend.torch.rand(1)[0]))
    _move_streams_elsewhere()
    assert _restore(saved, caplog) == []
    assert (random.random(), float(np.random.rand()), float(backend.torch.rand(1)[0])) == draws


@pytest.mark.slow
def test_resume_under_the_other_backend(tmp_path, other_python):
    """Epoch 0 of 2 trained here (last.pt unstripped), epoch 1 under the other backend's train.py --resume."""
    import train
    from utils.checkpoint import load_checkpoint
    from utils.distributed import DistContext
    from utils.engine.build import build_training
    from utils.engine.hooks import CheckpointHook, ResultsLogHook
    from utils.engine.loop import HookBase, TrainLoop

    class StopAfterFirstEpoch(HookBase):
        def after_epoch(self):
            self.loop.request_stop()

    data = make_tiny_dataset(tmp_path / "data", n_train=4, n_val=2, size=64)
    run = tmp_path / "exp"
    opt = train.parse_opt(True, args=["--data", str(data), "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64",
                                      "--batch-size", "4", "--epochs", "2", "--device", "cpu", "--workers", "0",
                                      "--noplots", "--noautoanchor"])
    opt.save_dir = str(run)
    parts = build_training(opt, opt.hyp, backend.device("cpu"), DistContext())
    TrainLoop(parts, [ResultsLogHook(parts.loggers), CheckpointHook(), StopAfterFirstEpoch()]).train()
    last = run / "weights" / "last.pt"
    ck = load_checkpoint(last, tensors=False, build_models=False)
    assert ck["epoch"] == 0 and ck["rng"]["framework_backend"] == backend.BACKEND

    p = subprocess.run([other_python.python, str(ROOT / "train.py"), "--resume", str(last)], cwd=ROOT,
                       env={**other_python.env, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")},
                       capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    lines = [ln for ln in out.splitlines() if "random stream" in ln]
    assert len(lines) == 1, out[-4000:]
    assert BACKEND_NAMES[backend.BACKEND] in lines[0] and BACKEND_NAMES[OTHER] in lines[0] and str(last) in lines[0]
    rows = [ln.split(",")[0].strip() for ln in (run / "results.csv").read_text().splitlines()[1:] if ln.strip()]
    assert rows == ["0", "1"], rows  # epoch 1 finished under the other backend
    done = load_checkpoint(last, tensors=False, build_models=False)
    assert done["epoch"] == -1 and done["optimizer"] is None  # the finished run's stripped last.pt
