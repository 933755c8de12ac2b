"""Segmentation and classification networks: the official summaries, state-dict keys and shapes, head outputs.

The key fingerprints are sha256 of json.dumps([[name, shape], ...]) of the official models' state dicts, recorded
with the official code (commit 5081342f, its own venv): SegmentationModel('models/segment/yolov5{v}-seg.yaml')
and ClassificationModel(model=<yolov5n.pt model>, nc=10, cutoff=10)."""
import hashlib
import json
import re

import pytest

from models.tasks import ClassificationModel, Segment, SegmentationModel
from utils.backend import torch
from utils.model_stats import model_summary

OFFICIAL_KEYS = {  # model: (state-dict entries, parameters, fingerprint)
    "n": (367, 1991549, "ce9a535fe06c0b75"), "s": (367, 7621277, "22f37fc070dd7a2d"),
    "m": (499, 21990397, "8fae6fa1b7b06612"), "l": (631, 47924957, "b153cf253acb68ee"),
    "x": (763, 88819517, "20c6cf030b46b053"), "cls": (194, 1224810, "33e24993d8c2d1df"),
}
# SEG_CLS.md: (layers as all modules, parameters, GFLOPs), as built and fused
OFFICIAL_SUMMARY = {"n": ((225, 1991549, 7.2), (165, 1986637, 7.1)), "s": ((225, 7621277, 26.6), (165, 7611485, 26.4))}


def _fingerprint(model):
    keys = [[k, list(t.shape)] for k, t in model.state_dict().items()]
    return len(keys), sum(p.numel() for p in model.parameters()), \
        hashlib.sha256(json.dumps(keys).encode()).hexdigest()[:16]


def _parse(summary):
    m = re.search(r"summary: (\d+) layers, (\d+) parameters, \d+ gradients, ([\d.]+) GFLOPs", summary)
    assert m, summary
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


# the same classes from the same YAML parser as n and s, 5-12 s each under OneFlow
_BUILT_SMALLER = pytest.mark.oneflow_covered_by(
    "tests/test_segment/test_seg_cls_models.py::test_seg_state_dict_matches_official")


@pytest.mark.parametrize("size", ["n", "s",
                                  *(pytest.param(s, marks=[pytest.mark.slow, _BUILT_SMALLER]) for s in "mlx")])
def test_seg_state_dict_matches_official(size):
    assert _fingerprint(SegmentationModel(f"yolov5{size}-seg.yaml")) == OFFICIAL_KEYS[size]


@pytest.mark.parametrize("size", ["n", "s"])
def test_seg_summary_matches_official(size):
    model = SegmentationModel(f"yolov5{size}-seg.yaml")
    built, fused = OFFICIAL_SUMMARY[size]
    assert _parse(model_summary(model)) == built
    assert sum(p.numel() for p in model.model[-1].parameters()) == {"n": 234397, "s": 615133}[size]
    model.eval().fuse()
    assert _parse(model_summary(model)) == fused


def test_segment_outputs():
    model = SegmentationModel("yolov5n-seg.yaml", nc=3)
    head = model.model[-1]
    assert isinstance(head, Segment) and head.nm == 32 and head.npr == 64 and head.no == 5 + 3 + 32
    assert [float(s) for s in model.stride] == [8.0, 16.0, 32.0]
    x = torch.rand(2, 3, 64, 96)
    maps, protos = model.train()(x)
    assert [tuple(m.shape) for m in maps] == [(2, 3, 8, 12, 40), (2, 3, 4, 6, 40), (2, 3, 2, 3, 40)]
    assert tuple(protos.shape) == (2, 32, 16, 24)
    with torch.no_grad():
        pred, protos2, maps2 = model.eval()(x)
    assert tuple(pred.shape) == (2, 3 * (96 + 24 + 6), 40)
    # mask coefficients stay raw (may be negative), boxes and scores are decoded
    assert float(pred[..., 4:8].min()) >= 0 and float(pred[..., 4:8].max()) <= 1
    assert torch.allclose(pred[:, :3 * 96, 8:].reshape(2, 3, 8, 12, 32), maps2[0][..., 8:])


def test_classifier_cut_from_detection_model():
    from models.yolo import DetectionModel
    model = ClassificationModel(model=DetectionModel("yolov5n.yaml"), nc=10, cutoff=10)
    assert _fingerprint(model) == OFFICIAL_KEYS["cls"]
    assert type(model.model[-1]).__name__ == "Classify" and model.model[-1].i == 9
    out = model.eval()(torch.rand(2, 3, 64, 64))
    assert tuple(out.shape) == (2, 10)
    assert _parse(model_summary(model))[1:] == (1224810, 3.0)
    model.fuse()
    assert _parse(model_summary(model))[1:] == (1221274, 2.9)


def test_classifier_from_yaml_and_cutoff():
    model = ClassificationModel(cfg="yolov5n.yaml", nc=5, cutoff=5)
    assert len(model.model) == 5 and tuple(model.eval()(torch.rand(1, 3, 64, 64)).shape) == (1, 5)
