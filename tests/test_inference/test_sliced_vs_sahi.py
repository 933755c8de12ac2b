"""Sliced prediction against SAHI itself (sahi 0.12.8, model type yolov5): the same tile grid, and on the same weights,
images and settings the same detections (boxes matched, coordinates and scores within 1e-3).

SAHI is no dependency of the project: it runs in a throwaway environment of its own (docs/sliced-inference.md),
named by SAHI_PYTHON. Without one these tests skip, saying so."""
import json
import subprocess

import numpy as np
import pytest

from benchmarks import sliced_vs_sahi as bench
from utils.tiles import SliceSettings, tile_grid


@pytest.fixture(scope="module")
def sahi_python():
    python = bench.sahi_python()
    if python is None:
        pytest.skip("no SAHI environment: set SAHI_PYTHON to its python (docs/sliced-inference.md builds one)")
    return python


GRID = r'''
import json, sys
from sahi.slicing import get_slice_bboxes
cases = json.loads(sys.argv[1])
print(json.dumps([get_slice_bboxes(h, w, sh, sw, False, oh, ow) for h, w, sh, sw, oh, ow in cases]))
'''


def test_tile_grid_equals_sahis(sahi_python):
    cases = [(480, 640, 256, 256, 0.2, 0.2), (1000, 1000, 512, 512, 0.2, 0.2), (300, 900, 256, 512, 0.5, 0.0),
             (100, 150, 512, 512, 0.2, 0.2), (4000, 3000, 640, 480, 0.25, 0.1), (513, 511, 256, 256, 0.99, 0.0)]
    p = subprocess.run([sahi_python, "-c", GRID, json.dumps(cases)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    for (h, w, sh, sw, oh, ow), theirs in zip(cases, json.loads(p.stdout.strip().splitlines()[-1])):
        ours = tile_grid(h, w, SliceSettings.of((sh, sw), (oh, ow)))
        assert ours.tolist() == theirs, (h, w, sh, sw, oh, ow)


@pytest.mark.slow
@pytest.mark.parametrize("merge, metric", [("nmm", "ios"), ("nms", "iou")])
def test_same_detections_as_sahi(sahi_python, yolov5n_pt, coco128_dir, merge, metric):
    images = sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:2]
    s = SliceSettings.of(256, 0.2, merge=merge, metric=metric)
    ours = bench.run_project(yolov5n_pt, images, s, conf=0.25, imgsz=320, threads=2)
    theirs = bench.run_sahi(sahi_python, yolov5n_pt, images, s, conf=0.25, imgsz=320, threads=2)
    ag = bench.compare([r[0] for r in ours], [r[0] for r in theirs["images"]])
    assert ag["matched"] > 0 and ag["unmatched"] == 0, ag
    assert ag["max_box_diff_px"] <= 1e-3 and ag["max_score_diff"] <= 1e-3, ag
    assert np.isfinite([r[1] for r in theirs["images"]]).all()
