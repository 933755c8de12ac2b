"""segment/val.py --save-json: COCO results entries with the box and the mask as RLE at the original image size,
scored by pycocotools' `bbox` and `segm` evaluations (their mAPs replace the table's, as official). Fast: a crafted
prediction that is the ground-truth square exactly. Slow: segment/val.py's JSON on two coco128-seg images equals
the official script's (YOLO_REF_DIR, default ../ref/yolov5, and its venv)."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.seg_data import STEMS, make_tiny_seg, write_coco_annotations
from utils.segment.evaluator import SegmentationEvaluator

pycocotools = pytest.importorskip("pycocotools")
from pycocotools import mask as coco_mask  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))
REF_PY = REF.parent / "venv" / "bin" / "python"


def _square_annotations(f, side=64, box=(16, 16, 48, 48)):
    x1, y1, x2, y2 = box
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({
        "images": [{"id": 7, "file_name": "000000000007.jpg", "height": side, "width": side}],
        "annotations": [{"id": 1, "image_id": 7, "category_id": 0, "iscrowd": 0, "area": (x2 - x1) * (y2 - y1),
                         "bbox": [x1, y1, x2 - x1, y2 - y1], "segmentation": {
                             "size": [side, side], "counts": _rle_of_box(side, box)["counts"]}}],
        "categories": [{"id": 0, "name": "square"}, {"id": 1, "name": "other"}]}))


def _rle_of_box(side, box):
    m = np.zeros((side, side), np.uint8)
    m[box[1]:box[3], box[0]:box[2]] = 1
    rle = coco_mask.encode(np.asfortranarray(m))
    rle["counts"] = rle["counts"].decode()
    return rle


def test_save_json_rle_masks_and_pycocotools_bbox_segm(tmp_path):
    from utils.segment.validation import seg_evaluator
    data = {"path": str(tmp_path), "val": "images", "nc": 2, "names": {0: "square", 1: "other"}}
    _square_annotations(tmp_path / "annotations" / "instances_val2017.json")
    ev = seg_evaluator(data, data["names"], tmp_path, plots=False, save_json=True, weights="w.pt", overlap=True)
    assert isinstance(ev, SegmentationEvaluator) and ev.native  # --save-json masks at the input size, as official
    protos = np.full((1, 1, 16, 16), 10.0, np.float32)  # one prototype, all "on": the mask is the box crop
    pred = np.array([[16, 16, 48, 48, 0.9, 0, 1.0]], np.float32)  # xyxy, conf, cls, one mask coefficient
    targets = np.array([[0, 0, 0.5, 0.5, 0.5, 0.5]], np.float32)
    masks = np.zeros((1, 16, 16), np.uint8)
    masks[0, 4:12, 4:12] = 1  # the square at 1/4 (overlap layout: value 1 = the image's first target)
    shapes = [((64, 64), ((1.0, 1.0), (0.0, 0.0)))]
    ev.update([pred], protos, targets, masks, shapes, (64, 64), ["/data/000000000007.jpg"])
    metrics = ev.evaluate_coco(ev.compute(), ["/data/000000000007.jpg"])
    entries = json.loads((tmp_path / "w_predictions.json").read_text())
    assert len(entries) == 1
    e = entries[0]
    assert e["image_id"] == 7 and e["category_id"] == 0 and e["bbox"] == [16, 16, 32, 32] and e["score"] == 0.9
    assert e["segmentation"]["size"] == [64, 64] and isinstance(e["segmentation"]["counts"], str)
    decoded = coco_mask.decode(e["segmentation"])
    assert decoded.sum() == 32 * 32 and decoded[16:48, 16:48].all()
    # pycocotools' figures (bbox, then segm) replaced the table's: the prediction is the truth, AP 1 at every IoU
    assert metrics.box.map50 == pytest.approx(1.0) and metrics.box.map50_95 == pytest.approx(1.0)
    assert metrics.mask.map50 == pytest.approx(1.0) and metrics.mask.map50_95 == pytest.approx(1.0)


def test_save_json_without_annotations_keeps_the_table_figures(tmp_path):
    from utils.segment.validation import seg_evaluator
    data = {"path": str(tmp_path / "nowhere"), "val": "images", "nc": 1, "names": {0: "square"}}
    ev = seg_evaluator(data, data["names"], tmp_path, plots=False, save_json=True, overlap=False)
    pred = np.array([[0, 0, 8, 8, 0.5, 0, 1.0]], np.float32)
    ev.update([pred], np.full((1, 1, 4, 4), 10.0, np.float32), np.zeros((0, 6), np.float32),
              np.zeros((0, 4, 4), np.uint8), [((16, 16), ((1.0, 1.0), (0.0, 0.0)))], (16, 16), ["/d/a.jpg"])
    m = ev.compute()
    before = m.results()
    ev.evaluate_coco(m, ["/d/a.jpg"])
    assert m.results() == before and (tmp_path / "_predictions.json").is_file()
    assert json.loads((tmp_path / "_predictions.json").read_text())[0]["image_id"] == "a"


_OFFICIAL_JSON = """
import segment.val as v
v.run(data={data!r}, weights={weights!r}, imgsz=128, batch_size=2, device='cpu', workers=0, plots=False, half=False,
      save_json=True, project={project!r}, name='official')
