"""val.py on a few real coco128 images with the official yolov5n weights: metrics, outputs, the training-time call,
TTA, and the full 128-image parity run against REFERENCE.md."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from utils.backend import IS_ONEFLOW

ROOT = Path(__file__).resolve().parents[2]
N_IMAGES = 8
IMGSZ = 256


@pytest.fixture(scope="module")
def small_set(tmp_path_factory, coco128_dir):
    """A dataset of the first N coco128 images (symlinks, so nothing is copied) and its YAML."""
    d = tmp_path_factory.mktemp("c8")
    (d / "images").mkdir()
    (d / "labels").mkdir()
    ims = sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:N_IMAGES]
    for im in ims:
        (d / "images" / im.name).symlink_to(im)
        lb = coco128_dir / "labels" / "train2017" / f"{im.stem}.txt"
        if lb.exists():
            (d / "labels" / lb.name).symlink_to(lb)
    names = {i: f"c{i}" for i in range(80)}
    names[0], names[23] = "person", "giraffe"
    yaml_file = d / "data.yaml"
    yaml_file.write_text(f"path: {d}\ntrain: images\nval: images\nnames: {json.dumps(names)}\n")
    n_labels = sum(len((d / "labels" / f"{im.stem}.txt").read_text().split("\n")) - 1
                   for im in ims if (d / "labels" / f"{im.stem}.txt").exists())
    return yaml_file, n_labels


@pytest.fixture(scope="module")
def val_result(small_set, yolov5n_pt, tmp_path_factory):
    import val
    yaml_file, _ = small_set
    project = tmp_path_factory.mktemp("runs")
    out = val.run(data=str(yaml_file), weights=str(yolov5n_pt), imgsz=IMGSZ, batch_size=4, workers=0,
                  project=project, name="exp", save_txt=True, save_conf=True, save_json=True, verbose=True)
    return out, project / "exp"


def test_metrics_are_sane_and_files_written(val_result):
    (mp, mr, map50, map_, *losses), maps, t = val_result[0]
    save_dir = val_result[1]
    # yolov5n on these training images at 256 px: clearly above chance, below perfect
    assert 0.3 < map50 < 0.99 and 0.15 < map_ < map50
    assert 0 < mp <= 1 and 0 < mr <= 1
    assert losses == [0.0, 0.0, 0.0]  # no compute_loss given
    assert maps.shape == (80,) and len(t) == 3 and all(x > 0 for x in t)
    for f in ("confusion_matrix.png", "PR_curve.png", "F1_curve.png", "P_curve.png", "R_curve.png",
              "val_batch0_labels.jpg", "val_batch0_pred.jpg"):
        assert (save_dir / f).stat().st_size > 0, f


def test_save_txt_and_json_agree(val_result, small_set):
    save_dir = val_result[1]
    txts = sorted((save_dir / "labels").glob("*.txt"))
    assert 0 < len(txts) <= N_IMAGES
    rows = np.loadtxt(txts[0], ndmin=2)
    assert rows.shape[1] == 6  # class xywh conf (--save-conf)
    assert np.all((rows[:, 1:5] >= 0) & (rows[:, 1:5] <= 1)) and np.all(rows[:, 5] >= 0.001)
    preds = json.loads(next(save_dir.glob("*_predictions.json")).read_text())
    stem = txts[0].stem
    mine = [p for p in preds if str(p["image_id"]) == str(int(stem))]
    assert len(mine) == len(rows)  # one JSON entry per saved detection
    assert {"image_id", "category_id", "bbox", "score"} <= set(preds[0])


def test_coco_json_maps_80_to_91_classes(tmp_path):
    from utils.general import coco80_to_coco91_class
    from val import save_one_json
    jdict = []
    predn = np.array([[10, 20, 50, 80, 0.9, 79], [0, 0, 5, 5, 0.5, 0]], np.float32)
    save_one_json(predn, jdict, Path("000000000042.jpg"), coco80_to_coco91_class())
    assert jdict[0] == {"image_id": 42, "category_id": 90, "bbox": [10.0, 20.0, 40.0, 60.0], "score": 0.9}
    assert jdict[1]["category_id"] == 1


def test_training_call_with_loss(small_set, yolov5n_pt, tmp_path):
    """train.py's call: model=, dataloader=, compute_loss=, plots=False; returns losses averaged over batches."""
    import val
    from models.experimental import attempt_load
    from utils.dataloaders import create_dataloader
    from utils.dataset_config import check_dataset
    from utils.loss import ComputeLoss
    yaml_file, n_labels = small_set
    data = check_dataset(str(yaml_file))
    model = attempt_load(str(yolov5n_pt), fuse=False)
    model.hyp = {"box": 0.05, "obj": 1.0, "cls": 0.5, "cls_pw": 1.0, "obj_pw": 1.0, "anchor_t": 4.0, "fl_gamma": 0.0,
                 "label_smoothing": 0.0}
    model.gr = 1.0
    loader = create_dataloader(data["val"], IMGSZ, 4, 32, pad=0.5, rect=True, workers=0)[0]
    (mp, mr, map50, map_, *losses), maps, _ = val.run(data=data, model=model, dataloader=loader, save_dir=tmp_path,
                                                     plots=False, compute_loss=ComputeLoss(model), imgsz=IMGSZ)
    assert len(losses) == 3 and all(np.isfinite(losses)) and losses[1] > 0  # objectness loss always > 0
    assert 0.3 < map50 < 0.99
    assert not any(tmp_path.iterdir())  # plots=False writes nothing


