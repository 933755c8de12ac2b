"""The segmentation loss equals the official one on fixed weights and a fixed batch, keeps the detection loss's
fixed-shape style (padding rows change nothing, no value reaches the host) and behaves at the edges.

Official values: recorded with the official code (ultralytics/yolov5 5081342f, utils/segment/loss.py ComputeLoss,
its venv: torch 2.13 CPU) by a script outside the project: ../shared/weights/yolov5n-seg-coco128.pt loaded with
attempt_load(fuse=False), model.hyp = data/hyps/hyp.scratch-low.yaml; the batch = the official segmentation loader
(augment=False, rect=False, shuffle=False, batch 4, img 320) over the four images 000000000009, 025, 030, 034 of
coco128-seg; eval-mode forward of im / 255, loss on (raw maps, protos). Printed: loss, then (box, seg, obj, cls).
"""
import numpy as np
import pytest
import yaml

from utils.backend import IS_TORCH, to_numpy, torch

ROOT_HYP = "data/hyps/hyp.scratch-low.yaml"
OFFICIAL = {  # (overlap, mask ratio): (loss * bs, (box, seg, obj, cls)); the loader's batch checksums below
    (True, 4): (1.17934012, (0.05472491, 0.06699598, 0.07607327, 0.09704087)),
    (False, 4): (1.17256629, (0.05472491, 0.06530252, 0.07607327, 0.09704087)),
    (True, 1): (1.19231737, (0.05472491, 0.07024029, 0.07607327, 0.09704087)),
}
OFFICIAL_BATCH = {"im_sum": 134197970, "targets_sum": 613.124878,
                  "masks": {(True, 4): (10071.0, (4, 80, 80)), (False, 4): (6935.0, (13, 80, 80)),
                            (True, 1): (158386.0, (4, 320, 320))}}
STEMS = ("000000000009", "000000000025", "000000000030", "000000000034")


