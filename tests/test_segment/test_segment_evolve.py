"""segment/train.py --evolve as official: evolve.csv starts with the 12 columns official segment/train.py writes
(ultralytics utils/segment/metrics.py KEYS[4:16]: box and mask metrics, then the val losses), rows are ranked by the
segmentation fitness (box plus mask mAPs), a detection evolve.csv cannot seed a segmentation search. Fast: evolve()
with a stand-in for training. Slow: two generations of the real script on four coco128-seg images at 64 px."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.seg_data import make_tiny_seg
from utils.evolve import DETECTION, EvolveColumns, EvolveError, evolve, initial_population, read_evolve_csv, record
from utils.tasks.detect import DETECT
from utils.tasks.segment import SEGMENT, segment_task

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_SEG_EVOLVE_KEYS = (
    "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP_0.5(B)", "metrics/mAP_0.5:0.95(B)",
    "metrics/precision(M)", "metrics/recall(M)", "metrics/mAP_0.5(M)", "metrics/mAP_0.5:0.95(M)",
    "val/box_loss", "val/seg_loss", "val/obj_loss", "val/cls_loss")


def _hyp():
    return yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())


def test_evolve_columns_of_the_tasks():
    seg = EvolveColumns.of(SEGMENT)
    assert seg.result_keys == OFFICIAL_SEG_EVOLVE_KEYS
    assert EvolveColumns.of(segment_task(mask_ratio=1, overlap=False)).result_keys == OFFICIAL_SEG_EVOLVE_KEYS
    assert EvolveColumns.of(DETECT).result_keys == DETECTION.result_keys
    rows = np.array([[0, 0, 0.5, 0.2, 0, 0, 0.0, 0.0, 1, 1, 1, 1],   # better boxes
                     [0, 0, 0.4, 0.2, 0, 0, 0.4, 0.3, 1, 1, 1, 1]])  # a little worse boxes, far better masks
    np.testing.assert_allclose(seg.fitness(rows), [0.23, 0.04 + 0.18 + 0.04 + 0.27])


def test_segment_evolve_ranks_by_box_and_mask_fitness(tmp_path):
    """Generation 1 has worse boxes but better masks: it is the best (hyp_evolve.yaml), as segmentation's fitness says;
    detection's would pick generation 0. Mutants descend from it."""
    hyp = _hyp()
    results = {0.01: (0.5, 0.5, 0.5, 0.3, 0.5, 0.5, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4),
               0.02: (0.5, 0.5, 0.4, 0.2, 0.5, 0.5, 0.5, 0.4, 0.1, 0.2, 0.3, 0.4)}
    trained = []

    def fake_train(h, opt, device):
        trained.append(dict(h))
        return results.get(h["lr0"], (0.0,) * 12)

    pop = tmp_path / "pop"
    pop.mkdir()
    (pop / "x.yaml").write_text(yaml.safe_dump({"lr0": 0.02}))
    opt = argparse.Namespace(evolve=3, save_dir=str(tmp_path / "run"), evolve_population=str(pop), resume_evolve=None,
                             bucket="")
    evolve(dict(hyp), opt, None, fake_train, columns=EvolveColumns.of(SEGMENT), script="segment/train.py")
    keys, x = read_evolve_csv(tmp_path / "run" / "evolve.csv")
    assert tuple(keys[:12]) == OFFICIAL_SEG_EVOLVE_KEYS and keys[12:] == list(hyp)
    assert x.shape == (3, 12 + len(hyp))
    np.testing.assert_allclose(x[1, :12], results[0.02], atol=1e-6)
    text = (tmp_path / "run" / "hyp_evolve.yaml").read_text()
    assert "# Best generation: 1" in text and "metrics/mAP_0.5:0.95(M)" in text
    best = yaml.safe_load(text)
    assert best["lr0"] == pytest.approx(0.02) and set(best) == set(hyp)  # hyperparameters only
    # the mutant's parent is one of the rows; lr0 stays within the META limits
    assert trained[2] != trained[0] and trained[2] != trained[1] and 1e-5 <= trained[2]["lr0"] <= 0.1


def test_segment_resume_evolve_refuses_a_detection_csv(tmp_path):
    hyp = _hyp()
    det = tmp_path / "det"
    det.mkdir()
    record([0.5, 0.4, 0.3, 0.2, 0.01, 0.02, 0.03], hyp, det)
    with pytest.raises(EvolveError, match="not an evolve.csv of this task"):
        initial_population(hyp, resume=str(det / "evolve.csv"), csv=tmp_path / "e.csv",
                           columns=EvolveColumns.of(SEGMENT))
    seg = tmp_path / "seg"
    seg.mkdir()
    record([0.1] * 12, hyp, seg, columns=EvolveColumns.of(SEGMENT))
    assert initial_population(hyp, resume=str(seg / "evolve.csv"), csv=tmp_path / "e.csv",
                              columns=EvolveColumns.of(SEGMENT)) == []
    with pytest.raises(EvolveError, match="not an evolve.csv of this task"):
        initial_population(hyp, resume=str(seg / "evolve.csv"), csv=tmp_path / "e2.csv")  # detection's search


def _seg_train(args, tmp_path):
    from utils.backend import BACKEND
    env = {**os.environ, "YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "segment" / "train.py"), *map(str, args)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_segment_train_evolve_two_generations(shared_dir, tmp_path):
    data = make_tiny_seg(shared_dir, tmp_path / "seg")
    args = ["--data", data, "--cfg", "yolov5n-seg.yaml", "--weights", shared_dir / "weights" / "yolov5n-seg-coco128.pt",
            "--img", "64", "--epochs", "1", "--batch-size", "4", "--workers", "0", "--project", tmp_path / "runs",
            "--name", "cfg", "--evolve", "2", "--evolve_population", tmp_path / "no_hyps_here.yaml"]
    (tmp_path / "no_hyps_here.yaml").write_text("lr0: 0.02\n")  # generation 1: --hyp with this lr0
    p = _seg_train(args, tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    run = tmp_path / "runs" / "yolov5n-seg"  # --name cfg: named after the model YAML, as official
    keys, x = read_evolve_csv(run / "evolve.csv")
    assert tuple(keys[:12]) == OFFICIAL_SEG_EVOLVE_KEYS and x.shape[0] == 2
    assert x[1, keys.index("lr0")] == pytest.approx(0.02) and x[0, keys.index("lr0")] == pytest.approx(0.01)
    assert np.isfinite(x[:, :12]).all() and (x[:, 8:12] > 0).all()  # the val losses of each generation's last epoch
    assert (run / "hyp_evolve.yaml").is_file() and (run / "evolve.png").is_file()
    assert "python segment/train.py --hyp" in p.stdout + p.stderr
    assert not list(run.rglob("*.pt")) and not list(run.glob("*.jpg"))  # no checkpoints, no plots, as official


@pytest.mark.slow
def test_segment_train_quad_refused_before_the_run_folder(shared_dir, tmp_path):
    data = make_tiny_seg(shared_dir, tmp_path / "seg")
    p = _seg_train(["--data", data, "--cfg", "yolov5n-seg.yaml", "--weights", "", "--img", "64", "--epochs", "1",
                    "--project", tmp_path / "runs", "--quad"], tmp_path)
    assert p.returncode == 1 and "--quad is not available for segmentation" in p.stderr + p.stdout
    assert len((p.stderr + p.stdout).strip().splitlines()) <= 3
    assert not (tmp_path / "runs").exists()
