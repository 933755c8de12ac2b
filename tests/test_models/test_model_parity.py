"""The official yolov5n.pt, loaded by attempt_load on this backend, computes what the official code computed
(../shared/reference/ref_A.npz): decoded eval outputs and raw train-mode head outputs."""
import numpy as np
import pytest

from utils.backend import from_numpy, to_numpy, torch
from models.from_record import build_model
from utils.checkpoint import ModelRecord, load_any, model_record, save_checkpoint

# Tolerances. Decoded boxes are pixels (up to ~320): the absolute bound is 1e-3 plus 2e-5 relative to the value
# (OneFlow's CPU kernels: worst 1.2e-3 px on a ~100 px coordinate; PyTorch: exact). Scores are in [0, 1].
BOX_ATOL, BOX_RTOL, SCORE_ATOL, RAW_ATOL = 1e-3, 2e-5, 1e-4, 1e-4


def _images(ref_a):
    return from_numpy(ref_a["images_uint8_rgb_nchw"].astype(np.float32) / 255)


def _check_eval(y, ref, box_atol=BOX_ATOL, box_rtol=BOX_RTOL, score_atol=SCORE_ATOL):
    assert y.shape == ref.shape == (4, 6300, 85)
    d = np.abs(y - ref)
    box_excess = (d[..., :4] - (box_atol + box_rtol * np.abs(ref[..., :4]))).max()
    assert box_excess <= 0, f"boxes: max abs diff {d[..., :4].max():.3g} px beyond tolerance by {box_excess:.3g}"
    assert d[..., 4:].max() <= score_atol, f"scores: max abs diff {d[..., 4:].max():.3g}"


@pytest.fixture(scope="module")
def model(yolov5n_pt):
    from models.experimental import attempt_load
    return attempt_load(yolov5n_pt, fuse=False)


def test_loaded_model_keeps_names_stride_anchors(model):
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert isinstance(model.names, dict) and len(model.names) == 80 and model.names[0] == "person"
    assert to_numpy(model.stride).tolist() == [8.0, 16.0, 32.0]
    detect = model.model[-1]
    assert np.array_equal(to_numpy(detect.anchors)[0], [[1.25, 1.625], [2, 3.75], [4.125, 2.875]])
    assert hasattr(model.model[0], "bn"), "fuse=False must keep BatchNorm layers"
    assert sum(p.numel() for p in model.parameters()) == 1872157


def test_eval_output_matches_official(model, ref_a):
    with torch.no_grad():
        y, raw = model(_images(ref_a))
    _check_eval(to_numpy(y), ref_a["eval_output"])
    assert [tuple(r.shape) for r in raw] == [(4, 3, 40, 40, 85), (4, 3, 20, 20, 85), (4, 3, 10, 10, 85)]


def test_train_mode_raw_outputs_match_official(yolov5n_pt, ref_a):
    """Train mode: BatchNorm normalizes with batch statistics (OneFlow's CPU kernel needed the two-pass variance
    of utils/backend/oneflow_backend.py to get within 1e-4; its own one-pass variance is off by 1e-2)."""
    from models.experimental import attempt_load
    m = attempt_load(yolov5n_pt, fuse=False).train()
    with torch.no_grad():
        outs = m(_images(ref_a))
    for o, k in zip(outs, ("p3", "p4", "p5")):
        ref = ref_a[f"train_outputs_{k}"]
        o = to_numpy(o)
        assert o.shape == ref.shape
        assert np.abs(o - ref).max() <= RAW_ATOL, f"{k}: max abs diff {np.abs(o - ref).max():.3g}"


def test_fused_model_matches_official_closely(yolov5n_pt, ref_a):
    from models.experimental import attempt_load
    m = attempt_load(yolov5n_pt, fuse=True)
    assert not hasattr(m.model[0], "bn") and sum(p.numel() for p in m.parameters()) == 1867405
    with torch.no_grad():
        y = to_numpy(m(_images(ref_a))[0])
    _check_eval(y, ref_a["eval_output"], box_atol=5e-3)  # folding BN into the conv rounds differently


def test_ensemble_concatenates_members(yolov5n_pt, ref_a):
    from models.experimental import Ensemble, attempt_load
    ens = attempt_load([yolov5n_pt, yolov5n_pt], fuse=False)
    assert isinstance(ens, Ensemble) and len(ens) == 2
    assert ens.names[0] == "person" and to_numpy(ens.stride).max() == 32
    x = _images(ref_a)[:1]
    with torch.no_grad():
        y, _ = ens(x)
    y = to_numpy(y)
    assert y.shape == (1, 12600, 85) and np.array_equal(y[:, :6300], y[:, 6300:])


