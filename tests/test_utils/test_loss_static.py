"""The fixed-shape loss equals the per-level, boolean-mask formulation of the official code (values and gradients),
padding rows change nothing, and nothing in it reads a value on the host: it runs on shapeless meta tensors and
compiles as one graph."""
import numpy as np
import pytest

from utils.backend import IS_TORCH, to_numpy, torch
from utils.iou import bbox_iou
from utils.loss import ComputeLoss, pad_targets

from tests.test_utils.test_loss import HYP, StandInModel


def _oracle(cl, p, targets):
    """The official formulation, level by level with boolean masks (the host decides every shape)."""
    na, nt = cl.na, targets.shape[0]
    gain = torch.ones(7)
    ai = torch.arange(na).float().view(na, 1).repeat(1, nt)
    tg = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
    off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]]).float() * 0.5
    lbox, lobj, lcls = torch.zeros(1), torch.zeros(1), torch.zeros(1)
    for i, pi in enumerate(p):
        anchors, (ny, nx) = cl.anchors[i], pi.shape[2:4]
        gain[2:6] = torch.tensor([nx, ny, nx, ny], dtype=torch.float32)
        t = tg * gain
        offsets = 0
        if nt:
            r = t[..., 4:6] / anchors[:, None]
            t = t[torch.max(r, 1 / r).max(2)[0] < cl.hyp.anchor_t]
            gxy, gxi = t[:, 2:4], gain[2:4] - t[:, 2:4]
            j, k = ((gxy % 1 < 0.5) & (gxy > 1)).T
            l, m = ((gxi % 1 < 0.5) & (gxi > 1)).T
            j = torch.stack((torch.ones_like(j), j, k, l, m))
            t, offsets = t.repeat((5, 1, 1))[j], (torch.zeros_like(gxy)[None] + off[:, None])[j]
        else:
            t = tg[0]
        b, c, a = t[:, 0].long(), t[:, 1].long(), t[:, 6].long()
        gij = (t[:, 2:4] - offsets).long()
        gi, gj = gij[:, 0].clamp(0, nx - 1), gij[:, 1].clamp(0, ny - 1)
        tbox = torch.cat((t[:, 2:4] - torch.stack((gi, gj), 1), t[:, 4:6]), 1)
        tobj = torch.zeros(pi.shape[:4])
        if b.shape[0]:
            ps = pi[b, a, gj, gi]
            pbox = torch.cat((ps[:, :2].sigmoid() * 2 - 0.5, (ps[:, 2:4].sigmoid() * 2) ** 2 * anchors[a]), 1)
            iou = bbox_iou(pbox, tbox, CIoU=True).squeeze(-1)
            lbox = lbox + (1.0 - iou).mean()
            tobj[b, a, gj, gi] = iou.detach().clamp(0)
            if cl.nc > 1:
                tc = torch.full_like(ps[:, 5:], cl.cn)
                tc[torch.arange(b.shape[0]), c] = cl.cp
                lcls = lcls + cl.BCEcls(ps[:, 5:], tc)
        lobj = lobj + cl.BCEobj(pi[..., 4], tobj) * cl.balance[i]
    lbox, lobj, lcls = lbox * cl.hyp.box, lobj * cl.hyp.obj, lcls * cl.hyp.cls
    return (lbox + lobj + lcls) * p[0].shape[0], torch.cat((lbox, lobj, lcls)).detach()


