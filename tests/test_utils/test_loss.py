"""ComputeLoss: parity with the official loss on ref_A.npz, and behaviour (target building, no targets, options)."""
from pathlib import Path

import numpy as np
import pytest

from utils.backend import nn, torch
from utils.loss import ComputeLoss, FocalLoss, LossHyp, smooth_BCE

ANCHORS = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]  # yolov5n, pixels
STRIDES = [8.0, 16.0, 32.0]
# hyp.scratch-low scaled for imgsz 320, 80 classes, 3 levels (as REFERENCE.md states)
HYP = dict(box=0.05, obj=0.25, cls=0.5, cls_pw=1.0, obj_pw=1.0, anchor_t=4.0, fl_gamma=0.0, label_smoothing=0.0)


class _Detect(nn.Module):
    def __init__(self, nc=80, anchors=ANCHORS, strides=STRIDES):
        super().__init__()
        self.nc, self.nl, self.na = nc, len(anchors), len(anchors[0]) // 2
        self.stride = torch.tensor(strides)
        a = torch.tensor(np.array(anchors, np.float32).reshape(self.nl, self.na, 2))
        self.register_buffer("anchors", a / self.stride.view(-1, 1, 1))  # grid units, as DetectionModel stores them


class StandInModel(nn.Module):
    """Just what ComputeLoss reads: parameters (device), .hyp and .model[-1] (the Detect layer)."""

    def __init__(self, nc=80, hyp=None, anchors=ANCHORS, strides=STRIDES):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
        self.model = nn.ModuleList([_Detect(nc, anchors, strides)])
        self.hyp = dict(HYP if hyp is None else hyp)


@pytest.fixture(scope="module")
def ref():
    path = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "ref_A.npz"
    if not path.exists():
        pytest.skip(f"{path} missing")
    return dict(np.load(path))


def _outputs(ref):
    return [torch.tensor(ref[f"train_outputs_p{i}"]) for i in (3, 4, 5)]


def test_parity_with_official_loss(ref):
    np.testing.assert_allclose(ref["hyp_box_obj_cls"], [HYP["box"], HYP["obj"], HYP["cls"]])
    loss, items = ComputeLoss(StandInModel())(_outputs(ref), torch.tensor(ref["targets_img_cls_xywhn"]))
    np.testing.assert_allclose(float(loss), float(ref["loss"][0]), rtol=1e-5)
    np.testing.assert_allclose(items.numpy(), ref["loss_items_box_obj_cls"], rtol=1e-5)
    # the loss is the sum of the items times the batch size (4)
    np.testing.assert_allclose(float(loss), float(items.sum()) * 4, rtol=1e-6)


def test_hyp_given_to_the_loss_is_what_it_uses(ref):
    """The trainer hands the loss a LossHyp: the model's own .hyp (here a different one) is not read."""
    model = StandInModel(hyp=dict(HYP, box=99.0, cls_pw=7.0))
    targets = torch.tensor(ref["targets_img_cls_xywhn"])
    loss, items = ComputeLoss(model, hyp=LossHyp.from_dict(HYP))(_outputs(ref), targets)
    np.testing.assert_allclose(float(loss), float(ref["loss"][0]), rtol=1e-5)
    del model.hyp
    assert ComputeLoss(model, hyp=HYP).hyp == LossHyp.from_dict(HYP)  # a dict works too, without any model .hyp


def test_parity_with_detection_model_and_fused_flag(ref):
    """Same figures with the real yolov5n Detect layer (anchors divided by strides) and --bbox_iou_optim on."""
    from models.yolo import DetectionModel
    model = DetectionModel("models/yolov5n.yaml")
    model.hyp = dict(HYP)
    loss, items = ComputeLoss(model, fused_iou=True)(_outputs(ref), torch.tensor(ref["targets_img_cls_xywhn"]))
    np.testing.assert_allclose(items.numpy(), ref["loss_items_box_obj_cls"], rtol=1e-5)
    np.testing.assert_allclose(float(loss), float(ref["loss"][0]), rtol=1e-5)


def test_gradients_flow_to_the_outputs(ref):
    p = [x.requires_grad_(True) for x in _outputs(ref)]
    loss, _ = ComputeLoss(StandInModel())(p, torch.tensor(ref["targets_img_cls_xywhn"]))
    loss.backward()
    for x in p:
        g = x.grad.numpy()
        assert np.isfinite(g).all() and np.abs(g[..., 4]).sum() > 0  # objectness everywhere
        assert np.abs(g[..., :4]).sum() > 0  # boxes where targets matched


def _random_outputs(bs=2, nc=80, sizes=(8, 4, 2), seed=0):
    rng = np.random.default_rng(seed)
    return [torch.tensor(rng.normal(0, 1, (bs, 3, s, s, 5 + nc)).astype(np.float32)) for s in sizes]


