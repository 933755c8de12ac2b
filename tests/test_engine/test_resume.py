"""Exact resume: a run killed with SIGKILL after epoch 1 and resumed with --resume ends with the same results.csv
rows and the same final weights as the same run uninterrupted (CPU, --workers 0, fixed seed). A checkpoint holding
only what official ultralytics writes resumes at its next epoch."""
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.train_helpers import ROOT, make_tiny_dataset, run_train

EPOCHS = 3


def _args(data, project):
    return ["--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch-size", "8",
            "--epochs", EPOCHS, "--workers", "0", "--seed", "3", "--device", "cpu", "--noplots",
            "--save-period", "1", "--project", project, "--name", "exp"]


def _rows(csv):
    return [line for line in Path(csv).read_text().splitlines()[1:] if line.strip()]


def _weights(path):
    from utils.checkpoint import load_checkpoint
    ck = load_checkpoint(path, tensors=False, build_models=False)
    return ck["model"]["state_dict"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=96)


@pytest.fixture(scope="module")
def reference_run(data, tmp_path_factory):
    """The uninterrupted run."""
    project = tmp_path_factory.mktemp("ref")
    ref = run_train(_args(data, project))
    assert ref.returncode == 0, ref.stderr[-3000:]
    return project / "exp"


@pytest.mark.slow
def test_kill_and_resume_matches_uninterrupted(data, reference_run, tmp_path):
    ref_dir = reference_run

    # 2. the same run, killed with SIGKILL as soon as epoch 1's results row is written
    import os
    from tests.helpers.train_helpers import backend_python
    python, backend = backend_python()
    env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    run_dir = tmp_path / "b" / "exp"
    p = subprocess.Popen([python, str(ROOT / "train.py"), *map(str, _args(data, tmp_path / "b"))], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    csv = run_dir / "results.csv"
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < 600:
        if csv.exists() and len(_rows(csv)) >= 2:
            p.kill()  # SIGKILL: no handler runs; last.pt holds epoch 0 or 1 depending on where the kill lands
            break
        time.sleep(0.02)
    p.wait()
    assert p.returncode != 0, "the run finished before it could be killed"
    assert (run_dir / "weights" / "last.pt").exists()

    # 3. resume from last.pt
    res = run_train(["--resume", run_dir / "weights" / "last.pt"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Resuming training" in res.stderr + res.stdout

    assert _rows(csv) == _rows(ref_dir / "results.csv")
    assert len(_rows(csv)) == EPOCHS
    wa, wb = _weights(ref_dir / "weights" / "last.pt"), _weights(run_dir / "weights" / "last.pt")
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


@pytest.mark.slow
def test_resume_refuses_finished_checkpoint(reference_run):
    r2 = run_train(["--resume", reference_run / "weights" / "last.pt"])
    assert r2.returncode == 1
    assert "cannot be resumed" in r2.stderr
    # --resume without a path picks the newest last.pt under --project
    r3 = run_train(["--resume", "--project", reference_run.parent])
    assert r3.returncode == 1 and str(reference_run / "weights" / "last.pt") in r3.stderr
    r4 = run_train(["--resume", reference_run / "weights" / "nothing.pt"])
    assert r4.returncode == 1 and "no checkpoint found" in r4.stderr


def _pickle_globals(path):
    """The module.name pairs a checkpoint's pickle names, in order of first use (its data.pkl, opcode by opcode)."""
    import pickletools
    import zipfile
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    seen = []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL" and arg not in seen:
            seen.append(arg)
    return seen


@pytest.mark.slow
def test_final_epoch_is_written_as_strip_optimizer_would_strip_it(reference_run, tmp_path):
    """The last epoch's last.pt is written stripped from memory, not saved whole and read back: it holds what
    strip_optimizer makes of that epoch's whole checkpoint (epoch2.pt of --save-period 1, which stays whole as
    official): the same keys and values but the date, the same fp16 model with the same attributes, the same pickled
    classes in the same order."""
    from models.from_record import build_model
    from utils.checkpoint import load_checkpoint
    from utils.checkpoint.training import strip_optimizer
    weights = reference_run / "weights"
    whole = load_checkpoint(weights / f"epoch{EPOCHS - 1}.pt", tensors=False, build_models=False)
    assert whole["epoch"] == EPOCHS - 1 and whole["optimizer"] is not None  # the periodic file stays whole
    stripped = tmp_path / "stripped.pt"
    strip_optimizer(weights / f"epoch{EPOCHS - 1}.pt", s=str(stripped), build_model=build_model)
    a = load_checkpoint(weights / "last.pt", tensors=False, build_models=False)
    b = load_checkpoint(stripped, tensors=False, build_models=False)
    assert list(a) == list(b) == list(OFFICIAL_KEYS)
    for k in OFFICIAL_KEYS:
        if k not in ("model", "date"):
            assert a[k] == b[k], k
    assert a["epoch"] == -1 and a["optimizer"] is None and a["ema"] is None
    ma, mb = a["model"], b["model"]
    assert sorted(ma) == sorted(mb)
    for k in ma:
        if k != "state_dict":
            assert repr(ma[k]) == repr(mb[k]), k
    sa, sb = ma["state_dict"], mb["state_dict"]
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
    assert _pickle_globals(weights / "last.pt") == _pickle_globals(stripped)


OFFICIAL_KEYS = ("epoch", "best_fitness", "model", "ema", "updates", "optimizer", "opt", "git", "date")


@pytest.mark.slow
def test_resume_from_an_official_format_checkpoint(reference_run, tmp_path):
    """A last.pt with only what official ultralytics writes (fp16 model and EMA, best_fitness as a numpy array,
    opt with hyp inline; no RNG states, no fp32 copies, no opt.yaml or hyp.yaml beside it) resumes at its next
    epoch with its optimizer state: the learning rates of the resumed epochs are the uninterrupted run's."""
    from utils.checkpoint import Half, load_checkpoint, save_checkpoint
    from models.from_record import build_model
    ck = load_checkpoint(reference_run / "weights" / "epoch0.pt", map_location="cpu", build_models=build_model)
    official = {k: ck[k] for k in OFFICIAL_KEYS}
    official.update(model=Half(ck["model"]), ema=Half(ck["ema"]), best_fitness=np.array([ck["best_fitness"]]))
    assert isinstance(official["opt"]["hyp"], dict) and official["opt"]["epochs"] == EPOCHS
    import yaml
    assert yaml.safe_load((reference_run / "opt.yaml").read_text())["hyp"] == official["opt"]["hyp"]
    run = tmp_path / "exp"
    save_checkpoint(official, run / "weights" / "last.pt")
    ref_lines = (reference_run / "results.csv").read_text().splitlines()
    (run / "results.csv").write_text("\n".join(ref_lines[:2]) + "\n")  # the official run's epoch-0 row

    res = run_train(["--resume", run / "weights" / "last.pt"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"from epoch 1 to {EPOCHS} total epochs" in res.stderr + res.stdout
    rows = [[float(x) for x in r.split(",")] for r in _rows(run / "results.csv")]
    ref = [[float(x) for x in r.split(",")] for r in _rows(reference_run / "results.csv")]
    assert [r[0] for r in rows] == [0, 1, 2] and rows[0] == ref[0]
    for r, q in zip(rows[1:], ref[1:]):
        assert r[-3:] == q[-3:]  # x/lr0..lr2: the schedule continued from the restored optimizer and epoch
    assert load_checkpoint(run / "weights" / "last.pt", tensors=False, build_models=False)["epoch"] == -1


def test_opt_holds_what_official_resume_reads(tmp_path):
    """Official train.py --resume rebuilds its options from opt.yaml (or the checkpoint's opt) and reads every one
    of its flags, hyp as a dict and data as a file it can open from its own folder."""
    import yaml
    import train
    from utils.checkpoint.run_options import OFFICIAL_OPT_DEFAULTS, RecordedFlags, official_opt
    opt = train.parse_opt(True, args=["--data", "coco128.yaml", "--cfg", "yolov5n.yaml", "--bbox_iou_optim"])
    opt.save_dir, opt.results = str(tmp_path / "exp"), (0.1, 0.2)
    d = official_opt(RecordedFlags.of(opt), {"lr0": 0.01, "momentum": 0.937})
    assert list(d)[:len(OFFICIAL_OPT_DEFAULTS)] == list(OFFICIAL_OPT_DEFAULTS)
    assert d["hyp"] == {"lr0": 0.01, "momentum": 0.937} and d["save_dir"] == str(tmp_path / "exp")
    assert Path(d["data"]).is_absolute() and Path(d["data"]).resolve() == (ROOT / "data" / "coco128.yaml").resolve()
    assert Path(d["evolve_population"]).parts[-2:] == ("data", "hyps") and d["bbox_interval"] == -1 and d["cfg"] == "yolov5n.yaml"
    assert d["bbox_iou_optim"] is True and "results" not in d
    assert yaml.safe_load(yaml.safe_dump(d, sort_keys=False)) == d
