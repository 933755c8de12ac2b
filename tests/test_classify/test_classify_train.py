"""classify/train.py: the CLASSIFY task's pieces (results columns, fitness, the cut at --cutoff, the augmentations,
the loss with label smoothing), and short runs on a tiny ImageFolder cut from ../shared/data/coco128-cls (4 classes,
4 + 2 images each, 32 px): best.pt and results.csv with the official columns, the official classify/val.py reading
best.pt with this project's top-1/top-5, and --resume after a SIGKILL ending with the uninterrupted run's weights."""
import os
import shutil
import subprocess
import time
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.train_helpers import backend_python

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))
REF_PY = REF.parent / "venv" / "bin" / "python"
COLUMNS = ["epoch", "train/loss", "val/loss", "metrics/accuracy_top1", "metrics/accuracy_top5", "lr/0"]
CLASSES = ["bowl", "chair", "elephant", "person"]
EPOCHS = 3


# ------------------------------------------------------------------------------------------------- the task's parts
def test_results_columns_and_row():
    import dataclasses
    from utils.tasks.classify import CLASSIFY
    assert ["epoch", *CLASSIFY.results_keys()] == COLUMNS
    test_split = dataclasses.replace(CLASSIFY, val_split="test")
    assert test_split.results_keys()[1] == "test/loss"  # named after the split validated on, as official
    # (top1, top5, val loss) -> official order; lr/0 is the lr after the epoch's step (official logs it then)
    row = CLASSIFY.results_row([0.9], (0.5, 0.75, 1.2), [1e-3, 1e-3, 1e-3], [5e-4, 5e-4, 5e-4])
    assert row == [0.9, 1.2, 0.5, 0.75, 5e-4]
    assert float(CLASSIFY.fitness(np.array([0.25, 1.0, 3.0]))) == 0.25


def test_detection_results_row_unchanged():
    from utils.loggers import KEYS
    from utils.tasks.detect import DETECT
    assert DETECT.results_keys() == KEYS
    assert DETECT.results_row([1, 2, 3], (4, 5, 6, 7, 8, 9, 10), [11, 12, 13], [0, 0, 0]) == list(range(1, 14))


def test_final_validation_draws_test_images_of_the_first_batch(tmp_path, monkeypatch):
    """The last epoch's validation (plots=True) hands the first batch, its labels and the predicted classes to the
    plot helpers as test_images.jpg, captioned true-predicted as official; other validations draw nothing."""
    import cv2
    from utils.backend import from_numpy, torch
    from utils.tasks.classify import CLASSIFY

    class Fixed(torch.nn.Module):  # predicts class (mean pixel > 0.5) whatever the weights
        names = {0: "dark", 1: "bright"}

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            m = x.mean((1, 2, 3)) * self.w
            return torch.stack([-m, m], 1)

    class Jobs:  # the run's plot helpers, drawing here and keeping what they were handed
        def __init__(self):
            self.calls = []

        def submit(self, what, fn, *args, **kwargs):
            self.calls.append((what, args, kwargs))
            fn(*args, **kwargs)

    dark, bright = np.zeros((2, 3, 16, 16), np.uint8), np.full((2, 3, 16, 16), 250, np.uint8)
    batches = [(from_numpy(np.concatenate([dark, bright])), from_numpy(np.array([0, 0, 1, 0]))),
               (from_numpy(bright), from_numpy(np.array([1, 1])))]
    import utils.classify.evaluate as evaluate
    printed = []
    monkeypatch.setattr(evaluate.LOGGER, "info", printed.append)
    jobs = Jobs()
    results, _, _ = CLASSIFY.validate(Fixed(), batches, plots=False, save_dir=tmp_path, plot_jobs=jobs)
    each_epoch = [line.split() for line in printed]
    assert jobs.calls == [] and results[0] == pytest.approx(5 / 6)
    printed.clear()
    CLASSIFY.validate(Fixed(), batches, plots=True, save_dir=tmp_path, plot_jobs=jobs)
    last_epoch = [line.split() for line in printed]
    # each epoch prints its top-1/top-5 row; the last one, the run's final figures, every class too
    assert each_epoch == [["Class", "Images", "top1_acc", "top5_acc"], ["all", "6", "0.833", "1"]]
    assert last_epoch == each_epoch + [["dark", "3", "0.667", "1"], ["bright", "3", "1", "1"]]
    assert [c[0] for c in jobs.calls] == ["test_images.jpg"]
    (images, labels, paths, f), kw = jobs.calls[0][1:]
    assert images.shape == (4, 3, 16, 16) and list(labels) == [0, 0, 1, 0] and paths is None
    assert list(kw["predictions"]) == [0, 0, 1, 1] and kw["names"] == Fixed.names
    assert cv2.imread(str(tmp_path / "test_images.jpg")).shape[2] == 3


