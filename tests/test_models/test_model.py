"""The model built from YAML: summaries equal the official ones, fusion keeps outputs, shapes and strides."""
import re

import numpy as np
import pytest

from models.yolo import Detect, DetectionModel, parse_model
from utils.backend import IS_ONEFLOW, to_numpy, torch
from utils.model_stats import model_summary

# REFERENCE.md: (layers, parameters, GFLOPs) as built and fused. Layers = len(list(model.modules())). One figure
# differs from REFERENCE.md: fused yolov5x prints 205.4 GFLOPs in the official code (ultralytics-thop
# 2.2.3, which counts no conv biases: 205.448 exactly); REFERENCE.md's 205.5 came from a thop that counted the
# Detect biases (+0.004).

BIG = 30_000_000  # parameters: building (and FLOP-counting) such a model takes 10-30 s under OneFlow: the slow tier
ONEFLOW_BIG = 9_000_000  # parameters: a larger config builds under PyTorch only (its module classes: smaller ones)


def _sized(name, params):
    """A parameter of the model tests: above BIG parameters in the slow tier, and under OneFlow skipped. Building one
    runs a 256 px forward pass to find the strides, 8-40 s each with OneFlow 0.9.0's CPU convolutions (3 min of the
    OneFlow suite for the big hub configs). The smaller configs build the same module classes from the same YAML
    parser under OneFlow (C3, Bottleneck, SPP(F), Focus, Ghost, transformer, 2-4 output levels), and PyTorch builds
    every one."""
    if params <= ONEFLOW_BIG:
        return name
    if params <= BIG:  # 12-24 s each under OneFlow (yolov5m, yolov5s6), whose classes the smaller configs build
        return pytest.param(name, marks=pytest.mark.oneflow_covered_by(
            "tests/test_models/test_model.py::test_hub_config_builds_as_official"))
    return pytest.param(name, marks=[pytest.mark.slow, pytest.mark.skipif(
        IS_ONEFLOW, reason="above 30 M parameters: built under PyTorch; its module classes are built here in the "
                           "smaller configs")])
OFFICIAL = {
    "n": ((214, 1872157, 4.6), (157, 1867405, 4.5)),
    "s": ((214, 7235389, 16.6), (157, 7225885, 16.4)),
    "m": ((291, 21190557, 49.2), (212, 21172173, 48.9)),
    "l": ((368, 46563709, 109.6), (267, 46533693, 109.0)),
    "x": ((445, 86749405, 206.3), (322, 86705005, 205.4)),
}


def _parse(summary):
    m = re.search(r"summary: (\d+) layers, (\d+) parameters, \d+ gradients, ([\d.]+) GFLOPs", summary)
    assert m, summary
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


@pytest.mark.parametrize("size", [_sized(k, v[0][1]) for k, v in OFFICIAL.items()])
def test_summary_matches_official(size):
    model = DetectionModel(f"yolov5{size}.yaml")
    built, fused = OFFICIAL[size]
    assert _parse(model_summary(model)) == built
    model.eval().fuse()
    assert _parse(model_summary(model)) == fused


def test_summary_names_the_model(yolov5n_pt):
    assert model_summary(DetectionModel("yolov5n.yaml")).startswith("YOLOv5n summary: ")
    # a loaded checkpoint too: its pickled model keeps yaml_file ('yolov5n.yaml'), which names it there
    from models.experimental import attempt_load
    assert model_summary(attempt_load(yolov5n_pt, fuse=False)).startswith("YOLOv5n summary: ")


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


def _model_with_batchnorm_statistics():
    """yolov5n with non-trivial BatchNorm statistics and affine parameters, so that folding has something to fold."""
    torch.manual_seed(0)
    model = DetectionModel("yolov5n.yaml")
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model


def test_fused_model_gives_the_same_outputs():
    model = _model_with_batchnorm_statistics().eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before = to_numpy(model(x)[0])
        model.fuse()
        after = to_numpy(model(x)[0])
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    np.testing.assert_allclose(after, before, rtol=1e-3, atol=1e-3)


