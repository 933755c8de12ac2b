"""bbox_iou: plain maths properties, and the fused paths proven equal to the plain CIoU (values and gradients).

OneFlow's fused_get_* kernels exist only for CUDA. To check the assembly (argument order, output order, which
output of fused_get_ciou_result is used) on any machine, ``StandIns`` re-implements each op with the same
signature in plain tensor maths, following the CUDA kernels' formulas (e.g. the angle op divides by h + eps).
"""
import math

import numpy as np
import pytest

from utils.backend import cuda_available, IS_TORCH, torch
from utils.backend.oneflow_ciou import ciou_fused_chain
from utils.iou import bbox_iou, ciou_function, fused_backend_name

EPS = 1e-7


class StandIns:
    """CPU stand-ins for flow._C.fused_get_* (OneFlow 0.9.0 signatures and output order)."""

    @staticmethod
    def fused_get_boundding_boxes_coord(x1, y1, w1, h1, x2, y2, w2, h2):
        return (x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2,
                x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2)

    @staticmethod
    def fused_get_intersection_area(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2):
        return (torch.minimum(b1_x2, b2_x2) - torch.maximum(b1_x1, b2_x1)).clamp(0) * \
               (torch.minimum(b1_y2, b2_y2) - torch.maximum(b1_y1, b2_y1)).clamp(0)

    @staticmethod
    def fused_get_iou(w1, h1, w2, h2, inter, eps):
        return inter / (w1 * h1 + w2 * h2 - inter + eps)

    @staticmethod
    def fused_get_convex_diagonal_squared(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2, eps):
        cw = torch.maximum(b1_x2, b2_x2) - torch.minimum(b1_x1, b2_x1)
        ch = torch.maximum(b1_y2, b2_y2) - torch.minimum(b1_y1, b2_y1)
        return cw * cw + ch * ch + eps

    @staticmethod
    def fused_get_center_dist(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2):
        return ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4

    @staticmethod
    def fused_get_ciou_diagonal_angle(w1, h1, w2, h2, eps):
        return (4 / math.pi ** 2) * (torch.atan(w2 / (h2 + eps)) - torch.atan(w1 / (h1 + eps))) ** 2

    @staticmethod
    def fused_get_ciou_result(v, iou, rho2, c2, eps):
        with torch.no_grad():
            alpha = v / (v - iou + (1 + eps))
        return iou - (rho2 / c2 + v * alpha), alpha


def _t(a):
    return torch.tensor(np.asarray(a, dtype=np.float32))


def _np(t):
    return t.detach().cpu().numpy()


def random_and_degenerate_xywh(n=256, seed=0):
    """Pairs of xywh boxes: random overlapping ones, then zero width, identical, disjoint and nested pairs."""
    rng = np.random.default_rng(seed)
    b1 = np.concatenate([rng.uniform(0.2, 0.8, (n, 2)), rng.uniform(0.02, 0.5, (n, 2))], 1)
    b2 = b1 + np.concatenate([rng.normal(0, 0.05, (n, 2)), rng.normal(0, 0.05, (n, 2))], 1)
    b2[:, 2:] = np.abs(b2[:, 2:]) + 0.01
    special1 = [[0.5, 0.5, 0.0, 0.2],   # zero width vs normal box
                [0.3, 0.3, 0.2, 0.2],   # identical
                [0.1, 0.1, 0.1, 0.1],   # disjoint
                [0.5, 0.5, 0.4, 0.4],   # nested: box2 inside box1
                [0.5, 0.5, 0.1, 0.3],   # nested: same centre, different aspect
                [0.2, 0.2, 0.0, 0.3]]   # zero width vs zero width (identical lines)
    special2 = [[0.52, 0.5, 0.1, 0.2],
                [0.3, 0.3, 0.2, 0.2],
                [0.8, 0.7, 0.2, 0.1],
                [0.45, 0.55, 0.1, 0.1],
                [0.5, 0.5, 0.3, 0.1],
                [0.2, 0.2, 0.0, 0.3]]
    return np.concatenate([b1, special1]).astype(np.float32), np.concatenate([b2, special2]).astype(np.float32)