def _case(seed):
    rng = np.random.default_rng(seed)
    nc = (80, 3, 1)[seed % 3]
    hyp = dict(HYP, fl_gamma=1.5 if seed % 4 == 3 else 0.0, label_smoothing=0.1 if seed % 5 == 1 else 0.0)
    sizes = (16, 8, 4) if seed % 2 else (12, 6, 3)
    p = [torch.tensor(rng.normal(0, 1.5, (3, 3, s, s, 5 + nc)).astype(np.float32)) for s in sizes]
    nt = int(rng.integers(1, 50))
    wh, xy = rng.uniform(0.01, 0.9, (nt, 2)), rng.uniform(0, 1, (nt, 2))
    wh[0] = 0.0  # a degenerate label: never matched (its wh ratio is infinite)
    xy[-1] = 1.0  # a centre on the far edge: the cell index is clamped into the grid
    t = np.concatenate([rng.integers(0, 3, (nt, 1)), rng.integers(0, nc, (nt, 1)), xy, wh], 1)
    return nc, hyp, p, torch.tensor(t.astype(np.float32))


@pytest.mark.parametrize("seed", range(8))
def test_equals_the_boolean_mask_formulation(seed):
    nc, hyp, p, t = _case(seed)
    results = []
    for fn in (lambda cl, q: cl(q, t), lambda cl, q: _oracle(cl, q, t)):
        q = [x.clone().requires_grad_(True) for x in p]
        loss, items = fn(ComputeLoss(StandInModel(nc=nc, hyp=hyp)), q)
        loss.backward()
        results.append((to_numpy(loss.detach()), to_numpy(items), [to_numpy(x.grad) for x in q]))
    (l1, i1, g1), (l2, i2, g2) = results
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    np.testing.assert_allclose(i1, i2, rtol=1e-6, atol=1e-9)
    for a, b in zip(g1, g2):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())
    assert i1[0] > 0 and (i1[2] > 0) == (nc > 1)


def test_padding_rows_change_nothing():
    nc, hyp, p, t = _case(11)
    cl = ComputeLoss(StandInModel(nc=nc, hyp=hyp))
    _, items = cl(p, t)
    _, items_p = cl(p, pad_targets(t, t.shape[0] + 13))
    np.testing.assert_allclose(to_numpy(items_p), to_numpy(items), rtol=1e-6)
    _, items0 = cl(p, pad_targets(t[:0], 8))
    _, items_none = cl(p, t[:0])
    np.testing.assert_allclose(to_numpy(items0), to_numpy(items_none), rtol=1e-7)
    assert float(items0[0]) == 0 and float(items0[2]) == 0
    with pytest.raises(ValueError, match="do not fit"):
        pad_targets(t, 2)


@pytest.mark.skipif(not IS_TORCH, reason="meta tensors are a PyTorch feature")
def test_no_value_reaches_the_host():
    """On meta tensors (shapes, no data) any .item(), nonzero or boolean-mask index would raise: the loss and its
    backward run through, so no step of it makes the host wait for the device."""
    cl = ComputeLoss(StandInModel().to("meta"))
    p = [torch.empty(2, 3, s, s, 85, device="meta", requires_grad=True) for s in (8, 4, 2)]
    loss, items = cl(p, torch.empty(10, 6, device="meta"))
    loss.backward()
    assert tuple(loss.shape) == (1,) and tuple(items.shape) == (3,) and p[0].grad is not None
    with pytest.raises(Exception):  # the check is real: the official boolean-mask formulation cannot run on meta
        _oracle(cl, p, torch.empty(10, 6, device="meta"))


@pytest.mark.slow
@pytest.mark.skipif(not IS_TORCH or not hasattr(torch, "compile"), reason="torch.compile is a PyTorch feature")
def test_compiles_as_one_graph():
    """fullgraph=True fails on any graph break (a host read, a data-dependent shape): the padded loss compiles
    whole, so it can sit inside a compiled or CUDA-graph-captured training step, and gives the same value."""
    nc, hyp, p, t = _case(2)
    cl = ComputeLoss(StandInModel(nc=nc, hyp=hyp))
    t = pad_targets(t, 64)
    eager = cl(p, t)[0]
    compiled = torch.compile(lambda q, tt: cl(q, tt)[0], fullgraph=True, dynamic=False)(p, t)
    np.testing.assert_allclose(to_numpy(compiled), to_numpy(eager), rtol=1e-5)