def test_inference_copy_folds_a_copy_and_leaves_the_model_training():
    """What a validation during training runs: a folded copy in eval mode, the same outputs; the EMA it came from
    keeps its BatchNorms, its mode and its own parameters (it goes on averaging)."""
    from models.yolo import inference_copy
    model = _model_with_batchnorm_statistics().train()
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    x = torch.rand(2, 3, 64, 64)
    copy = inference_copy(model)
    assert model.training and not copy.training
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == n_bn > 0
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in copy.modules())
    first_conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert all(p is not first_conv.weight for p in copy.parameters())
    model.eval()
    with torch.no_grad():
        np.testing.assert_allclose(to_numpy(copy(x)[0]), to_numpy(model(x)[0]), rtol=1e-4, atol=1e-4)


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


# ----------------------------------------------------------------------------------------------------------------
# models/hub: the official extra configurations
# (layers, parameters, GFLOPs) as built and fused, and the first 16 hex digits of sha256 over the state dict's
# "key (shape)" lines, from the official code (ultralytics/yolov5 at 5081342f in its own venv, ultralytics-thop 2.2.3):
# Model(cfg) for each models/hub/*.yaml; layers = len(list(model.modules())), parameters = sum of numel, GFLOPs =
# ultralytics.utils.torch_utils.get_flops(model, 640) rounded as `models/yolo.py --cfg` prints it, then the same
# after model.eval().fuse(). Equal hashes mean official state dicts load key for key.
OFFICIAL_HUB = {
    "yolov3-spp": ((270, 62998749, 157.5), (197, 62971933, 156.7), "5eb98da8bf25a6cf"),
    "yolov3-tiny": ((49, 8852366, 13.3), (38, 8849182, 13.2), "b247542665509670"),
    "yolov3": ((262, 61949149, 156.6), (190, 61922845, 155.9), "2dc2f675058cdf19"),
    "yolov5-bifpn": ((368, 46825853, 110.4), (267, 46795837, 109.8), "4d90db4045e628e2"),
    "yolov5-fpn": ((328, 41117565, 100.3), (238, 41090877, 99.8), "ccdca0deb236e8a9"),
    "yolov5-p2": ((428, 47493372, 126.3), (311, 47461436, 125.6), "88c448723e967f30"),
    "yolov5-p34": ((191, 5331518, 15.1), (140, 5323806, 14.9), "4b241a02398729ef"),
    "yolov5-p6": ((477, 76770172, 111.8), (346, 76726332, 111.2), "a7992557b685f791"),
    "yolov5-p7": ((586, 144281723, 116.5), (425, 144216251, 115.9), "a6e0f21b4755d00f"),
    "yolov5-panet": ((368, 46563709, 109.6), (267, 46533693, 109.0), "6c8d02918a5f4f12"),
    "yolov5l6": ((477, 76770172, 111.8), (346, 76726332, 111.2), "a7992557b685f791"),
    "yolov5m6": ((379, 35731932, 50.3), (276, 35704908, 49.9), "1059906a97b6d81d"),
    "yolov5n6": ((281, 3246940, 4.7), (206, 3239884, 4.6), "3c5fd227ac6cdf25"),
    "yolov5s-LeakyReLU": ((214, 7235389, 16.6), (157, 7225885, 16.4), "cd7c2e5655f8ddb6"),
    "yolov5s-ghost": ((389, 3897605, 8.9), (302, 3888789, 8.7), "6568848f6e596e10"),
    "yolov5s-transformer": ((217, 7235645, 16.8), (162, 7226653, 16.6), "4cd8827787b7ad5f"),
    "yolov5s6": ((281, 12626620, 17.0), (206, 12612508, 16.8), "fbd7228c7c2b76c5"),
    "yolov5x6": ((575, 140794780, 210.4), (416, 140730220, 209.6), "9291ac791b119e11"),
}
HUB_STRIDES = {"yolov3-tiny": [16, 32], "yolov5-p2": [4, 8, 16, 32], "yolov5-p34": [8, 16],
               "yolov5-p6": [8, 16, 32, 64], "yolov5-p7": [8, 16, 32, 64, 128]}


def test_every_hub_config_is_listed(root_dir):
    assert sorted(p.stem for p in (root_dir / "models" / "hub").glob("yolo*.yaml")) == sorted(OFFICIAL_HUB)


