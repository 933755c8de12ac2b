"""Names from files never become paths unmade-safe (utils/path_names.py): class names from a checkpoint given to
detect.py --save-crop or to the hub Detections, and image/stream names, each become one path component inside the
run folder."""
import os
from pathlib import Path

import numpy as np
import pytest

from utils.path_names import safe_path_component

HOSTILE = {0: "../../escaped", 1: "/tmp/absolute", 2: "..", 3: "a\\b\x00c", 4: "é" * 300}


@pytest.mark.parametrize("name", [*HOSTILE.values(), "", ".", 7, "person", "traffic light"])
def test_one_component_that_stays_in_its_folder(name, tmp_path):
    c = safe_path_component(name)
    p = tmp_path / c
    assert c and Path(c).name == c and p.parent == tmp_path and c not in (".", "..")
    assert len(c.encode()) <= 255
    if isinstance(name, str) and name and name.strip(".") and not set(name) & {"/", "\\", "\x00"} and len(name) < 80:
        assert c == name  # ordinary names unchanged


def _all_files(root):
    return [p for p in Path(root).rglob("*") if p.is_file()]


def test_detect_crops_stay_in_the_run_folder(tmp_path):
    from utils.inference.outputs import DetectionOutputs
    run = tmp_path / "runs" / "exp"
    (run / "labels").mkdir(parents=True)  # detect.py makes it with the run folder
    out = DetectionOutputs(run, HOSTILE, save_img=True, save_txt=True, save_crop=True)
    im = np.full((64, 64, 3), 100, np.uint8)
    det = np.array([[4, 4, 30, 30, 0.9, c] for c in HOSTILE], np.float32)
    out.write(0, Path("/data/..jpg"), im, det, 0, "image", None)
    out.write(0, Path("rtsp_//cam/.."), im, det[:1], 3, "stream", None)
    out.close()
    files = _all_files(tmp_path)
    assert files and all(run in f.parents for f in files), files
    crops = sorted(p.name for p in (run / "crops").iterdir())
    assert crops == sorted(safe_path_component(n) for n in HOSTILE.values())
    assert not (tmp_path / "escaped").exists() and not Path("/tmp/absolute").exists()


def test_hub_detections_crops_stay_in_the_save_folder(tmp_path):
    from models.autoshape import Detections
    from utils.backend import from_numpy
    im = np.full((64, 64, 3), 100, np.uint8)
    pred = from_numpy(np.array([[4, 4, 30, 30, 0.9, c] for c in HOSTILE], np.float32))
    save = tmp_path / "runs" / "detect" / "exp"
    save.mkdir(parents=True)
    d = Detections([im], [pred], ["../up.jpg"], names=HOSTILE, shape=(64, 64))
    crops = d.crop(save=True, save_dir=save, exist_ok=True)
    assert len(crops) == len(HOSTILE)
    files = _all_files(tmp_path)
    assert files and all(save in f.parents for f in files), files


def test_log_shows_a_non_utf8_file_name_escaped(tmp_path):
    """A file name with bytes that are not UTF-8 is logged with \\xNN escapes: printable, and re-encodable as UTF-8
    (raw, the terminal shows garbage and pytest-xdist's worker cannot send the captured output)."""
    import io
    import logging
    from utils.log import LOGGER
    name = os.fsdecode(b"caf\xe9-\xff.jpg")  # Latin-1 bytes: surrogates once decoded
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)  # any handler: the logger's own filter makes the text printable
    LOGGER.addHandler(handler)
    try:
        LOGGER.warning(f"WARNING ⚠️ {tmp_path / name}: ignoring corrupt image/label")
    finally:
        LOGGER.removeHandler(handler)
    text = stream.getvalue()
    text.encode("utf-8")  # raises on a lone surrogate
    assert "caf\\xe9-\\xff.jpg: ignoring" in text and "⚠️" in text