@pytest.mark.parametrize("cutoff", [None, 8])
def test_cutoff_classifier_from_yaml(cutoff):
    from models.tasks import Classify
    from utils.backend import torch
    from utils.classify.training import classification_model
    opt = Namespace(model="yolov5n.yaml", cutoff=cutoff, pretrained=True, dropout=0.2)
    model = classification_model(opt, nc=5)
    n = cutoff or 10
    assert len(model.model) == n and isinstance(model.model[-1], Classify) and model.model[-1].i == n - 1
    assert model.model[-1].drop.p == 0.2 and all(p.requires_grad for p in model.parameters())
    in_ch = {10: 256, 8: 128}[n]  # yolov5n: layer 9 (SPPF) takes 256 channels, layer 7 (Conv 3x3 s2) 128
    assert model.model[-1].conv.conv.in_channels == in_ch
    model.eval()
    with torch.no_grad():
        assert tuple(model(torch.zeros(2, 3, 32, 32)).shape) == (2, 5)


def test_cutoff_from_detection_checkpoint_and_head_resize(yolov5n_pt):
    from models.experimental import attempt_load
    from models.tasks import ClassificationModel
    from utils.classify.training import classification_model, reshape_classifier_output
    opt = Namespace(model=str(yolov5n_pt), cutoff=None, pretrained=True, dropout=None)
    model = classification_model(opt, nc=3)
    det = attempt_load(yolov5n_pt, fuse=False)
    assert isinstance(model, ClassificationModel) and len(model.model) == 10
    for k in ("model.0.conv.weight", "model.8.cv1.conv.weight"):  # the backbone's weights are kept
        np.testing.assert_array_equal(model.state_dict()[k].numpy(), det.state_dict()[k].numpy())
    reshape_classifier_output(model, 7)
    assert model.model[-1].linear.out_features == 7 and model.nc == 7


def test_missing_model_and_data_are_one_line(tmp_path):
    from utils.classify.training import classification_model, dataset_splits
    from utils.engine.errors import TrainingError
    with pytest.raises(TrainingError, match="downloads nothing"):
        classification_model(Namespace(model=str(tmp_path / "x-cls.pt"), cutoff=None, pretrained=True,
                                       dropout=None), 2)
    with pytest.raises(TrainingError, match="not a folder"):
        dataset_splits(tmp_path / "none")
    (tmp_path / "d" / "train").mkdir(parents=True)
    with pytest.raises(TrainingError, match="no val/ folder"):
        dataset_splits(tmp_path / "d")


def test_augmentations():
    from utils.classify.augment import random_resized_crop_box, train_transform
    rng = np.random.RandomState(0)
    for h, w in ((40, 80), (200, 30), (64, 64)):
        for _ in range(50):
            top, left, ch, cw = random_resized_crop_box(h, w, rng=rng)
            assert 0 <= top and top + ch <= h and 0 <= left and left + cw <= w and ch > 0 and cw > 0
    im = np.zeros((50, 70, 3), np.uint8)
    im[..., 2] = 200  # red in BGR
    out = train_transform(im, 24, rng=rng)
    assert out.shape == (3, 24, 24) and out.dtype == np.uint8
    assert (out[0] >= out[1]).all() and out[0].mean() > 50  # RGB order: red stays the first channel


