"""benchmarks/steady_state.py: skips cleanly without the official checkout, refuses a run with no timed epoch, and
(slow, with the checkout) clocks both trainers alternately and writes pairs the results page renders."""
import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers.process_helpers import run_benchmark

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))
pytestmark = pytest.mark.framework_free  # it starts trainers as child processes: the same under either suite


def _run(args, timeout=120):
    return run_benchmark("steady_state", args, timeout)


def test_skips_cleanly_without_the_official_checkout(tmp_path):
    p = _run(["--ref", str(tmp_path / "nowhere"), "--json", str(tmp_path / "s.json")])
    assert p.returncode == 0 and "skipped: no official checkout" in p.stdout, p.stdout + p.stderr
    assert "git clone https://github.com/ultralytics/yolov5" in p.stdout
    assert not (tmp_path / "s.json").exists()


def test_refuses_a_run_without_a_timed_epoch(tmp_path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "train.py").write_text("")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    p = _run(["--ref", str(tmp_path / "ref"), "--epochs", "1", "--json", str(tmp_path / "s.json")])
    assert p.returncode != 0 and "--epochs must be at least 2" in p.stdout + p.stderr
    assert not (tmp_path / "s.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(not (REF / "train.py").is_file() or not (REF.parent / "venv" / "bin" / "python").exists(),
                    reason=f"no official checkout and venv at {REF}")
def test_both_trainers_are_clocked_alternately(tmp_path):
    out = tmp_path / "s.json"
    p = _run(["--ref", str(REF), "--pairs", "1", "--images", "48", "--epochs", "2", "--workers", "1", "--json",
              str(out)], timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "train_clock" and doc["images"] == 48 and len(doc["pairs"]) == 1
    pair = doc["pairs"][0]
    assert pair["official_img_s"] > 0 and pair["project_img_s"] > 0, p.stdout
    assert pair["ratio"] == pytest.approx(pair["project_img_s"] / pair["official_img_s"], rel=0.01)
    assert pair["official_autocast"] == []  # the official trainer does not autocast on the CPU
    from benchmarks.results_tables import train_clock_rows
    header, rows = train_clock_rows(doc)
    assert rows[0][0] == "yolov5n 320 b16" and rows[0][-1] not in ("-", "")
