"""segment/train.py: the SEGMENT task on the engine. Fast: results.csv's columns are the official segmentation
ones, the fitness weights box and mask mAPs as official, the loop hands a batch's masks to the loss. Slow: a short
run under this process's backend writes best.pt and results.csv, and the official segment/val.py
(YOLO_REF_DIR, default ../ref/yolov5, with its venv beside it) reads that best.pt with the figures this project's
segment/val.py gives (batch 1)."""
import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.engine_helpers import tiny_parts
from tests.helpers.seg_data import make_tiny_seg
from utils import backend
from utils.backend import torch
from utils.engine.loop import TrainLoop
from utils.tasks.detect import DETECT
from utils.tasks.segment import SEGMENT, seg_fitness, segment_task

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))
REF_PY = REF.parent / "venv" / "bin" / "python"
# ultralytics/yolov5 utils/segment/metrics.py KEYS (5081342f): segment/train.py's results.csv after 'epoch'
OFFICIAL_KEYS = [
    "train/box_loss", "train/seg_loss", "train/obj_loss", "train/cls_loss",
    "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP_0.5(B)", "metrics/mAP_0.5:0.95(B)",
    "metrics/precision(M)", "metrics/recall(M)", "metrics/mAP_0.5(M)", "metrics/mAP_0.5:0.95(M)",
    "val/box_loss", "val/seg_loss", "val/obj_loss", "val/cls_loss", "x/lr0", "x/lr1", "x/lr2"]


def test_segment_results_keys_are_official():
    assert SEGMENT.results_keys() == OFFICIAL_KEYS
    assert segment_task(mask_ratio=1, overlap=False).results_keys() == OFFICIAL_KEYS
    assert DETECT.results_keys()[:4] == ["train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision"]


def test_segment_fitness_weights_box_and_mask_maps():
    row = np.array([0.5, 0.5, 0.2, 0.1, 0.5, 0.5, 0.4, 0.3, 9.0, 9.0, 9.0, 9.0])  # P, R and the losses weigh 0
    assert seg_fitness(row) == pytest.approx(0.1 * 0.2 + 0.9 * 0.1 + 0.1 * 0.4 + 0.9 * 0.3)
    assert seg_fitness(row[None]).shape == (1,)
    assert SEGMENT.fitness is seg_fitness


def test_loop_hands_batch_masks_to_the_loss():
    """Batches of five items (segmentation's: masks last) reach the loss as (pred, targets, masks)."""
    seen = []

    class MaskLoader:
        def __len__(self):
            return 2

        def __iter__(self):
            for i in range(2):
                im = backend.from_numpy(np.full((2, 3, 8, 8), 40 * i, np.uint8))
                yield im, torch.zeros(0, 6), [f"im{i}.jpg"], None, backend.from_numpy(np.full((2, 2, 2), i + 1,
                                                                                            np.uint8))

    def loss(pred, targets, masks):
        seen.append(backend.to_numpy(masks).copy())
        items = torch.stack([(pred ** 2).mean(), pred.abs().mean(), pred.mean() ** 2, pred.mean() * 0])
        return items.sum().reshape(1) * pred.shape[0], items.detach()

    task = dataclasses.replace(DETECT, loss_names=SEGMENT.loss_names, metric_names=SEGMENT.metric_names)
    parts = tiny_parts(epochs=1, nb=2, task=task)
    parts.train_loader, parts.compute_loss = MaskLoader(), loss
    loop = TrainLoop(parts)
    loop.train()
    assert [m.max() for m in seen] == [1, 2] and seen[0].shape == (2, 2, 2)
    assert len(loop.record.results) == 12  # 8 metrics and 4 val losses before any validation
    assert backend.to_numpy(loop.extras[0]).max() == 2  # what TrainBatchPlotHook hands plot_batch


_OFFICIAL_VAL = """
import segment.val as v
# half=False: the command line's default (run()'s half=True would put the official model in fp16 on the CPU)
r = v.run(data=sys.argv_data, weights=sys.argv_w, imgsz=64, batch_size=1, device='cpu', workers=0, plots=False,
          half=False, project=sys.argv_p, name='official')
print('FIGURES', ' '.join(repr(float(x)) for x in r[0][:8]))
"""


@pytest.mark.slow
def test_segment_train_run_and_official_val_reads_best_pt(shared_dir, tmp_path):
    data = make_tiny_seg(shared_dir, tmp_path / "seg")
    from utils.backend import BACKEND
    env = {**os.environ, "YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    args = ["--data", data, "--cfg", "yolov5n-seg.yaml", "--weights", shared_dir / "weights" / "yolov5n-seg-coco128.pt",
            "--img", "64", "--epochs", "2", "--batch-size", "4", "--workers", "1", "--project", tmp_path / "runs",
            "--name", "exp", "--noplots"]
    p = subprocess.run([sys.executable, str(ROOT / "segment" / "train.py"), *map(str, args)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    run = tmp_path / "runs" / "exp"
    best = run / "weights" / "best.pt"
    assert best.is_file() and (run / "weights" / "last.pt").is_file()
    with open(run / "results.csv") as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f)]
    assert rows[0] == ["epoch", *OFFICIAL_KEYS] and len(rows) == 3
    assert all(np.isfinite([float(x) for x in r]).all() for r in rows[1:])

    from segment.val import run as seg_val
    ours = np.array(seg_val(data=str(data), weights=str(best), imgsz=64, batch_size=1, device="cpu", workers=0,
                            plots=False, half=False, project=tmp_path / "val")[0][:8])
    assert ours[4:].max() > 0  # the pretrained model still finds masks at 64 px: equal zeros would prove little
    if not (REF / "segment" / "val.py").is_file() or not REF_PY.is_file():
        pytest.skip(f"no official checkout and venv at {REF} (YOLO_REF_DIR)")
    code = _OFFICIAL_VAL.replace("sys.argv_data", repr(str(data))).replace("sys.argv_w", repr(str(best))).replace(
        "sys.argv_p", repr(str(tmp_path / "refval")))
    o = subprocess.run([str(REF_PY), "-c", code], cwd=REF, capture_output=True, text=True, timeout=600,
                       env={k: v for k, v in os.environ.items() if not k.startswith(("YOLO_", "PYTHONPATH"))})
    figures = [ln.split()[1:] for ln in o.stdout.splitlines() if ln.startswith("FIGURES")]
    assert figures, o.stdout[-2000:] + o.stderr[-4000:]
    official = np.array([float(x) for x in figures[0]])
    np.testing.assert_allclose(ours, official, atol=1e-4, err_msg=json.dumps({"ours": ours.tolist(),
                                                                             "official": official.tolist()}))
