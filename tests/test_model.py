"""The model built from YAML: summaries equal the official ones, fusion keeps outputs, shapes and strides."""
import re

import numpy as np
import pytest

from models.yolo import Detect, DetectionModel, parse_model
from utils.backend import to_numpy, torch
from utils.model_stats import model_summary

# REFERENCE.md: (layers, parameters, GFLOPs) as built and fused
OFFICIAL = {
    "n": ((214, 1872157, 4.6), (157, 1867405, 4.5)),
    "s": ((214, 7235389, 16.6), (157, 7225885, 16.4)),
    "m": ((291, 21190557, 49.2), (212, 21172173, 48.9)),
    "l": ((368, 46563709, 109.6), (267, 46533693, 109.0)),
    "x": ((445, 86749405, 206.3), (322, 86705005, 205.5)),
}


def _parse(summary):
    m = re.search(r"summary: (\d+) layers, (\d+) parameters, \d+ gradients, ([\d.]+) GFLOPs", summary)
    assert m, summary
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


@pytest.mark.parametrize("size", list(OFFICIAL))
def test_summary_matches_official(size):
    model = DetectionModel(f"yolov5{size}.yaml")
    built, fused = OFFICIAL[size]
    assert _parse(model_summary(model)) == built
    model.eval().fuse()
    assert _parse(model_summary(model)) == fused


def test_summary_names_the_model():
    assert model_summary(DetectionModel("yolov5n.yaml")).startswith("YOLOv5n summary: ")


def test_strides_anchors_and_output_shapes():
    model = DetectionModel("yolov5n.yaml", nc=3)
    det = model.model[-1]
    assert isinstance(det, Detect)
    assert to_numpy(model.stride).tolist() == [8.0, 16.0, 32.0]
    # anchors are stored in grid units (pixels / stride), as in the official state dict
    np.testing.assert_allclose(to_numpy(det.anchors[0]), [[1.25, 1.625], [2.0, 3.75], [4.125, 2.875]])
    x = torch.zeros(2, 3, 128, 96)
    train_out = model(x)
    assert [tuple(t.shape) for t in train_out] == [(2, 3, 16, 12, 8), (2, 3, 8, 6, 8), (2, 3, 4, 3, 8)]
    model.eval()
    with torch.no_grad():
        decoded, raw = model(x)
    assert tuple(decoded.shape) == (2, 3 * (16 * 12 + 8 * 6 + 4 * 3), 8)
    assert len(raw) == 3


def test_fused_model_gives_the_same_outputs():
    torch.manual_seed(0)
    model = DetectionModel("yolov5n.yaml")
    # non-trivial BatchNorm statistics so that fusion has something to fold
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before = to_numpy(model(x)[0])
        model.fuse()
        after = to_numpy(model(x)[0])
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    np.testing.assert_allclose(after, before, rtol=1e-3, atol=1e-3)


def test_p6_model_has_four_levels():
    model = DetectionModel("yolov5n6.yaml")
    assert to_numpy(model.stride).tolist() == [8.0, 16.0, 32.0, 64.0]


def test_detect_bias_prior():
    """Objectness bias starts at log(8 / (640 / s) ** 2): about 8 objects expected per 640 image."""
    import math
    model = DetectionModel("yolov5n.yaml", nc=80)
    det = model.model[-1]
    b = to_numpy(det.m[0].bias).reshape(det.na, -1)
    # the conv's own random init is within +-1/sqrt(fan_in), small next to the prior
    assert abs(b[:, 4].mean() - math.log(8 / (640 / 8) ** 2)) < 0.2


def test_unknown_module_is_named():
    cfg = {"nc": 1, "depth_multiple": 1.0, "width_multiple": 1.0, "anchors": [[10, 13, 16, 30, 33, 23]],
           "backbone": [[-1, 1, "NotAModule", [16]]], "head": []}
    with pytest.raises(KeyError, match="NotAModule"):
        parse_model(cfg, ch=[3])


def test_missing_config_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        DetectionModel(tmp_path / "nope.yaml")
