"""A cut-short official .pt (a broken download or copy) stops every reader and every entry script with one line that
names the file, says it is truncated and what to do (re-download or re-export it): exit 1, no traceback."""
import os
import subprocess
import sys

import pytest

from tests.helpers.process_helpers import without_run_header
from utils.checkpoint import CheckpointError, load_any, load_checkpoint, read_official_pt
from utils.checkpoint.records import DAMAGED_REMEDY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cut(src, dst, fraction):
    data = src.read_bytes()
    dst.write_bytes(data[:int(len(data) * fraction)])
    return dst


@pytest.mark.parametrize("fraction", [0.01, 0.3, 0.6, 0.9, 0.999])
def test_cut_official_pt_is_one_clear_error_in_every_reader(tmp_path, yolov5n_pt, fraction):
    from models.experimental import attempt_load
    f = _cut(yolov5n_pt, tmp_path / "yolov5n.pt", fraction)
    for read in (load_checkpoint, load_any, read_official_pt, attempt_load):
        with pytest.raises(CheckpointError) as e:
            read(f)
        msg = str(e.value)
        assert str(f) in msg and "truncated" in msg and DAMAGED_REMEDY in msg and "\n" not in msg, (read, msg)


@pytest.fixture(scope="module")
def cut_pt(tmp_path_factory, yolov5n_pt):
    return _cut(yolov5n_pt, tmp_path_factory.mktemp("cut") / "yolov5n.pt", 0.6)


@pytest.fixture(scope="module")
def coco128_yaml(tmp_path_factory, coco128_dir):
    """The shared coco128 by absolute path: train.py checks the data before the weights, and a clean clone has no
    ../datasets/coco128 for the stock coco128.yaml (nothing is downloaded in the tests)."""
    y = tmp_path_factory.mktemp("data") / "coco128.yaml"
    y.write_text(f"path: {coco128_dir}\ntrain: images/train2017\nval: images/train2017\nnc: 80\n"
                 f"names: {[str(i) for i in range(80)]}\n")
    return y


@pytest.mark.slow
@pytest.mark.parametrize("script,args", [
    ("val.py", ["--weights", "{w}", "--data", "{data}"]),
    ("detect.py", ["--weights", "{w}", "--source", os.path.join(ROOT, "data", "images")]),
    ("train.py", ["--weights", "{w}", "--data", "{data}", "--epochs", "1", "--batch-size", "4"]),
    ("train.py", ["--resume", "{w}"]),
], ids=["val", "detect", "train-weights", "train-resume"])
def test_entry_scripts_report_a_cut_pt_in_one_line(script, args, cut_pt, coco128_yaml, tmp_path):
    from utils.backend import BACKEND
    env = {**os.environ, "YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PYTHONPATH": ROOT}
    extra = [] if "--resume" in args else ["--device", "cpu", "--img", "64", "--project", str(tmp_path / "runs")]
    cmd = [sys.executable, script, *[a.format(w=cut_pt, data=coco128_yaml) for a in args], *extra]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = [ln for ln in without_run_header(p.stderr) if str(cut_pt) in ln]  # not the arguments line's weights=
    assert len(lines) == 1 and "truncated" in lines[0] and DAMAGED_REMEDY in lines[0], p.stderr[-3000:]
    assert "persistent_load" not in p.stderr


def test_kind_check_skips_the_opcode_walk_only_when_no_mark_is_in_the_pickle(tmp_path, yolov5n_pt, monkeypatch):
    """check_detection_kind walks a pickle's opcodes (slow, in Python) only when a foreign mark's bytes are in it; an
    Ultralytics-8 pickle is still named."""
    import zipfile

    from utils.checkpoint import kind
    walked = []
    real = kind.pickle_globals
    monkeypatch.setattr(kind, "pickle_globals", lambda data: walked.append(1) or real(data))
    kind.check_detection_kind(yolov5n_pt)
    assert walked == []
    pk = b"\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01cultralytics.nn.tasks\nDetectionModel\nq\x02)\x81q\x03}q\x04bs."
    f = tmp_path / "y8.pt"
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("y8/data.pkl", pk)
    with pytest.raises(kind.CheckpointError, match="Ultralytics YOLOv8/YOLO11"):
        kind.check_detection_kind(f)
    assert walked == [1]