"""


def _official_env_with_pycocotools(tmp_path):
    """The official venv's environment, with a pycocotools it can import: its own, else the compiled one of this
    project's environments built for the same Python (linked alone into a folder on PYTHONPATH); skip without."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOLO_", "PYTHONPATH"))}
    candidates = [None, Path(pycocotools.__file__).parent,
                  *sorted((ROOT / ".venv-torch").glob("lib/python3*/site-packages/pycocotools"))]
    for i, pkg in enumerate(candidates):
        trial = dict(env)
        if pkg is not None:
            only = tmp_path / f"pycocotools_only{i}"
            only.mkdir(exist_ok=True)
            if not (only / "pycocotools").exists():
                (only / "pycocotools").symlink_to(pkg)
            trial["PYTHONPATH"] = str(only)
        probe = subprocess.run([str(REF_PY), "-c", "import pycocotools.mask"], env=trial, capture_output=True)
        if probe.returncode == 0:
            return trial
    pytest.skip(f"no pycocotools that {REF_PY} can import")


@pytest.mark.slow
def test_save_json_equals_official(shared_dir, tmp_path):
    if not (REF / "segment" / "val.py").is_file() or not REF_PY.is_file():
        pytest.skip(f"no official checkout and venv at {REF} (YOLO_REF_DIR)")
    data = make_tiny_seg(shared_dir, tmp_path / "seg", stems=STEMS[:2])
    write_coco_annotations(tmp_path / "seg")
    weights = shared_dir / "weights" / "yolov5n-seg-coco128.pt"
    from segment.val import run
    results = run(data=str(data), weights=str(weights), imgsz=128, batch_size=2, device="cpu", workers=0,
                  plots=False, half=False, save_json=True, project=tmp_path, name="ours")[0]
    ours = json.loads((tmp_path / "ours" / f"{weights.stem}_predictions.json").read_text())
    # the pycocotools mAPs stand in the results (box mAP50-95, mAP50 at 3 and 2, mask at 7 and 6)
    assert all(0 <= x <= 1 for x in results[:8]) and results[2] >= results[3]
    # the official script writes its JSON before it looks for ../datasets/coco annotations (absent: it says so)
    env = _official_env_with_pycocotools(tmp_path)
    code = _OFFICIAL_JSON.format(data=str(data), weights=str(weights), project=str(tmp_path))
    o = subprocess.run([str(REF_PY), "-c", code], cwd=REF, capture_output=True, text=True, timeout=600, env=env)
    official_file = tmp_path / "official" / f"{weights.stem}_predictions.json"
    assert official_file.is_file(), o.stdout[-2000:] + o.stderr[-4000:]
    official = json.loads(official_file.read_text())
    assert len(ours) == len(official) > 0
    # each official entry against ours on the same image and class with the nearest box (rounding to 3 decimals
    # and 5 in the score may differ in the last digit: the framework's float sums are not the same)
    by_image = {}
    for e in ours:
        by_image.setdefault((e["image_id"], e["category_id"]), []).append(e)
    worst_box = worst_score = 0.0
    mask_ious = []
    for e in official:
        cands = by_image[(e["image_id"], e["category_id"])]
        d = [np.abs(np.subtract(c["bbox"], e["bbox"])).max() + abs(c["score"] - e["score"]) for c in cands]
        c = cands[int(np.argmin(d))]
        worst_box = max(worst_box, float(np.abs(np.subtract(c["bbox"], e["bbox"])).max()))
        worst_score = max(worst_score, abs(c["score"] - e["score"]))
        inter = coco_mask.area(coco_mask.merge([c["segmentation"], e["segmentation"]], intersect=True))
        union = coco_mask.area(coco_mask.merge([c["segmentation"], e["segmentation"]]))
        mask_ious.append(inter / union if union else 1.0)
    assert worst_box <= 0.002 + 1e-9 and worst_score <= 2e-5, (worst_box, worst_score)  # two last digits, as floats
    # the same RLE pixels, but where a mask probability sits at 0.5 within float rounding: one mask differed by
    # a few border pixels (IoU 0.9994; mean 0.999999) against the official code run on a CUDA build of torch
    assert min(mask_ious) >= 0.995 and np.mean(mask_ious) >= 0.9999, (min(mask_ious), np.mean(mask_ious))