def test_tta_output_layout(yolov5n_pt):
    """--augment: 3 passes (1, 0.83 flipped, 0.67); the full-size pass drops its coarsest level and keeps the
    rest unchanged, so its rows equal the plain forward's."""
    from models.experimental import attempt_load
    from utils.backend import from_numpy, no_grad, to_numpy
    model = attempt_load(str(yolov5n_pt))
    x = from_numpy(np.random.default_rng(0).random((1, 3, 128, 160), dtype=np.float32))
    with no_grad():
        plain = to_numpy(model(x)[0])
        aug = to_numpy(model(x, augment=True)[0])
    na, g = 3, (128 // 32) * (160 // 32)  # anchors per cell, coarsest-level cells
    full = plain.shape[1] - na * g  # the full-size pass without its stride-32 level
    np.testing.assert_allclose(aug[:, :full], plain[:, :full], rtol=1e-5, atol=1e-4)
    assert aug.shape[1] > full and aug.shape[2] == 85


def test_tta_descale_and_scale_img():
    from utils.backend import from_numpy, to_numpy
    from utils.tta import descale_pred, scale_img
    p = from_numpy(np.array([[[10, 20, 4, 6, 0.9, 0.8]]], np.float32))
    # flip 3 (left-right) at scale 0.5 on a 100-px-wide input: x = 100 - 10 / 0.5 = 80; y, w, h just / 0.5
    np.testing.assert_allclose(to_numpy(descale_pred(p, 3, 0.5, (60, 100)))[0, 0], [80, 40, 8, 12, 0.9, 0.8])
    np.testing.assert_allclose(to_numpy(descale_pred(p, 2, 0.5, (60, 100)))[0, 0], [20, 20, 8, 12, 0.9, 0.8])
    x = from_numpy(np.ones((1, 3, 128, 160), np.float32))
    y = to_numpy(scale_img(x, 0.67, gs=32))
    assert y.shape == (1, 3, 96, 128)  # int(128*.67)=85 x int(160*.67)=107, padded up to multiples of 32
    assert y[0, 0, 90, 120] == pytest.approx(0.447) and y[0, 0, 10, 10] == pytest.approx(1.0)


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_val.py::test_metrics_are_sane_and_files_written")
@pytest.mark.slow
def test_val_cli_prints_all_line_and_augment_runs(small_set, yolov5n_pt, tmp_path):
    yaml_file, n_labels = small_set
    cmd = [sys.executable, "val.py", "--weights", str(yolov5n_pt), "--data", str(yaml_file), "--img", "160",
           "--batch", "8", "--workers", "0", "--augment", "--project", str(tmp_path), "--name", "cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    m = re.search(r"^\s+all\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert m, out[-3000:]
    assert int(m.group(1)) == N_IMAGES and int(m.group(2)) == n_labels
    assert "Speed:" in out and "Class     Images  Instances" in out


@pytest.mark.slow
@pytest.mark.skipif(IS_ONEFLOW, reason="7 min of OneFlow's single-threaded CPU kernels; under OneFlow the model's "
                    "outputs are checked against the official ones (test_model_parity.py) and the validation loop "
                    "against PyTorch's by test_segment_val_oneflow_equals_pytorch (test_segment_val.py)")
def test_coco128_parity_with_official(coco128_dir, yolov5n_pt, tmp_path):
    """REFERENCE.md: official val.py --img 640 --batch 32 --conf 0.001 --iou 0.6 gives P 0.634, R 0.480, mAP50 0.544,
    mAP50-95 0.350. R and both mAPs are held to 0.005. P is held to 0.02: it is read where the smoothed mean F1 peaks,
    and on coco128 that curve is flat (it varies by 1e-5 across the confidences where P goes from 0.619 to 0.635), so
    P follows differences that move no mAP: which images share a padded rect batch (the official code leaves ties of
    equal aspect ratio to numpy's unstable sort, whose order differs between numpy 1 and 2; this project sorts them
    stably, so both backends print the same figures: 0.617 0.477 0.542 0.348; numpy 2's own order gives 0.626 0.481
    0.545 0.350, numpy 1's 0.619 0.482 0.552 0.354), or sub-pixel differences in the resized images."""
    yaml_file = tmp_path / "coco128.yaml"
    yaml_file.write_text(f"path: {coco128_dir}\ntrain: images/train2017\nval: images/train2017\n"
                         f"names: {json.dumps({i: str(i) for i in range(80)})}\n")
    # val.py as a user runs it, but with NMS's time limit off: on a loaded machine the official 2.1 s per batch of 32
    # cuts images (13 to 19 of 32 seen at a load of 19 on 2 cores), which is the machine's doing, not val.py's
    unlimited = ("import functools, math, runpy, sys, utils.nms as n; n.non_max_suppression = functools.partial("
                 "n.non_max_suppression, time_limit=math.inf); sys.argv[0] = 'val.py'; "
                 "runpy.run_path('val.py', run_name='__main__')")
    cmd = [sys.executable, "-c", unlimited, "--weights", str(yolov5n_pt), "--data", str(yaml_file), "--img", "640",
           "--batch", "32", "--conf-thres", "0.001", "--iou-thres", "0.6", "--workers", "2", "--project", str(tmp_path)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout + p.stderr
    m = re.search(r"^\s+all\s+128\s+929\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert m, out[-3000:]
    got = np.array([float(v) for v in m.groups()])
    np.testing.assert_allclose(got[1:], [0.480, 0.544, 0.350], atol=0.005 + 1e-9)
    assert abs(got[0] - 0.634) <= 0.02, got


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_val.py::test_metrics_are_sane_and_files_written")
def test_save_hybrid_labels_give_near_perfect_map(small_set, yolov5n_pt, tmp_path, monkeypatch):
    """--save-hybrid adds every label as a confidence-1 detection before NMS, so each label is matched at IoU 1:
    recall 1 is reached before any false positive, AP is the 101-point maximum 0.995 for every class. NMS runs
    without its time limit here: on a loaded machine the official limit cuts images, whose labels then count as
    missed (0.622 seen under OneFlow at a load of 10), which is the limit's doing, not --save-hybrid's."""
    import functools
    import math
    import val
    from utils.nms import non_max_suppression
    monkeypatch.setattr(val, "run_validation", functools.partial(
        val.run_validation, postprocess=functools.partial(non_max_suppression, time_limit=math.inf)))
    yaml_file, _ = small_set
    (mp, mr, map50, map_, *_), maps, _ = val.run(data=str(yaml_file), weights=str(yolov5n_pt), imgsz=128,
                                               batch_size=8, workers=0, save_hybrid=True, save_txt=True,
                                               project=tmp_path, name="hyb", plots=False)
    assert map50 == pytest.approx(0.995, abs=1e-6) and map_ == pytest.approx(0.995, abs=1e-6)
    assert len(list((tmp_path / "hyb" / "labels").glob("*.txt"))) > 0


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_val.py::test_metrics_are_sane_and_files_written")
def test_task_speed_runs(small_set, yolov5n_pt, tmp_path, monkeypatch):
    import val
    yaml_file, _ = small_set
    opt = val.parse_opt(["--weights", str(yolov5n_pt), "--data", str(yaml_file), "--img", "128", "--batch", "8",
                         "--workers", "0", "--task", "speed", "--project", str(tmp_path)])
    assert opt.conf_thres == 0.001 and opt.iou_thres == 0.6 and opt.max_det == 300  # ultralytics defaults
    val.main(opt)
    assert opt.conf_thres == 0.25 and opt.iou_thres == 0.45  # speed runs use detection thresholds


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_val.py::test_metrics_are_sane_and_files_written")
def test_rect_order_diagnostic_reproduces_val(small_set, yolov5n_pt, val_result):
    """benchmarks/rect_order.py rebuilds the figures per (image, letterbox shape); for the stable order it must give
    what val.run printed for the same images, size and batch, or its spread over tie orders would mean nothing."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import rect_order
    yaml_file, _ = small_set
    report = rect_order.run(yaml_file.parent / "images", yolov5n_pt, batch_size=4, img_size=IMGSZ, orders=3)
    (mp, mr, map50, map_, *_), _, _ = val_result[0]
    got = report["named"]["stable (this project)"]
    np.testing.assert_allclose([got[k] for k in rect_order.FIGURES], [mp, mr, map50, map_], atol=1e-4)
    assert report["images"] == N_IMAGES and report["image_shape_pairs"] >= N_IMAGES
    for k in rect_order.FIGURES:
        spread = report["random"][k]
        assert spread["min"] <= spread["median"] <= spread["max"]


@pytest.fixture(scope="module")
def exported_160(yolov5n_pt, tmp_path_factory):
    """yolov5n exported at 160 (written beside a copy of the weights: never into ../shared)."""
    from utils.backend import IS_TORCH
    if not IS_TORCH:
        pytest.skip("exports run in the PyTorch environment")
    import shutil

    import export
    d = tmp_path_factory.mktemp("exported")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    export.run(weights=str(d / "yolov5n.pt"), imgsz=[160], include=("onnx", "torchscript"))
    return d


def test_exported_models_give_the_pt_metrics(small_set, exported_160, tmp_path):
    """val.py runs .onnx (batch 1) and .torchscript on square letterboxed images, as ultralytics does for exports;
    the .pt on the same square images (the --task speed loader) gives the same P, R and mAPs."""
    import val
    yaml_file, _ = small_set
    kw = dict(data=str(yaml_file), imgsz=160, workers=0, project=tmp_path, plots=False)
    ref = val.run(weights=str(exported_160 / "yolov5n.pt"), batch_size=4, task="speed", name="pt", **kw)[0][:4]
    assert ref[2] > 0.2  # the model finds things here: equal metrics are not two zeros
    for f in ("yolov5n.onnx", "yolov5n.torchscript"):
        got = val.run(weights=str(exported_160 / f), batch_size=4, name=f, **kw)[0][:4]
        np.testing.assert_allclose(got, ref, atol=0.005, err_msg=f)


@pytest.mark.slow
def test_coco128_onnx_map_equals_pt(coco128_dir, exported_160, tmp_path):
    """The issue's check: `val.py --weights yolov5n.onnx` on coco128 at 640 gives the .pt's mAPs within 0.005. The .pt
    under the same command gives mAP50 0.542, mAP50-95 0.348 here (test_coco128_parity_with_official), the official
    code 0.544, 0.350; the .onnx gave 0.546, 0.349 (square batch-1 letterbox instead of rect batches)."""
    import shutil

    import export
    w = tmp_path / "yolov5n.pt"
    shutil.copy(exported_160 / "yolov5n.pt", w)
    (f,) = export.run(weights=str(w), imgsz=[640], include=("onnx",))
    data = tmp_path / "coco128"  # image links and copied labels: the label cache is written here, not in ../shared
    (data / "images").mkdir(parents=True)
    for im in (coco128_dir / "images" / "train2017").glob("*.jpg"):
        (data / "images" / im.name).symlink_to(im)
    shutil.copytree(coco128_dir / "labels" / "train2017", data / "labels")
    yaml_file = tmp_path / "coco128.yaml"
    yaml_file.write_text(f"path: {data}\ntrain: images\nval: images\n"
                         f"names: {json.dumps({i: str(i) for i in range(80)})}\n")
    cmd = [sys.executable, "val.py", "--weights", f, "--data", str(yaml_file), "--img", "640", "--batch", "32",
           "--workers", "2", "--project", str(tmp_path)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout + p.stderr
    assert "Forcing --batch-size 1" in out, out[-3000:]
    m = re.search(r"^\s+all\s+128\s+929\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert m, out[-3000:]
    map50, map_ = float(m.group(3)), float(m.group(4))
    assert abs(map50 - 0.542) <= 0.005 and abs(map_ - 0.348) <= 0.005, out[-1500:]


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_val.py::test_metrics_are_sane_and_files_written")
@pytest.mark.slow
def test_model_and_data_class_counts_differ_is_one_line(small_set, yolov5n_pt, tmp_path):
    """yolov5n.pt has 80 classes; a data YAML naming 2 stops val.py with one line naming the weights (exit 1)."""
    from utils.backend import BACKEND
    yaml_file, _ = small_set
    two = tmp_path / "two.yaml"
    two.write_text(f"path: {yaml_file.parent}\ntrain: images\nval: images\nnames: [a, b]\n")
    env = {**os.environ, "YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "val.py", "--weights", str(yolov5n_pt), "--data", str(two), "--img", "64",
                        "--device", "cpu", "--project", str(tmp_path / "runs")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = [ln for ln in p.stderr.splitlines() if "trained on different --data" in ln]
    assert len(lines) == 1 and str(yolov5n_pt) in lines[0] and "(80 classes)" in lines[0] \
        and "(2 classes)" in lines[0], p.stderr[-3000:]