def test_label_smoothing_loss_matches_formula():
    """Both frameworks' CrossEntropyLoss(label_smoothing) (OneFlow 0.9.0's too): (1 - e) CE + e mean(-log p)."""
    from utils.backend import torch
    from utils.classify.loss import ClassificationLoss
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 10)).astype(np.float32)
    y = rng.integers(0, 10, 6)
    lp = x - x.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    for eps in (0.0, 0.1):
        expected = float(((1 - eps) * -lp[np.arange(6), y] + eps * -lp.mean(1)).mean())
        loss, items = ClassificationLoss(eps, world_size=2)(torch.tensor(x), torch.tensor(y))
        assert abs(float(items.numpy()[0]) - expected) < 1e-5
        assert abs(float(loss.detach().numpy()) - expected / 2) < 1e-5  # the loop multiplies by the world size


def test_normalize_matches_eval_transform():
    """The trainer normalises uint8 batches on the device exactly as classify/val.py's loader does on the host."""
    from utils.backend import from_numpy
    from utils.classify.dataset import center_crop_uint8, classify_transform
    from utils.tasks.classify import normalize_images
    im = np.random.default_rng(1).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    host = classify_transform(im, 16)
    dev = normalize_images(from_numpy(center_crop_uint8(im, 16)[None]).float() / 255).numpy()[0]
    np.testing.assert_array_equal(dev, host)


def test_schedule_is_linear_without_warmup():
    from utils.engine.schedule import Schedule
    s = Schedule(base_lrs=(1e-3,) * 3, epochs=4, lrf=0.01, warmup_iters=-1, warmup_bias_lr=0.0,
                 warmup_momentum=0.9, momentum=0.9, batch_size=8, nominal_batch=8)
    first = s.at(0, 0)
    assert not s.in_warmup(0) and first.accumulate == 1 and first.momentum is None
    assert first.lrs == pytest.approx((1e-3,) * 3)
    assert s.epoch_lrs(2)[0] == pytest.approx(1e-3 * ((1 - 2 / 4) * 0.99 + 0.01))


# ------------------------------------------------------------------------------------------------------ real runs
@pytest.fixture(scope="module")
def tiny_cls(shared_dir, tmp_path_factory):
    src = shared_dir / "data" / "coco128-cls"
    dst = tmp_path_factory.mktemp("cls") / "tiny"
    for split, n in (("train", 4), ("val", 2)):
        for c in CLASSES:
            (dst / split / c).mkdir(parents=True)
            for f in sorted((src / split / c).iterdir())[:n]:
                shutil.copy(f, dst / split / c / f.name)
    return dst


def _env():
    python, backend = backend_python()
    return python, {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}


def _args(data, project, name="exp"):
    return ["--model", str(ROOT.parent / "shared" / "weights" / "yolov5n.pt"), "--data", str(data), "--img", "32",
            "--epochs", str(EPOCHS), "--batch-size", "8", "--workers", "0", "--seed", "3", "--device", "cpu",
            "--project", str(project), "--name", name]