@pytest.fixture(scope="module")
def four_images(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("seg4")
    (d / "images").mkdir()
    (d / "labels").mkdir()
    src = shared_dir / "data" / "coco128-seg"
    for s in STEMS:
        (d / "images" / f"{s}.jpg").symlink_to(src / "images" / "train2017" / f"{s}.jpg")
        (d / "labels" / f"{s}.txt").symlink_to(src / "labels" / "train2017" / f"{s}.txt")
    return d / "images"


@pytest.fixture(scope="module")
def seg_model(shared_dir, root_dir):
    from models.experimental import attempt_load
    model = attempt_load(shared_dir / "weights" / "yolov5n-seg-coco128.pt", fuse=False)
    model.hyp = yaml.safe_load((root_dir / ROOT_HYP).read_text())
    return model


def _batch(images, overlap, ratio):
    from utils.segment.dataset import create_seg_dataloader
    loader = create_seg_dataloader(str(images), 320, 4, 32, workers=0, overlap_mask=overlap,
                                   mask_downsample_ratio=ratio)[0]
    return next(iter(loader))


@pytest.mark.parametrize("overlap,ratio", list(OFFICIAL))
def test_equals_official_loss(four_images, seg_model, overlap, ratio):
    from utils.segment.loss import SegmentationLoss
    im, targets, _, _, masks = _batch(four_images, overlap, ratio)
    # the same batch as the official loader's
    assert int(to_numpy(im).astype(np.int64).sum()) == OFFICIAL_BATCH["im_sum"]
    assert float(to_numpy(targets).astype(np.float64).sum()) == pytest.approx(OFFICIAL_BATCH["targets_sum"], abs=1e-3)
    msum, mshape = OFFICIAL_BATCH["masks"][(overlap, ratio)]
    assert float(to_numpy(masks).astype(np.float64).sum()) == msum and tuple(masks.shape) == mshape
    with torch.no_grad():
        _, protos, maps = seg_model(im.float() / 255)
    loss, items = SegmentationLoss(seg_model, overlap=overlap)((maps, protos), targets, masks)
    want_loss, want_items = OFFICIAL[(overlap, ratio)]
    assert abs(float(loss) - want_loss) <= 1e-4
    np.testing.assert_allclose(to_numpy(items), want_items, atol=1e-4)


def _synthetic(nt=6, bs=2, nc=3, seed=0):
    from models.tasks import SegmentationModel
    rng = np.random.default_rng(seed)
    model = SegmentationModel("yolov5n-seg.yaml", nc=nc)
    model.hyp = dict(box=0.05, obj=1.0, cls=0.5, cls_pw=1.0, obj_pw=1.0, anchor_t=4.0, fl_gamma=0.0)
    p = [torch.tensor(rng.normal(0, 1, (bs, 3, s, s, 5 + nc + 32)).astype(np.float32)) for s in (8, 4, 2)]
    proto = torch.tensor(rng.normal(0, 1, (bs, 32, 16, 16)).astype(np.float32))
    b = np.sort(rng.integers(0, bs, nt))
    t = np.concatenate([b[:, None], rng.integers(0, nc, (nt, 1)), rng.uniform(0.3, 0.7, (nt, 2)),
                        rng.uniform(0.1, 0.5, (nt, 2))], 1).astype(np.float32)
    masks = torch.tensor((rng.uniform(0, 1, (nt, 16, 16)) > 0.5).astype(np.float32))
    return model, p, proto, torch.tensor(t), masks


def test_padding_rows_and_no_targets():
    from utils.loss import pad_targets
    from utils.segment.loss import SegmentationLoss
    model, p, proto, t, masks = _synthetic()
    cl = SegmentationLoss(model, overlap=False)
    _, items = cl((p, proto), t, masks)
    _, items_p = cl((p, proto), pad_targets(t, t.shape[0] + 5), masks)
    np.testing.assert_allclose(to_numpy(items_p), to_numpy(items), rtol=1e-6)
    assert float(items[1]) > 0  # a mask loss was computed
    _, none = cl((p, proto), t[:0], masks[:0])
    assert float(none[0]) == 0 and float(none[1]) == 0 and float(none[3]) == 0 and float(none[2]) > 0


def test_mask_loss_falls_when_the_logits_agree_with_the_masks():
    """Protos that spell each target's mask, coefficients that pick it: the mask loss drops far below random ones."""
    from utils.segment.loss import SegmentationLoss
    model, p, proto, t, masks = _synthetic(nt=2, bs=2, seed=3)
    t[:, 0] = torch.tensor([0.0, 1.0])
    cl = SegmentationLoss(model, overlap=False)
    random_seg = float(cl((p, proto), t, masks)[1][1])
    good = torch.zeros_like(proto)
    for i in range(2):
        good[i, 0] = (masks[i] * 2 - 1) * 20  # channel 0 of image i: +20 on the mask, -20 off it
    for pi in p:
        pi[..., 5 + 3:] = 0.0
        pi[..., 5 + 3] = 1.0  # every coefficient vector picks channel 0
    assert float(cl((p, good), t, masks)[1][1]) < 0.01 * random_seg


@pytest.mark.skipif(not IS_TORCH, reason="meta tensors are a PyTorch feature")
def test_no_value_reaches_the_host():
    """On meta tensors any .item(), nonzero, unique or boolean-mask index raises: forward and backward run."""
    from utils.segment.loss import SegmentationLoss
    model, *_ = _synthetic()
    cl = SegmentationLoss(model.to("meta"), overlap=True)
    p = [torch.empty(2, 3, s, s, 5 + 3 + 32, device="meta", requires_grad=True) for s in (8, 4, 2)]
    proto = torch.empty(2, 32, 16, 16, device="meta", requires_grad=True)
    loss, items = cl((p, proto), torch.empty(7, 6, device="meta"), torch.empty(2, 16, 16, device="meta"))
    loss.backward()
    assert tuple(items.shape) == (4,) and proto.grad is not None and p[0].grad is not None


def test_backward_gives_finite_gradients():
    """Training needs the mask loss's gradient: it reaches the maps (coefficients) and the prototypes, finite."""
    from utils.segment.loss import SegmentationLoss
    model, p, proto, t, masks = _synthetic(seed=5)
    p = [pi.requires_grad_(True) for pi in p]
    proto.requires_grad_(True)
    loss, items = SegmentationLoss(model, overlap=False)((p, proto), t, masks)
    loss.backward()
    g = to_numpy(proto.grad)
    assert np.isfinite(g).all() and np.abs(g).sum() > 0
    coef_grad = np.concatenate([to_numpy(pi.grad)[..., 8:].reshape(-1) for pi in p])
    assert np.isfinite(coef_grad).all() and np.abs(coef_grad).sum() > 0


def _reference_mask_loss(cl, p, proto, targets, masks):
    """The mask loss as the official code forms it, match by match: build_targets' matches per level, per image the
    mean of the boxed, area-normalised BCE of coefs @ protos against the target's mask, summed over images and levels
    (before the box gain / batch size scaling). Per-target masks (overlap=False)."""
    from utils.backend import F
    _, _, indices, _ = cl.build_targets(p, targets)
    valid = to_numpy(cl._candidates(p, targets)["valid"])  # (nl, 5, na, nt): build_targets keeps these, in order
    nt = targets.shape[0]
    target_of = np.broadcast_to(np.arange(nt), (5, cl.na, nt)).reshape(-1)
    bs, nm, mh, mw = proto.shape
    xs, ys = np.arange(mw), np.arange(mh)
    total = 0.0
    for level, (b, a, gj, gi) in enumerate(indices):
        rows = target_of[valid[level].reshape(-1)]
        b, a, gj, gi = (to_numpy(v) for v in (b, a, gj, gi))
        for img in range(bs):
            matches = np.nonzero(b == img)[0]
            per_match = []
            for k in matches:
                t = int(rows[k])
                coef = p[level][img, a[k], gj[k], gi[k], 5 + cl.nc:]
                logit = (coef.view(1, -1) @ proto[img].view(nm, -1)).view(mh, mw)
                bce = to_numpy(F.binary_cross_entropy_with_logits(logit, masks[t], reduction="none"))
                x, y, w, h = (float(v) for v in targets[t, 2:6])
                inside = (((xs >= (x - w / 2) * mw) & (xs < (x + w / 2) * mw))[None, :] &
                          ((ys >= (y - h / 2) * mh) & (ys < (y + h / 2) * mh))[:, None])
                per_match.append(float((bce * inside).mean()) / (w * h))
            total += float(np.mean(per_match)) if per_match else 0.0
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_mask_loss_equals_match_by_match_reference_at_integer_centres(seed):
    """The three-slot mask loss equals the official match-by-match sum, also for centres on exact grid coordinates,
    where detection takes both neighbours of an axis and the far one is the target's own cell."""
    from utils.segment.loss import SegmentationLoss
    model, p, proto, t, masks = _synthetic(nt=8, bs=2, seed=seed)
    t[:3, 2] = 0.5  # x = 4.0, 2.0, 1.0 grid units on the 8, 4, 2 grids
    t[1:4, 3] = 0.25  # y = 2.0, 1.0, 0.5
    t[5, 2:4] = torch.tensor([0.375, 0.625])  # 3.0 and 5.0 on the 8-grid
    cl = SegmentationLoss(model, overlap=False)
    assert bool((cl._candidates(p, t)["valid"][:, 1] & cl._candidates(p, t)["valid"][:, 3]).any())  # both taken
    _, items = cl((p, proto), t, masks)
    want = _reference_mask_loss(cl, p, proto, t, masks) * cl.hyp.box / proto.shape[0]
    assert float(items[1]) == pytest.approx(want, rel=1e-5)


def test_chunked_mask_logits_equal_one_piece(monkeypatch):
    """On the CPU the mask logits are made a chunk of targets at a time; 3 chunks give the one-piece loss and
    gradients."""
    from utils.segment.loss import SegmentationLoss
    results = []
    for chunk_bytes in (1 << 40, 3 * 27 * 16 * 16 * 4):  # everything at once; 3 targets a chunk (8 targets)
        model, p, proto, t, masks = _synthetic(nt=8, bs=2, seed=7)
        p = [pi.requires_grad_(True) for pi in p]
        proto.requires_grad_(True)
        cl = SegmentationLoss(model, overlap=False)
        monkeypatch.setattr(cl, "chunk_bytes", chunk_bytes)
        assert cl._targets_per_chunk(proto, 27, 8) == (8 if chunk_bytes > 1 << 30 else 3)
        loss, items = cl((p, proto), t, masks)
        loss.backward()
        results.append((to_numpy(items), to_numpy(proto.grad), to_numpy(p[0].grad)))
    for one, chunked in zip(*results):
        np.testing.assert_allclose(chunked, one, rtol=1e-5, atol=1e-7)