def degenerate_xyxy():
    """Corner boxes, including zero height (xyxy heights are clamped to eps, so the aspect term stays finite).
    Not included: a box with zero width AND height. There d atan(w/h)/dw = 1/h is 1/eps in the plain maths
    (h clamped to eps) but 1/(2 eps) in OneFlow's kernel (which divides by h + eps): ~1e6 vs ~5e5, both absurd."""
    b1 = [[0.1, 0.1, 0.5, 0.1],    # zero height
          [0.1, 0.1, 0.1, 0.4],    # zero width
          [0.0, 0.0, 0.4, 0.4],    # identical
          [0.0, 0.0, 0.2, 0.2],    # disjoint
          [0.0, 0.0, 1.0, 1.0]]    # nested
    b2 = [[0.2, 0.0, 0.6, 0.3],
          [0.0, 0.0, 0.3, 0.3],
          [0.0, 0.0, 0.4, 0.4],
          [0.5, 0.6, 0.9, 0.8],
          [0.2, 0.3, 0.4, 0.5]]
    return np.array(b1, np.float32), np.array(b2, np.float32)


def value_and_grads(fn, b1, b2):
    a, b = _t(b1).requires_grad_(True), _t(b2).requires_grad_(True)
    out = fn(a, b)
    # a non-uniform upstream gradient catches swapped outputs that a plain sum would hide
    w = _t(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
    (out * w).sum().backward()
    return _np(out), _np(a.grad), _np(b.grad)


# ------------------------------------------------------------------------------------------------------------
# plain maths
def test_identical_boxes_iou_one_and_disjoint_zero():
    b = _t([[0.5, 0.5, 0.2, 0.4], [0.1, 0.2, 0.05, 0.05]])
    for kw in ({}, {"GIoU": True}, {"DIoU": True}, {"CIoU": True}):
        np.testing.assert_allclose(_np(bbox_iou(b, b, **kw)).ravel(), 1.0, atol=1e-4)  # eps in the union
    far = _t([[0.9, 0.9, 0.05, 0.05], [0.9, 0.9, 0.05, 0.05]])
    assert np.all(_np(bbox_iou(b, far)) == 0)
    # GIoU / DIoU / CIoU go negative for disjoint boxes: they keep a gradient where IoU has none
    for kw in ({"GIoU": True}, {"DIoU": True}, {"CIoU": True}):
        assert np.all(_np(bbox_iou(b, far, **kw)) < 0)


def test_hand_computed_values():
    # box1 0..2 x 0..2, box2 1..3 x 0..2: inter 2, union 6, enclosing 3x2
    b1, b2 = _t([[0.0, 0.0, 2.0, 2.0]]), _t([[1.0, 0.0, 3.0, 2.0]])
    iou = 2 / (6 + EPS)
    assert abs(float(bbox_iou(b1, b2, xywh=False)) - iou) < 1e-6
    assert abs(float(bbox_iou(b1, b2, xywh=False, GIoU=True)) - (iou - (6 - 6) / 6)) < 1e-6
    diou = iou - 1.0 / 13  # centre distance 1, enclosing diagonal^2 = 9 + 4
    assert abs(float(bbox_iou(b1, b2, xywh=False, DIoU=True)) - diou) < 1e-6
    assert abs(float(bbox_iou(b1, b2, xywh=False, CIoU=True)) - diou) < 1e-6  # same aspect: v = 0
    # xywh form of the same pair
    assert abs(float(bbox_iou(_t([[1, 1, 2, 2]]), _t([[2, 1, 2, 2]]), DIoU=True)) - diou) < 1e-6


def test_symmetric_and_broadcasts():
    b1, b2 = random_and_degenerate_xywh(32)
    a, b = _t(b1), _t(b2)
    np.testing.assert_allclose(_np(bbox_iou(a, b, CIoU=True)), _np(bbox_iou(b, a, CIoU=True)), atol=1e-6)
    one_vs_many = bbox_iou(a[:1], b, CIoU=True, fused=True)  # (1,4) vs (n,4): the plain path broadcasts
    assert tuple(one_vs_many.shape) == (len(b2), 1)
    np.testing.assert_allclose(_np(one_vs_many), _np(bbox_iou(a[:1].expand(len(b2), 4), b, CIoU=True)), atol=1e-6)


def test_ciou_alpha_carries_no_gradient():
    """With alpha detached, d CIoU / d w1 is the hand derivative of -v*alpha - rho2/c2 + iou at fixed alpha."""
    b1, b2 = random_and_degenerate_xywh(16)
    a = _t(b1[:16]).requires_grad_(True)
    bbox_iou(a, _t(b2[:16]), CIoU=True).sum().backward()
    g_auto = _np(a.grad)
    # numerical derivative with alpha frozen at its value
    def ciou_frozen(x, alpha):
        (x1, y1, w1, h1), (x2, y2, w2, h2) = x.T, b2[:16].astype(np.float64).T
        b1x1, b1x2, b1y1, b1y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
        b2x1, b2x2, b2y1, b2y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
        inter = np.clip(np.minimum(b1x2, b2x2) - np.maximum(b1x1, b2x1), 0, None) * \
                np.clip(np.minimum(b1y2, b2y2) - np.maximum(b1y1, b2y1), 0, None)
        union = w1 * h1 + w2 * h2 - inter + EPS
        iou = inter / union
        c2 = (np.maximum(b1x2, b2x2) - np.minimum(b1x1, b2x1)) ** 2 + (np.maximum(b1y2, b2y2) - np.minimum(b1y1, b2y1)) ** 2 + EPS
        rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
        v = 4 / math.pi ** 2 * (np.arctan(w2 / h2) - np.arctan(w1 / h1)) ** 2
        if alpha is None:
            alpha = v / (v - iou + 1 + EPS)
        return iou - (rho2 / c2 + v * alpha), alpha
    x0 = b1[:16].astype(np.float64)
    _, alpha = ciou_frozen(x0, None)
    h = 1e-6
    for j in range(4):
        dx = np.zeros_like(x0)
        dx[:, j] = h
        num = (ciou_frozen(x0 + dx, alpha)[0] - ciou_frozen(x0 - dx, alpha)[0]) / (2 * h)
        np.testing.assert_allclose(g_auto[:, j], num, rtol=1e-3, atol=2e-3)


# ------------------------------------------------------------------------------------------------------------
# fused paths
@pytest.mark.parametrize("xywh", [True, False])
def test_oneflow_chain_with_standins_equals_plain(xywh):
    b1, b2 = random_and_degenerate_xywh() if xywh else degenerate_xyxy()
    plain = value_and_grads(lambda a, b: bbox_iou(a, b, xywh=xywh, CIoU=True), b1, b2)
    chain = value_and_grads(lambda a, b: ciou_fused_chain(a, b, xywh, EPS, ops=StandIns), b1, b2)
    for p, c, what in zip(plain, chain, ("ciou", "grad box1", "grad box2")):
        assert np.all(np.isfinite(c)), what
        np.testing.assert_allclose(c, p, rtol=1e-5, atol=1e-5, err_msg=what)


def test_standins_catch_a_wrong_coordinate_order():
    """Meta-check: had the chain read the coordinate op's outputs as x1, y1, x2, y2, the comparison would fail."""
    class WrongOrder(StandIns):
        @staticmethod
        def fused_get_boundding_boxes_coord(*args):
            b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2 = StandIns.fused_get_boundding_boxes_coord(*args)
            return b1_x1, b1_y1, b1_x2, b1_y2, b2_x1, b2_y1, b2_x2, b2_y2
    b1, b2 = random_and_degenerate_xywh(64)
    plain = _np(bbox_iou(_t(b1), _t(b2), CIoU=True))
    wrong = _np(ciou_fused_chain(_t(b1), _t(b2), True, EPS, ops=WrongOrder))
    assert np.abs(plain - wrong).max() > 1e-2


@pytest.mark.parametrize("kind", ["IoU", "GIoU", "DIoU", "CIoU"])
def test_flag_on_cpu_is_the_plain_maths(kind):
    b1, b2 = random_and_degenerate_xywh(64)
    kw = {} if kind == "IoU" else {kind: True}
    off = value_and_grads(lambda a, b: bbox_iou(a, b, fused=False, **kw), b1, b2)
    on = value_and_grads(lambda a, b: bbox_iou(a, b, fused=True, **kw), b1, b2)
    for x, y in zip(off, on):
        np.testing.assert_array_equal(x, y)
    assert fused_backend_name(torch.device("cpu")) == "plain"


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="the fused CIoU kernels need a CUDA GPU")
@pytest.mark.parametrize("xywh", [True, False])
def test_fused_cuda_equals_plain(xywh):
    dev = torch.device("cuda:0")
    assert fused_backend_name(dev) in ("oneflow-fused-kernels", "triton", "torch-compile")
    if not IS_TORCH:  # OneFlow's fused_get_* kernels are there for CUDA tensors
        assert fused_backend_name(dev) == "oneflow-fused-kernels"
    b1, b2 = random_and_degenerate_xywh(4096) if xywh else degenerate_xyxy()

    def run(fused):
        a = _t(b1).to(dev).requires_grad_(True)
        b = _t(b2).to(dev).requires_grad_(True)
        out = bbox_iou(a, b, xywh=xywh, CIoU=True, fused=fused)
        w = _t(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))).to(dev)
        (out * w).sum().backward()
        return _np(out), _np(a.grad), _np(b.grad)

    plain, fused = run(False), run(True)
    np.testing.assert_allclose(fused[0], plain[0], rtol=1e-5, atol=1e-5)
    # identical boxes tie in min/max: autograd splits such a gradient between the two boxes, a hand-written kernel
    # may give it to one; the sum over both boxes is the same either way
    np.testing.assert_allclose(fused[1] + fused[2], plain[1] + plain[2], rtol=1e-5, atol=1e-4)
    tie = np.all(b1 == b2, axis=1)
    np.testing.assert_allclose(fused[1][~tie], plain[1][~tie], rtol=1e-5, atol=1e-4)