def _train(args, timeout=600):
    python, env = _env()
    return subprocess.run([python, str(ROOT / "classify" / "train.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _rows(csv):
    return [line for line in Path(csv).read_text().splitlines()[1:] if line.strip()]


@pytest.fixture(scope="module")
def reference_run(tiny_cls, yolov5n_pt, tmp_path_factory):
    project = tmp_path_factory.mktemp("ref")
    p = _train(_args(tiny_cls, project))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return project / "exp"


@pytest.mark.slow
def test_train_writes_best_pt_and_official_results(reference_run):
    from utils.checkpoint import load_checkpoint
    lines = (reference_run / "results.csv").read_text().splitlines()
    assert [k.strip() for k in lines[0].split(",")] == COLUMNS
    rows = [[float(x) for x in r.split(",")] for r in lines[1:]]
    assert [r[0] for r in rows] == list(range(EPOCHS))
    assert all(0 <= r[3] <= r[4] <= 1 for r in rows)  # top-1 <= top-5
    lr0 = 1e-3  # lr/0 as official logs it: after the epoch's step, linear to 0.01 lr0
    assert [r[5] for r in rows] == pytest.approx([lr0 * ((1 - (e + 1) / EPOCHS) * 0.99 + 0.01)
                                                  for e in range(EPOCHS)], rel=1e-4)
    ck = load_checkpoint(reference_run / "weights" / "best.pt", tensors=False, build_models=False)
    assert ck["model"]["class"] == "models.yolo.ClassificationModel" and ck["epoch"] == -1
    names = ck["model"]["names"]  # official readers take a list or a {index: name} dict (the stripped file's)
    assert ck["optimizer"] is None and ck["ema"] is None
    assert (list(names.values()) if isinstance(names, dict) else names) == CLASSES
    assert ck["model"]["state_dict"]["model.9.linear.weight"].shape == (4, 1280)
    assert ck["model"]["state_dict"]["model.9.linear.weight"].dtype == np.float16  # official: the EMA in fp16
    assert (reference_run / "opt.yaml").is_file() and not (reference_run / "hyp.yaml").exists()
    # official pictures: the first 25 training images, and after the last epoch 25 validation images true-predicted
    assert (reference_run / "train_images.jpg").is_file() and (reference_run / "test_images.jpg").is_file()
    assert not list(reference_run.glob("train_batch*.jpg"))


def _val_lines(out):
    return {ln.split()[0]: ln.split()[1:4] for ln in out.splitlines()
            if ln.strip() and ln.split()[0] in ("all", *CLASSES) and len(ln.split()) == 4}


@pytest.mark.slow
def test_official_classify_val_reads_best_pt(reference_run, tiny_cls, tmp_path):
    """The official classify/val.py (its own copy, run with its venv) gives this project's top-1/top-5 rows."""
    if not (REF / "classify" / "val.py").is_file() or not REF_PY.is_file():
        pytest.skip(f"no official checkout and venv at {REF}")
    ref_copy = tmp_path / "yolov5"
    shutil.copytree(REF, ref_copy, ignore=shutil.ignore_patterns("runs", "*.pt", ".git"))
    best = reference_run / "weights" / "best.pt"
    common = ["--weights", str(best), "--data", str(tiny_cls), "--img", "32", "--batch-size", "1",
              "--device", "cpu", "--workers", "0"]
    off = subprocess.run([str(REF_PY), "classify/val.py", *common, "--project", str(tmp_path / "off")], cwd=ref_copy,
                         capture_output=True, text=True, timeout=300)
    assert off.returncode == 0, (off.stdout + off.stderr)[-3000:]
    python, env = _env()
    ours = subprocess.run([python, "classify/val.py", *common, "--project", str(tmp_path / "ours")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, (ours.stdout + ours.stderr)[-3000:]
    a, b = _val_lines(off.stdout + off.stderr), _val_lines(ours.stdout + ours.stderr)
    assert set(a) == {"all", *CLASSES} and a == b, (a, b)


@pytest.mark.oneflow_covered_by(  # the classifier's resume under OneFlow; exactness under OneFlow: detection's
    "tests/test_engine/test_one_trainer.py::test_classification_resumes_through_the_one_build")
@pytest.mark.slow
def test_kill_and_resume_matches_uninterrupted(reference_run, tiny_cls, tmp_path):
    from utils.checkpoint import load_checkpoint
    python, env = _env()
    run_dir = tmp_path / "exp"
    p = subprocess.Popen([python, str(ROOT / "classify" / "train.py"), *_args(tiny_cls, tmp_path)], cwd=ROOT,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    csv = run_dir / "results.csv"
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < 300:
        if csv.exists() and len(_rows(csv)) >= 2:
            p.kill()  # SIGKILL: last.pt holds epoch 0 or 1, depending on where the kill lands
            break
        time.sleep(0.02)
    p.wait()
    assert p.returncode != 0, "the run finished before it could be killed"
    res = _train(["--resume", str(run_dir / "weights" / "last.pt")])
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "Resuming training" in res.stdout + res.stderr
    assert _rows(csv) == _rows(reference_run / "results.csv")
    wa = load_checkpoint(reference_run / "weights" / "last.pt", tensors=False, build_models=False)["model"]
    wb = load_checkpoint(run_dir / "weights" / "last.pt", tensors=False, build_models=False)["model"]
    assert wa["state_dict"].keys() == wb["state_dict"].keys()
    for k in wa["state_dict"]:
        np.testing.assert_array_equal(wa["state_dict"][k], wb["state_dict"][k], err_msg=k)
    # a finished (stripped) run is not resumed: one line (exit 1 in the script), asked in this process
    from classify import train
    from utils.engine.errors import TrainingError
    with pytest.raises(TrainingError, match="cannot be resumed"):
        train.resume_opt(Namespace(resume=str(run_dir / "weights" / "last.pt")))


@pytest.mark.parametrize("momentum,centered,wd", [(0.9, False, 5e-5), (0.0, True, 0.0)])
def test_rmsprop_is_torchs_update(momentum, centered, wd):
    """backend.RMSprop (OneFlow: the backend's own, as 0.9.0's refuses momentum) follows torch.optim.RMSprop's maths:
    eps after the square root, a momentum buffer, weight decay added to the gradient."""
    from utils import backend
    from utils.backend import torch
    rng = np.random.default_rng(0)
    w0, grads = rng.normal(size=5).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    lr, alpha, eps = 0.01, 0.99, 1e-8
    w, sq, ga, buf = w0.astype(np.float64), np.zeros(5), np.zeros(5), np.zeros(5)
    for g in grads:
        g = g + wd * w
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
        avg = np.sqrt(sq - ga * ga if centered else sq) + eps
        buf = momentum * buf + g / avg
        w = w - lr * (buf if momentum else g / avg)
    p = torch.nn.Parameter(torch.tensor(w0))
    opt = backend.RMSprop([p], lr=lr, alpha=alpha, eps=eps, weight_decay=wd, momentum=momentum, centered=centered)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-5, atol=1e-6)


def test_bad_data_or_model_stops_before_the_run_folder(tmp_path, tiny_cls):
    """One line (a TrainingError: exit 1 in the entry script) and no run folder left behind."""
    from classify import train
    from utils.engine.errors import TrainingError
    project = tmp_path / "runs"
    for kw, match in (({"data": str(tmp_path / "none"), "model": "yolov5n.yaml"}, "not a folder"),
                      ({"data": str(tiny_cls), "model": str(tmp_path / "x.pt")}, "downloads nothing")):
        with pytest.raises(TrainingError, match=match):
            train.run(project=str(project), **kw)
    assert not project.exists()


def test_shapes_classification_generator(tmp_path):
    """make_shapes.py --classify (make train-demo TASK=classify): an ImageFolder with the six classes in train/ and
    val/, one crop per generated object, the same files for the same seed."""
    import importlib.util
    from utils.classify.dataset import find_classes, image_folder_samples
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    a = gen.make_shapes_cls(tmp_path / "a", n_train=4, n_val=2, size=96, seed=0)
    b = gen.make_shapes_cls(tmp_path / "b", n_train=4, n_val=2, size=96, seed=0)
    names = sorted(n.replace(" ", "_") for n in gen.NAMES)
    for split, scenes in (("train", 4), ("val", 2)):
        assert find_classes(a / split) == names
        files = [Path(f).relative_to(a) for f, _ in image_folder_samples(a / split, names)]
        assert scenes <= len(files) <= 5 * scenes  # 1-5 objects a scene
        assert files == [Path(f).relative_to(b) for f, _ in image_folder_samples(b / split, names)]
        assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
