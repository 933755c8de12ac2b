"""Segmentation validation: polygon masks, the polygon dataset, the mask evaluator, and segment/val.py on the
official yolov5n-seg-coco128.pt against SEG_CLS.md's official figures (official segment/val.py, img 320, NMS time
limit lifted; box P, R, mAP50, mAP50-95, then mask P, R, mAP50, mAP50-95)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from utils.backend import IS_ONEFLOW
from utils.segment.masks import (crop_mask, mask_iou, masks2segments, overlap_to_instances, polygon2mask,
                                 polygons2masks, polygons2masks_overlap, process_mask, resize_masks)

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL = {1: (0.317, 0.0477, 0.0419, 0.0242, 0.314, 0.0383, 0.0324, 0.0153),
            32: (0.0844, 0.0908, 0.0402, 0.0236, 0.0269, 0.0997, 0.0307, 0.0134)}
TOL = np.array([0.005, 0.005, 0.002, 0.002] * 2)  # the issue's: P and R within 0.005, mAPs within 0.002


# ---- masks --------------------------------------------------------------------------------------------------------
def test_polygon_mask_fill_and_downsample():
    square = np.array([[2, 2], [10, 2], [10, 10], [2, 10]], np.float32)
    m = polygon2mask((16, 16), [square.reshape(-1)])
    assert m.dtype == np.uint8 and m[2:11, 2:11].all() and m.sum() == 81  # vertices inclusive, as cv2.fillPoly
    m4 = polygon2mask((16, 16), [square.reshape(-1)], downsample_ratio=4)
    assert m4.shape == (4, 4) and m4[1:3, 1:3].all()
    assert polygons2masks((16, 16), [square, square + 3]).shape == (2, 16, 16)


def test_overlap_mask_orders_by_area_small_on_top():
    big = np.array([[0, 0], [15, 0], [15, 15], [0, 15]], np.float32)
    small = np.array([[4, 4], [8, 4], [8, 8], [4, 8]], np.float32)
    mask, order = polygons2masks_overlap((16, 16), [small, big])
    assert order.tolist() == [1, 0]  # big first (value 1), small drawn over it (value 2)
    assert mask[6, 6] == 2 and mask[0, 0] == 1
    inst = overlap_to_instances(mask, 2)
    assert inst[1].sum() == 25 and inst[0].sum() == 256 - 25


def test_crop_and_process_mask():
    masks = np.ones((1, 8, 8), np.float32)
    assert crop_mask(masks, np.array([[2, 3, 5, 7]], np.float32))[0].sum() == 3 * 4
    protos = np.zeros((2, 4, 4), np.float32)
    protos[0] = 5.0  # coefficient 1 on it -> sigmoid(5) > 0.5 everywhere
    out = process_mask(protos, np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([[0, 0, 8, 8], [0, 0, 16, 16]]),
                       (16, 16))
    assert out.shape == (2, 4, 4) and out[0, :2, :2].all() and not out[0, 2:, :].any() and not out[1].any()
    up = process_mask(protos, np.array([[1.0, 0.0]]), np.array([[0, 0, 16, 16]]), (16, 16), upsample=True)
    assert up.shape == (1, 16, 16) and up.all()


def test_mask_iou_and_resize_and_segments():
    a = np.zeros((2, 4, 4), np.float32)
    a[0, :2], a[1, :, :2] = 1, 1
    iou = mask_iou(a.reshape(2, -1), a.reshape(2, -1))
    np.testing.assert_allclose(np.diag(iou), 1, atol=1e-6)
    assert iou[0, 1] == pytest.approx(4 / 12, abs=1e-6)
    assert resize_masks(a, (8, 8)).shape == (2, 8, 8)
    seg = masks2segments(a.astype(bool))
    assert len(seg) == 2 and seg[0].shape[1] == 2 and seg[0][:, 1].max() == 1


# ---- dataset --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seg_yaml(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("seg")
    src = shared_dir / "data" / "coco128-seg"
    (d / "images").mkdir()
    (d / "labels").mkdir()
    for stem in ("000000000009", "000000000025", "000000000030", "000000000250"):  # 250: a background image
        (d / "images" / f"{stem}.jpg").symlink_to(src / "images" / "train2017" / f"{stem}.jpg")
        lb = src / "labels" / "train2017" / f"{stem}.txt"
        if lb.exists():
            (d / "labels" / f"{stem}.txt").symlink_to(lb)
    return d / "images"


@pytest.mark.parametrize("overlap", [False, True])
def test_seg_dataset_items_carry_masks(seg_yaml, overlap):
    from utils.segment.dataset import create_seg_dataloader
    loader, ds = create_seg_dataloader(str(seg_yaml), 160, 2, 32, rect=True, pad=0.5, workers=0,
                                       overlap_mask=overlap, mask_downsample_ratio=4 if overlap else 1)
    n_inst = 0
    for im, targets, paths, shapes, masks in loader:
        b, _, h, w = im.shape
        r = 4 if overlap else 1
        assert tuple(masks.shape[1:]) == (h // r, w // r)
        assert masks.shape[0] == (b if overlap else targets.shape[0])
        n_inst += targets.shape[0]
        m = np.asarray(masks.numpy() if hasattr(masks, "numpy") else masks)
        if overlap:
            for i in range(b):
                k = int((np.asarray(targets[:, 0]) == i).sum())
                assert m[i].max() <= k
        else:
            assert all(m[j].any() for j in range(m.shape[0]))  # every instance drew pixels
    assert n_inst == sum(len(x) for x in ds.labels)


# ---- evaluator ------------------------------------------------------------------------------------------------------
def test_perfect_predictions_score_095_box_and_mask():
    """Predictions equal to the labels (box and mask) match at every IoU threshold: AP 0.995 for both."""
    from utils.segment.evaluator import SegmentationEvaluator
    h = w = 64
    seg = [np.array([[8, 8], [40, 8], [40, 40], [8, 40]], np.float32),
           np.array([[44, 20], [60, 20], [60, 60], [44, 60]], np.float32)]
    gt = polygons2masks((h, w), seg)
    targets = np.array([[0, 1, 24 / w, 24 / h, 32 / w, 32 / h], [0, 2, 52 / w, 40 / h, 16 / w, 40 / h]], np.float32)
    # prototypes at full resolution: one channel per instance holding +/-10 where its mask is on/off
    protos = np.where(gt > 0, 10.0, -10.0).astype(np.float32)
    pred = np.array([[8, 8, 41, 41, 0.9, 1, 1, 0], [44, 20, 61, 61, 0.8, 2, 0, 1]], np.float32)
    ev = SegmentationEvaluator(3, {0: "a", 1: "b", 2: "c"})
    shapes = [((h, w), ((1.0, 1.0), (0.0, 0.0)))]
    ev.update([pred], protos[None], targets, gt, shapes, (h, w))
    m = ev.compute()
    assert m.box.map50 == pytest.approx(0.995) and m.mask.map50_95 == pytest.approx(0.995)
    assert m.results()[4:8] == pytest.approx((1.0, 1.0, 0.995, 0.995), abs=1e-3)


# ---- segment/val.py on the official checkpoint ----------------------------------------------------------------------
def _val(shared_dir, tmp_path, batch, images=None, python=None, env=None, name=None):
    """segment/val.py's 'all' line (8 figures) on coco128-seg (or its first `images` images) at 320 px."""
    yaml_file = tmp_path / "seg.yaml"
    names = (ROOT / "data" / "coco128-seg.yaml").read_text().split("names:", 1)[1]
    root = shared_dir / "data" / "coco128-seg"
    val = "images/train2017"
    if images is not None:  # a list file of the first images, beside the yaml (its label cache is written there)
        files = sorted((root / "images" / "train2017").glob("*.jpg"))[:images]
        (tmp_path / "first.txt").write_text("".join(f"{f}\n" for f in files))
        val = str(tmp_path / "first.txt")
    yaml_file.write_text(f"path: {root}\ntrain: images/train2017\nval: {val}\nnames:{names}")
    name = name or f"b{batch}"
    cmd = [python or sys.executable, "segment/val.py", "--weights",
           str(shared_dir / "weights" / "yolov5n-seg-coco128.pt"), "--data", str(yaml_file), "--img", "320",
           "--batch", str(batch), "--device", "cpu", "--workers", "2", "--project", str(tmp_path), "--name", name]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                       env=env or {**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout + p.stderr
    m = re.search(r"^\s+all\s+" + (r"128\s+929" if images is None else str(images) + r"\s+\d+") + r"\s+([\d.]+)" * 8,
                  out, re.M)
    assert p.returncode == 0 and m, out[-3000:]
    assert (tmp_path / name).is_dir()
    return np.array([float(v) for v in m.groups()])


@pytest.mark.slow
@pytest.mark.skipif(IS_ONEFLOW, reason="OneFlow runs batch 32 only (its CPU kernels are single-threaded)")
def test_segment_val_batch1_matches_official(shared_dir, tmp_path):
    got = _val(shared_dir, tmp_path, 1)
    assert (np.abs(got - OFFICIAL[1]) <= TOL + 1e-9).all(), (got, OFFICIAL[1])


@pytest.mark.slow
@pytest.mark.oneflow_covered_by("tests/test_segment/test_segment_val.py::test_segment_val_oneflow_equals_pytorch")
def test_segment_val_batch32_matches_official(shared_dir, tmp_path):
    """Box P is held to 0.02, the other seven figures to the issue's tolerances. Which images share a padded rect
    batch decides the letterbox each image gets: the official code leaves ties of equal aspect ratio to numpy's
    unstable sort, this project sorts them stably (both backends, numpy 1 and 2, give the same batches). Measured:
    stable order 0.0716 0.0951 0.0396 0.0227 / 0.0269 0.0997 0.0302 0.0134; numpy 2's own order reproduces the
    official line exactly (test_segment_val_with_numpy2_order_is_official)."""
    got = _val(shared_dir, tmp_path, 32)
    tol = TOL.copy()
    tol[0] = 0.02
    assert (np.abs(got - OFFICIAL[32]) <= tol + 1e-9).all(), (got, OFFICIAL[32])


@pytest.mark.slow
@pytest.mark.skipif(not IS_ONEFLOW,
                    reason="the OneFlow suite's: the PyTorch suite holds PyTorch to the official figures")
def test_segment_val_oneflow_equals_pytorch(shared_dir, tmp_path, other_python):
    """segment/val.py under OneFlow gives PyTorch's eight figures on the first 16 images at batch 8 (PyTorch's are
    held to the official ones on all 128 by the tests above; OneFlow's CPU convolutions make all 128 cost 3 minutes
    here). Measured: all eight identical as printed (box mAP50 0.13, mask mAP50 0.108)."""
    ours = _val(shared_dir, tmp_path, 8, images=16, name="oneflow")
    theirs = _val(shared_dir, tmp_path, 8, images=16, python=str(other_python.python), env=other_python.env,
                  name="torch")
    assert (np.abs(ours - theirs) <= 0.002).all(), (ours, theirs)
    assert theirs[2] > 0.05 and theirs[6] > 0.05, theirs  # mAP50 of boxes and masks: the model found objects


@pytest.mark.slow
@pytest.mark.skipif(IS_ONEFLOW or int(np.__version__.split(".")[0]) < 2,
                    reason="the official tie order is numpy 2's default argsort (the official venv's numpy)")
def test_segment_val_with_numpy2_order_is_official(shared_dir, tmp_path, monkeypatch):
    import utils.data.dataset as dataset_module
    from utils.data.files import ultralytics_rect_wh

    def numpy_default_order(shapes, orientations=None):
        if orientations is not None:
            shapes = np.array([ultralytics_rect_wh(s, o) for s, o in zip(shapes, orientations)], float).reshape(-1, 2)
        ar = shapes[:, 1] / shapes[:, 0]
        order = ar.argsort()  # what official LoadImagesAndLabels does
        return order, ar[order]

    monkeypatch.setattr(dataset_module, "rect_order", numpy_default_order)
    from segment.val import run
    yaml_file = tmp_path / "seg.yaml"
    names = (ROOT / "data" / "coco128-seg.yaml").read_text().split("names:", 1)[1]
    yaml_file.write_text(f"path: {shared_dir / 'data' / 'coco128-seg'}\ntrain: images/train2017\n"
                         f"val: images/train2017\nnames:{names}")
    results, _, _ = run(data=str(yaml_file), weights=str(shared_dir / "weights" / "yolov5n-seg-coco128.pt"),
                        imgsz=320, batch_size=32, device="cpu", workers=2, plots=False, project=tmp_path)
    got = np.array(results[:8])
    assert (np.abs(got - OFFICIAL[32]) <= TOL + 1e-9).all(), (got, OFFICIAL[32])


def test_segment_val_task_study_writes_one_row_per_size(tmp_path, monkeypatch):
    """--task study: every official image size (256 to 1536 by 128) validated, one study_<data>_<weights>.txt row each
    with the 12 figures and 3 times, as official segment/val.py; an unknown --task is one line (UserError)."""
    import segment.val as seg_val
    from utils.errors import UserError
    sizes = []

    def fake_run(**kw):
        sizes.append(kw["imgsz"])
        assert kw["plots"] is False
        return tuple(float(kw["imgsz"]) + i for i in range(12)), None, (1.0, 2.0, 3.0)

    monkeypatch.setattr(seg_val, "run", fake_run)
    monkeypatch.setattr("utils.evaluation.runner.select_device", lambda *a, **k: "cpu")  # speed_or_study's
    monkeypatch.chdir(tmp_path)
    opt = seg_val.parse_opt(["--task", "study", "--weights", "w1.pt", "--data", "d.yaml"])
    seg_val.main(opt)
    assert sizes == list(range(256, 1537, 128))
    rows = np.loadtxt(tmp_path / "study_d_w1.txt")
    assert rows.shape == (11, 15) and rows[0, 0] == 256 and rows[-1, 11] == 1536 + 11
    assert rows[3, 12:].tolist() == [1, 2, 3]
    assert (tmp_path / "study.png").stat().st_size > 0  # drawn from the files, as official (plot_val_study)
    with pytest.raises(UserError, match="--task nope is not one of"):
        seg_val.main(seg_val.parse_opt(["--task", "nope"]))