def test_v7_naming_legacy_keys_and_own_format(model, yolov5n_pt, ref_a, tmp_path):
    """A v7.0-style record (DetectionModel, names as dict, fp32, an old anchor_grid buffer) rebuilds to the same
    model; the same weights saved in the project's format load through attempt_load identically."""
    from models.experimental import attempt_load
    rec = load_any(yolov5n_pt)["model"]
    v7 = ModelRecord(rec)
    v7["class"] = "models.yolo.DetectionModel"
    v7["names"] = dict(enumerate(rec["names"]))
    sd = {k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in rec["state_dict"].items()}
    sd["model.24.anchor_grid"] = np.zeros((3, 1, 3, 1, 1, 2), np.float32)  # saved by v5.0-era Detect, recomputed
    v7["state_dict"] = sd
    m7 = build_model(v7).eval()
    x = _images(ref_a)[:2]
    with torch.no_grad():
        y_ref = to_numpy(model(x)[0])
        assert np.array_equal(to_numpy(m7(x)[0]), y_ref)
    f = save_checkpoint({"epoch": -1, "model": model, "ema": None}, tmp_path / "own.pt")
    m_own = attempt_load(f, fuse=False)
    assert m_own.names == model.names
    with torch.no_grad():
        assert np.array_equal(to_numpy(m_own(x)[0]), y_ref)


def test_focus_spp_era_config_round_trips(tmp_path):
    """Pre-v6.0 checkpoints were built from Focus + SPP configs; the loader rebuilds whatever the yaml names."""
    from models.experimental import attempt_load
    cfg = {"nc": 2, "depth_multiple": 0.33, "width_multiple": 0.125,
           "anchors": [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119]],
           "backbone": [[-1, 1, "Focus", [64, 3]], [-1, 1, "Conv", [128, 3, 2]], [-1, 1, "C3", [128]],
                        [-1, 1, "Conv", [256, 3, 2]], [-1, 1, "SPP", [256, [5, 9, 13]]]],
           "head": [[-1, 1, "Conv", [128, 3, 2]], [[4, 5], 1, "Detect", ["nc", "anchors"]]]}
    from models.yolo import DetectionModel
    torch.manual_seed(0)
    m = DetectionModel(cfg).eval()
    rec = model_record(m)
    rec["class"] = "models.yolo.Model"
    f = save_checkpoint({"model": rec}, tmp_path / "old.pt", build_model=build_model)
    m2 = attempt_load(f, fuse=False)
    x = from_numpy(np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32))
    with torch.no_grad():
        assert np.array_equal(to_numpy(m(x)[0]), to_numpy(m2(x)[0]))


def test_batchnorm_training_statistics_are_accurate():
    """OneFlow's CPU BatchNorm kernel sums its batch statistics naively in float32; utils/backend.BatchNorm2d must
    normalize with accurate ones (the error grows with batch*height*width, here 204,800 values per channel) while
    its gradient and running statistics stay those of BatchNorm."""
    from utils.backend import BatchNorm2d, nn
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 4, 160, 160)) * 0.5 + 3).astype(np.float32)
    bn = BatchNorm2d(4, eps=1e-3, momentum=0.03).train()
    xt = from_numpy(x).requires_grad_(True)
    y = bn(xt)
    (y * from_numpy(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(tuple(y.shape)))).sum().backward()
    xd = x.astype(np.float64)
    mu, var = xd.mean((0, 2, 3)), xd.var((0, 2, 3))
    ref = (xd - mu.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-3)
    assert np.abs(to_numpy(y) - ref).max() < 1e-5
    n = x.size / 4
    assert np.allclose(to_numpy(bn.running_mean), 0.03 * mu, atol=1e-6)
    assert np.allclose(to_numpy(bn.running_var), 0.97 + 0.03 * var * n / (n - 1), atol=1e-6)
    assert int(bn.num_batches_tracked) == 1
    native = nn.BatchNorm2d(4, eps=1e-3).train()
    xt2 = from_numpy(x).requires_grad_(True)
    y2 = native(xt2)
    (y2 * from_numpy(np.linspace(-1, 1, y2.numel(), dtype=np.float32).reshape(tuple(y2.shape)))).sum().backward()
    g, g2 = to_numpy(xt.grad), to_numpy(xt2.grad)
    assert np.abs(g - g2).max() <= 1e-3 * np.abs(g2).max()
