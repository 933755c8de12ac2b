"""The CUDA tier, whole runs on cuda:0: val.py with yolov5n.pt on coco128 gives the CPU's figures, and a short
train.py run and its --resume work there. Slow (whole processes); they skip without a GPU unless
GPU_KIT_TEST_DEVICE=cpu, which runs the same logic on the CPU at a smaller size (tests/helpers/cuda_helpers.py)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cuda_helpers import ROOT, kit_dataset, tier_device
from utils.backend import IS_TORCH

pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not IS_TORCH, reason="the GPU tier runs the PyTorch backend")]


def _env():
    return {**os.environ, "YOLO_BACKEND": "torch", "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}


def _all_row(text):
    m = re.search(r"^\s+all\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    return None if m is None else [float(v) for v in m.groups()]


def test_val_on_cuda_gives_the_cpu_figures(coco128_dir, yolov5n_pt, tmp_path):
    """val.py --weights yolov5n.pt on coco128 (640, batch 32) on --device 0 and --device cpu: mAP50 and mAP50-95
    within 0.002 (TF32 convolutions and another NMS kernel move scores by rounding, never a detection's fate far)."""
    dev = tier_device()
    cuda = dev.type == "cuda"
    data = kit_dataset(coco128_dir, tmp_path, None if cuda else 8)  # swapped: 8 images at 160, the logic only
    img, batch = ("640", "32") if cuda else ("160", "8")
    rows = {}
    for device in (["0", "cpu"] if cuda else ["cpu", "cpu"]):
        cmd = [sys.executable, "val.py", "--weights", str(yolov5n_pt), "--data", str(data), "--img", img, "--batch",
               batch, "--device", device, "--workers", "4" if cuda else "0", "--project", str(tmp_path),
               "--name", f"val_{device}_{len(rows)}"]
        p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out[-3000:]
        rows[f"{device}_{len(rows)}"] = _all_row(out)
        assert rows[f"{device}_{len(rows) - 1}"] is not None, out[-3000:]
    a, b = rows.values()
    assert a[:2] == b[:2]  # images, instances
    assert abs(a[4] - b[4]) <= 0.002 and abs(a[5] - b[5]) <= 0.002, rows
    if cuda:
        assert a[0] == 128 and a[4] > 0.4, rows  # yolov5n on coco128 at 640: mAP50 about 0.54


def test_train_and_resume_on_cuda(coco128_dir, tmp_path):
    """train.py --device 0 (default AMP, both flags) for 3 epochs with a checkpoint every epoch; then the epoch-0
    checkpoint, as last.pt of a fresh run folder, resumes with --resume and trains epochs 1 and 2 with the
    uninterrupted run's learning rates; the losses are finite and the weights load on the CPU."""
    dev = tier_device()
    cuda = dev.type == "cuda"
    data = kit_dataset(coco128_dir, tmp_path, 16)
    args = ["--data", str(data), "--cfg", "yolov5n.yaml", "--weights", "", "--img", "128" if cuda else "64",
            "--batch-size", "8", "--epochs", "3", "--workers", "2" if cuda else "0", "--seed", "1", "--device",
            "0" if cuda else "cpu", "--noplots", "--save-period", "1", "--bbox_iou_optim", "--multi_tensor_optimizer",
            "--project", str(tmp_path / "ref"), "--name", "exp"]
    p = subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    ref = tmp_path / "ref" / "exp"
    from utils.checkpoint import load_checkpoint, save_checkpoint
    ck = load_checkpoint(ref / "weights" / "epoch0.pt", map_location="cpu")
    assert ck["epoch"] == 0
    run = tmp_path / "resumed" / "exp"
    save_checkpoint(ck, run / "weights" / "last.pt")
    ref_rows = (ref / "results.csv").read_text().splitlines()
    (run / "results.csv").write_text("\n".join(ref_rows[:2]) + "\n")
    r = subprocess.run([sys.executable, "train.py", "--resume", str(run / "weights" / "last.pt")], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "from epoch 1 to 3 total epochs" in out, out[-3000:]
    rows = [[float(x) for x in line.split(",")] for line in (run / "results.csv").read_text().splitlines()[1:]]
    want = [[float(x) for x in line.split(",")] for line in ref_rows[1:]]
    assert [row[0] for row in rows] == [0, 1, 2]
    for got, exp in zip(rows[1:], want[1:]):
        assert got[-3:] == exp[-3:]  # lr0..lr2 of the resumed epochs: the schedule went on from epoch 1
        assert np.isfinite(got[1:4]).all()  # train box, obj, cls losses
    last = load_checkpoint(run / "weights" / "last.pt", map_location="cpu")
    assert last["epoch"] == -1 and all(Path(run / "weights" / f).exists() for f in ("last.pt", "best.pt"))