def test_loss_chooses_its_ciou_once(monkeypatch):
    """--bbox_iou_optim: the backend is asked for the fused CIoU once, when the loss is built; every loss call then
    runs that function (here a counting stand-in on the CPU) without asking again or reading the environment."""
    from tests.test_utils.test_loss import StandInModel
    from utils import backend
    from utils.loss import ComputeLoss
    asked, ran = [], []

    def counted(b1, b2, xywh=True, eps=1e-7):
        ran.append(len(b1))
        return ciou_function(b1.device, False)(b1, b2, xywh, eps)  # the plain maths

    def fused_ciou(device):
        asked.append(device)
        return "stand-in", counted
    monkeypatch.setattr(backend, "fused_ciou", fused_ciou)
    loss = ComputeLoss(StandInModel(), fused_iou=True)
    assert len(asked) == 1
    rng = np.random.default_rng(0)
    p = [torch.tensor(rng.normal(0, 1, (2, 3, s, s, 85)).astype(np.float32)) for s in (8, 4, 2)]
    t = torch.tensor([[0, 3, 0.4, 0.5, 0.3, 0.2], [1, 7, 0.6, 0.3, 0.1, 0.4]], dtype=torch.float32)
    monkeypatch.setenv("YOLO_FUSED_CIOU", "plain")  # read when the loss was built, not on each call
    for _ in range(3):
        loss(p, t)
    assert len(asked) == 1 and len(ran) == 3 and all(n > 0 for n in ran)
    ComputeLoss(StandInModel(), fused_iou=False)
    assert len(asked) == 1  # flag off: the backend is not asked