@pytest.mark.parametrize("name", [_sized(n, v[0][1]) for n, v in OFFICIAL_HUB.items()])
def test_hub_config_builds_as_official(root_dir, name):
    import hashlib
    built, fused, state_hash = OFFICIAL_HUB[name]
    model = DetectionModel(root_dir / "models" / "hub" / f"{name}.yaml")
    assert _parse(model_summary(model)) == built
    text = "\n".join(f"{k} {tuple(v.shape)}" for k, v in model.state_dict().items())
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == state_hash
    assert to_numpy(model.stride).tolist() == HUB_STRIDES.get(name, [8, 16, 32] if "6" not in name else [8, 16, 32, 64])
    model.eval().fuse()
    assert _parse(model_summary(model)) == fused


def test_bare_config_names_resolve_like_ultralytics(root_dir):
    from models.yolo import load_model_yaml
    from utils.general import RepoFileNotFound
    assert load_model_yaml("yolov5-p7.yaml")["yaml_file"] == "yolov5-p7.yaml"  # found in models/hub/
    d = load_model_yaml("yolov5s6.yaml")  # in models/ and models/hub/: the top-level file wins
    assert d == {**load_model_yaml(str(root_dir / "models" / "yolov5s6.yaml"))}
    with pytest.raises(RepoFileNotFound, match="yolov5-nope.yaml"):
        load_model_yaml("yolov5-nope.yaml")


def _tiny_cfg(backbone, head_from):
    return {"nc": 2, "depth_multiple": 1.0, "width_multiple": 1.0, "anchors": 1, "backbone": backbone,
            "head": [[head_from, 1, "Detect", ["nc", "anchors"]]]}


def test_every_new_module_parses_and_runs():
    """One config naming each module of the parse table that the hub configs and their relatives use."""
    cfg = _tiny_cfg([
        [-1, 1, "GhostConv", [16, 3, 2]],            # 0  /2
        [-1, 1, "GhostBottleneck", [16, 3, 2]],      # 1  /4
        [-1, 2, "C3Ghost", [16]],                    # 2
        [-1, 1, "CrossConv", [16, 3, 1]],            # 3
        [-1, 2, "C3x", [16]],                        # 4
        [-1, 1, "C3SPP", [16, [3, 5]]],              # 5
        [-1, 1, "nn.ZeroPad2d", [[0, 1, 0, 1]]],     # 6
        [-1, 1, "nn.MaxPool2d", [2, 1, 0]],          # 7
        [-1, 1, "Contract", [2]],                    # 8  /8, 64 channels
        [-1, 2, "C3TR", [32]],                       # 9
        [-1, 1, "Expand", [2]],                      # 10 /4, 8 channels
        [-1, 1, "nn.ConvTranspose2d", [16, 2, 2]],   # 11 /2
        [-1, 1, "DWConvTranspose2d", [16, 2, 2]],    # 12 /1
        [-1, 1, "Conv", [16, 3, 2]],                 # 13 /2
        [9, 1, "Conv", [16, 1, 1]],                  # 14 /8
    ], [13, 14])
    model = DetectionModel(cfg)
    assert to_numpy(model.stride).tolist() == [2.0, 8.0]
    c3tr = model.model[9]
    assert c3tr.cv1.conv.in_channels == 64 and c3tr.cv3.conv.out_channels == 32  # Contract made 16 channels 64
    assert len(c3tr.m.tr) == 2 and c3tr.m.tr[0].ma.num_heads == 4  # n=2 -> two transformer layers of 4 heads
    assert model.model[10].gain == 2 and model.model[12].groups == 16
    out = model(torch.rand(1, 3, 32, 32))
    assert [tuple(t.shape) for t in out] == [(1, 1, 16, 16, 7), (1, 1, 4, 4, 7)]
    sum(t.sum() for t in out).backward()
    assert all(p.grad is not None for p in model.model[9].m.parameters())  # gradients reach the attention


def test_channel_multiple():
    cfg = _tiny_cfg([[-1, 1, "Conv", [20, 3, 2]], [-1, 1, "Conv", [36, 3, 2]]], [1])
    assert DetectionModel(cfg).model[0].conv.out_channels == 24  # widths rounded up to a multiple of 8
    cfg["channel_multiple"] = 16
    m = DetectionModel(cfg)
    assert m.model[0].conv.out_channels == 32 and m.model[1].conv.out_channels == 48


