"""segment/predict.py and classify/predict.py on the official checkpoints.

The official label files were recorded with the official scripts (ultralytics/yolov5 at 5081342f, its venv, torch
2.13 CPU): `segment/predict.py --weights yolov5n-seg-coco128.pt --source coco128-seg/.../000000000009.jpg --img 320
--conf 0.05 --save-txt [--retina-masks]` and `classify/predict.py --weights yolov5n-cls-coco128cls.pt --source
<coco128-cls/val/person/000000000036_01.jpg and 000000000110_06.jpg> --img 128 --save-txt`; sha256 of each file
below. PyTorch here writes the same bytes; OneFlow's convolutions round differently, so there the files are checked
for their structure and top classes."""
import hashlib
import re
import shutil

import numpy as np
import pytest

from utils.backend import IS_TORCH

OFFICIAL_SHA = {"seg": "64464bc58337e0476df17174166eebc86227cd7347065559690084b4d8bebc66",
                "seg-retina": "5b9de8f5059f628e57b323a36effc3267799b75ab077cfed95c3482c2a0ade05",
                "000000000036_01": "14120856fd1ded23c9064b18ba5eb6d6103f2b89b3eaa13d21fc2b4428f59faa",
                "000000000110_06": "5675005d77d4b5afbb8eaa633a804ace5b3a624b6f1ea4019e55109624e321ce"}
IMAGE = "000000000009"


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("retina", [False, True])
def test_segment_predict_polygons_and_masks(shared_dir, tmp_path, retina):
    import cv2
    from segment.predict import run
    src = shared_dir / "data" / "coco128-seg" / "images" / "train2017" / f"{IMAGE}.jpg"
    save_dir = run(weights=shared_dir / "weights" / "yolov5n-seg-coco128.pt", source=src, imgsz=(320, 320),
                   conf_thres=0.05, save_txt=True, retina_masks=retina, project=tmp_path, name="p")
    assert save_dir.parent == tmp_path
    lines = (save_dir / "labels" / f"{IMAGE}.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["60", "45"]  # dining table, bowl (lowest confidence first)
    for ln in lines:
        xy = np.array(ln.split()[1:], float)
        assert len(xy) % 2 == 0 and len(xy) > 100 and xy.min() >= 0 and xy.max() <= 1
    if IS_TORCH:
        assert _sha(save_dir / "labels" / f"{IMAGE}.txt") == OFFICIAL_SHA["seg-retina" if retina else "seg"]
    drawn, orig = cv2.imread(str(save_dir / f"{IMAGE}.jpg")), cv2.imread(str(src))
    assert drawn.shape == orig.shape
    # a mask blended at 50% moves pixels well inside the bowl polygon away from the original
    poly = (np.array(lines[1].split()[1:], float).reshape(-1, 2) * [orig.shape[1], orig.shape[0]]).astype(np.int32)
    inside = np.zeros(orig.shape[:2], np.uint8)
    cv2.fillPoly(inside, [poly], 1)
    inside = cv2.erode(inside, np.ones((15, 15), np.uint8)).astype(bool)
    assert inside.sum() > 500
    assert np.abs(drawn.astype(int) - orig.astype(int))[inside].mean() > 20


def test_classify_predict_top5(shared_dir, tmp_path, caplog):
    from classify.predict import run
    src = tmp_path / "imgs"
    src.mkdir()
    for name in OFFICIAL_SHA:
        if name.startswith("0000"):
            shutil.copy(shared_dir / "data" / "coco128-cls" / "val" / "person" / f"{name}.jpg", src)
    save_dir = run(weights=shared_dir / "weights" / "yolov5n-cls-coco128cls.pt", source=src, imgsz=(128, 128),
                   save_txt=True, project=tmp_path, name="p")
    for name in ("000000000036_01", "000000000110_06"):
        f = save_dir / "labels" / f"{name}.txt"
        rows = [ln.split() for ln in f.read_text().splitlines()]
        assert len(rows) == 5 and rows[0][1] == "person"
        probs = [float(r[0]) for r in rows]
        assert probs == sorted(probs, reverse=True) and 0.8 <= probs[0] <= 0.9
        if IS_TORCH:
            assert _sha(f) == OFFICIAL_SHA[name]
        assert (save_dir / f"{name}.jpg").is_file()
    printed = "\n".join(r.getMessage() for r in caplog.records)
    assert re.search(r"000000000036_01\.jpg: 128x128 person 0\.8\d, chair 0\.0\d, \w+ 0\.\d\d, \w+ 0\.\d\d, \w+ 0\.\d\d",
                     printed), printed
