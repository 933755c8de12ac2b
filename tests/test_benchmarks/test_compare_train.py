"""benchmarks/compare_train.py: skips cleanly without the official checkout, reads val.py's summary row, and (slow,
with the checkout) runs both trainers alternately on their own coco128 copies and reports medians and a ratio."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))


def _run(args, timeout=120):
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_train.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_skips_cleanly_without_the_official_checkout(tmp_path):
    p = _run(["--ref", str(tmp_path / "nowhere"), "--json", str(tmp_path / "c.json")])
    assert p.returncode == 0 and "skipped: no official checkout" in p.stdout
    assert "git clone https://github.com/ultralytics/yolov5" in p.stdout and "venv" in p.stdout
    assert not (tmp_path / "c.json").exists()


def test_reads_the_all_row_and_copies_the_dataset(tmp_path, coco128_dir):
    from benchmarks.compare_train import dataset_copy, parse_all_line
    text = "Class Images Instances P R mAP50 mAP50-95\n                   all        128        929      0.634 " \
           "     0.48      0.544       0.35\n      person        128        254      0.8      0.6   0.7   0.4\n"
    assert parse_all_line(text) == [0.634, 0.48, 0.544, 0.35]
    assert parse_all_line("no table") is None
    y = dataset_copy(coco128_dir, tmp_path / "c128")
    import yaml
    d = yaml.safe_load(y.read_text())
    assert d["path"] == str(tmp_path / "c128") and len(d["names"]) == 80
    assert len(list((tmp_path / "c128" / "images" / "train2017").iterdir())) == 128
    assert not list((tmp_path / "c128").rglob("*.cache"))
    from utils.data.files import is_writeable  # the project's own test (mode bits too): each trainer caches labels
    assert is_writeable(tmp_path / "c128" / "labels" / "train2017")


@pytest.mark.slow
@pytest.mark.skipif(not (REF / "train.py").is_file() or not (REF.parent / "venv" / "bin" / "python").exists(),
                    reason=f"no official checkout and venv at {REF}")
def test_both_trainers_run_alternately(tmp_path):
    out = tmp_path / "c.json"
    p = _run(["--ref", str(REF), "--configs", "n320", "--img", "64", "--epochs", "1", "--runs", "1",
              "--workers", "1", "--no-val", "--json", str(out)], timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())["train"]["n320"]
    assert r["official"]["failed"] == 0 and r["project"]["failed"] == 0, p.stdout[-3000:]
    assert r["official"]["median_s"] > 0 and r["project"]["median_s"] > 0 and r["ratio_official_over_project"] > 0
    assert r["official"]["peak_mib"] > 100 and r["project"]["peak_mib"] > 100
    assert r["official"]["median_cpu_s"] > 1 and r["project"]["median_cpu_s"] > 1  # trainers and their workers
    assert "ratio" in p.stdout