def test_no_targets_gives_only_objectness_loss():
    loss, items = ComputeLoss(StandInModel())(_random_outputs(), torch.zeros((0, 6)))
    box, obj, cls = items.numpy()
    assert box == 0 and cls == 0 and obj > 0
    np.testing.assert_allclose(float(loss), obj * 2, rtol=1e-6)


def test_build_targets_neighbour_cells_and_anchor_filter():
    """One 64x64 image, one target: level 0 grid 8x8. Centre (2.3, 5.8) cells -> own cell, left (x frac < .5),
    below (y frac > .5); anchors with a wh ratio beyond anchor_t are dropped."""
    model = StandInModel()
    cl = ComputeLoss(model)
    p = _random_outputs(bs=1, sizes=(8, 4, 2))
    w, h = 12 / 64, 14 / 64  # 12x14 px: at stride 8, 1.5x1.75 cells
    t = torch.tensor([[0, 3, 2.3 / 8, 5.8 / 8, w, h]], dtype=torch.float32)
    tcls, tbox, indices, anch = cl.build_targets(p, t)
    b, a, gj, gi = (x.numpy() for x in indices[0])
    # level 0 anchors in grid units: (1.25,1.625) (2,3.75) (4.125,2.875); target (1.5, 1.75): ratios all < 4
    cells = sorted(set(zip(a.tolist(), gj.tolist(), gi.tolist())))
    expect = sorted((ai, gy, gx) for ai in range(3) for gy, gx in ((5, 2), (5, 1), (6, 2)))
    assert cells == expect
    assert (b == 0).all() and (tcls[0].numpy() == 3).all()
    # box targets: offset from the assigned cell in (-0.5, 1.5), size in grid units
    tb = tbox[0].numpy()
    np.testing.assert_allclose(tb[:, 2:], np.tile([1.5, 1.75], (len(tb), 1)), rtol=1e-6)
    assert (tb[:, :2] > -0.5).all() and (tb[:, :2] < 1.5).all()
    # level 2 (stride 32): target is 0.375x0.4375 cells, anchor (11.66, 10.19) is ~27x too big -> dropped
    a2 = indices[2][1].numpy()
    assert 2 not in a2.tolist()


def test_single_class_has_no_class_loss_and_smoothing_changes_cls():
    t = torch.tensor([[0, 0, 0.5, 0.5, 0.3, 0.3], [1, 0, 0.2, 0.7, 0.1, 0.2]], dtype=torch.float32)
    _, items = ComputeLoss(StandInModel(nc=1))(_random_outputs(nc=1), t)
    assert float(items[2]) == 0 and float(items[0]) > 0
    p = _random_outputs()
    _, plain = ComputeLoss(StandInModel())(p, t)
    smooth = dict(HYP, label_smoothing=0.1)
    _, smoothed = ComputeLoss(StandInModel(hyp=smooth))(p, t)
    assert float(smoothed[2]) != pytest.approx(float(plain[2]), rel=1e-4)
    np.testing.assert_allclose(smoothed.numpy()[:2], plain.numpy()[:2], rtol=1e-6)  # box, obj untouched
    assert smooth_BCE(0.1) == (0.95, 0.05)


def test_focal_loss_matches_formula_and_is_used_with_fl_gamma():
    rng = np.random.default_rng(1)
    x, y = rng.normal(0, 2, (64,)).astype(np.float32), (rng.uniform(size=64) > 0.5).astype(np.float32)
    fl = FocalLoss(nn.BCEWithLogitsLoss(), gamma=1.5, alpha=0.25)
    got = float(fl(torch.tensor(x), torch.tensor(y)))
    p = 1 / (1 + np.exp(-x.astype(np.float64)))
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = y * p + (1 - y) * (1 - p)
    want = np.mean(bce * (y * 0.25 + (1 - y) * 0.75) * (1 - p_t) ** 1.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    cl = ComputeLoss(StandInModel(hyp=dict(HYP, fl_gamma=1.5)))
    assert isinstance(cl.BCEcls, FocalLoss) and isinstance(cl.BCEobj, FocalLoss)


def test_pos_weight_and_autobalance():
    t = torch.tensor([[0, 5, 0.5, 0.5, 0.3, 0.3]], dtype=torch.float32)
    p = _random_outputs()
    _, base = ComputeLoss(StandInModel())(p, t)
    _, heavy = ComputeLoss(StandInModel(hyp=dict(HYP, cls_pw=3.0)))(p, t)
    assert float(heavy[2]) > float(base[2])
    cl = ComputeLoss(StandInModel(), autobalance=True)
    cl(p, t)
    assert cl.balance[cl.ssi] == pytest.approx(1.0) and cl.ssi == 1


def test_five_level_balance():
    from utils.loss import _balance
    assert _balance(3) == [4.0, 1.0, 0.4]
    assert _balance(4) == [4.0, 1.0, 0.25, 0.06]
    assert _balance(5) == [4.0, 1.0, 0.25, 0.06, 0.02]