def test_contract_expand_move_pixels_to_channels_and_back():
    from models.common import Contract, Expand
    x = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
    y = Contract(2)(x)
    a, b = to_numpy(x), to_numpy(y)
    assert b.shape == (2, 12, 2, 3)
    # channel (i*2 + j)*3 + c holds channel c at row offset i, column offset j
    np.testing.assert_array_equal(b[:, (1 * 2 + 0) * 3 + 2], a[:, 2, 1::2, 0::2])
    np.testing.assert_array_equal(to_numpy(Expand(2)(y)), a)


def _np_linear(x, w, b=None):
    return x @ w.T + (0 if b is None else b)


def _np_attention(q, k, v, m):
    """nn.MultiheadAttention's maths in numpy (sequence-first, no masks) with m's weights."""
    e, h = m.embed_dim, m.num_heads
    w, b = to_numpy(m.in_proj_weight), to_numpy(m.in_proj_bias)
    q, k, v = (_np_linear(t, w[i * e:(i + 1) * e], b[i * e:(i + 1) * e]) for i, t in enumerate((q, k, v)))
    L, n, _ = q.shape
    split = lambda t: t.reshape(t.shape[0], n * h, e // h).transpose(1, 0, 2)  # noqa: E731
    s = split(q) @ split(k).transpose(0, 2, 1) / np.sqrt(e // h)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    out = (s @ split(v)).transpose(1, 0, 2).reshape(L, n, e)
    return _np_linear(out, to_numpy(m.out_proj.weight), to_numpy(m.out_proj.bias)), s.reshape(n, h, L, -1).mean(1)


def test_transformer_block_equals_its_formula():
    """C3TR's TransformerBlock: tokens = pixels, x + Linear(x) position term, then per layer
    x += attention(q(x), k(x), v(x)) and x += fc2(fc1(x)); checked against numpy on both backends."""
    from models.common import TransformerBlock
    torch.manual_seed(0)
    blk = TransformerBlock(16, 16, 4, 2).eval()
    x = torch.randn(2, 16, 3, 5)
    with torch.no_grad():
        y = to_numpy(blk(x))
    p = to_numpy(x).reshape(2, 16, 15).transpose(2, 0, 1)
    p = p + _np_linear(p, to_numpy(blk.linear.weight), to_numpy(blk.linear.bias))
    for layer in blk.tr:
        w = {n: to_numpy(getattr(layer, n).weight) for n in ("q", "k", "v", "fc1", "fc2")}
        p = _np_attention(_np_linear(p, w["q"]), _np_linear(p, w["k"]), _np_linear(p, w["v"]), layer.ma)[0] + p
        p = _np_linear(_np_linear(p, w["fc1"]), w["fc2"]) + p
    np.testing.assert_allclose(y, p.transpose(1, 2, 0).reshape(2, 16, 3, 5), rtol=1e-4, atol=1e-5)


def test_attention_fallback_equals_its_formula_and_pytorch():
    """The attention used where the framework has none: numpy formula on every backend; under PyTorch also
    nn.MultiheadAttention itself, with the same weights loaded through the state dict."""
    from utils.backend import MultiheadAttentionFallback
    torch.manual_seed(1)
    m = MultiheadAttentionFallback(8, 2)
    with torch.no_grad():
        m.in_proj_bias.uniform_(-0.5, 0.5)
        m.out_proj.bias.uniform_(-0.5, 0.5)
    q, k, v = torch.randn(5, 3, 8), torch.randn(4, 3, 8), torch.randn(4, 3, 8)
    with torch.no_grad():
        out, w = m(q, k, v)
    ref_out, ref_w = _np_attention(to_numpy(q), to_numpy(k), to_numpy(v), m)
    np.testing.assert_allclose(to_numpy(out), ref_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(to_numpy(w), ref_w, rtol=1e-4, atol=1e-6)
    if hasattr(torch.nn, "MultiheadAttention"):
        native = torch.nn.MultiheadAttention(8, 2)
        assert sorted(native.state_dict()) == sorted(m.state_dict())
        native.load_state_dict(m.state_dict())
        with torch.no_grad():
            n_out, n_w = native(q, k, v)
        np.testing.assert_allclose(to_numpy(out), to_numpy(n_out), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(to_numpy(w), to_numpy(n_w), rtol=1e-5, atol=1e-6)
