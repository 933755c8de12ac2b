"""non_max_suppression on hand-built predictions: filtering, suppression, multi-label, agnostic, max_det, limits."""
import numpy as np
import pytest

from utils.backend import from_numpy, to_numpy
from utils.general import LOGGER, nms_numpy, non_max_suppression


def _pred(rows, nc=3):
    """rows of (cx, cy, w, h, obj, cls_id or per-class list) -> a (1, n, 5 + nc) prediction tensor."""
    out = np.zeros((1, len(rows), 5 + nc), np.float32)
    for k, (cx, cy, w, h, obj, cls) in enumerate(rows):
        out[0, k, :5] = cx, cy, w, h, obj
        if isinstance(cls, (list, tuple)):
            out[0, k, 5:] = cls
        else:
            out[0, k, 5 + cls] = 1.0
    return from_numpy(out)


def test_duplicates_suppressed_and_boxes_converted():
    p = _pred([(50, 50, 20, 20, 0.9, 0), (51, 50, 20, 20, 0.8, 0), (150, 150, 20, 20, 0.7, 0)])
    (out,) = non_max_suppression(p, conf_thres=0.25, iou_thres=0.45)
    out = to_numpy(out)
    assert out.shape == (2, 6)
    np.testing.assert_allclose(out[0], [40, 40, 60, 60, 0.9, 0], atol=1e-5)  # xywh -> xyxy, best first
    np.testing.assert_allclose(out[1], [140, 140, 160, 160, 0.7, 0], atol=1e-5)


def test_iou_threshold_is_strict_and_hand_worked():
    # Boxes 20x20 shifted by 5: inter 15*20 = 300, union 500, IoU 0.6.
    p = _pred([(50, 50, 20, 20, 0.9, 0), (55, 50, 20, 20, 0.8, 0)])
    assert len(non_max_suppression(p, 0.25, iou_thres=0.59)[0]) == 1
    assert len(non_max_suppression(p, 0.25, iou_thres=0.61)[0]) == 2


def test_confidence_is_obj_times_cls():
    p = _pred([(50, 50, 20, 20, 0.5, [0.4, 0.0, 0.0]), (150, 50, 20, 20, 0.5, [0.6, 0.0, 0.0])])
    (out,) = non_max_suppression(p, conf_thres=0.25)
    out = to_numpy(out)
    assert out.shape == (1, 6) and out[0, 4] == pytest.approx(0.3)  # 0.5*0.4 = 0.2 is under the threshold


def test_classes_do_not_suppress_each_other_unless_agnostic():
    p = _pred([(50, 50, 20, 20, 0.9, 0), (50, 50, 20, 20, 0.8, 1)])
    assert len(non_max_suppression(p, 0.25, 0.45)[0]) == 2
    (out,) = non_max_suppression(p, 0.25, 0.45, agnostic=True)
    assert len(out) == 1 and float(out[0, 5]) == 0


def test_multi_label_gives_one_row_per_class_above_threshold():
    p = _pred([(50, 50, 20, 20, 1.0, [0.9, 0.5, 0.1])])
    assert len(non_max_suppression(p, 0.25, 0.45, multi_label=False)[0]) == 1
    out = to_numpy(non_max_suppression(p, 0.25, 0.45, multi_label=True)[0])
    assert sorted(out[:, 5].tolist()) == [0, 1]
    assert sorted(out[:, 4].tolist()) == pytest.approx([0.5, 0.9])


def test_classes_filter_and_max_det():
    rows = [(30 * k + 15, 15, 10, 10, 0.9 - 0.01 * k, k % 3) for k in range(20)]  # 20 disjoint boxes
    p = _pred(rows)
    assert len(non_max_suppression(p, 0.25, 0.45)[0]) == 20
    out = to_numpy(non_max_suppression(p, 0.25, 0.45, max_det=5)[0])
    assert len(out) == 5 and np.all(np.diff(out[:, 4]) <= 0) and out[0, 4] == pytest.approx(0.9)
    out = to_numpy(non_max_suppression(p, 0.25, 0.45, classes=[1])[0])
    assert len(out) == 7 and set(out[:, 5].tolist()) == {1}


def test_empty_inputs_give_empty_outputs():
    empty = from_numpy(np.zeros((2, 0, 8), np.float32))
    out = non_max_suppression(empty)
    assert len(out) == 2 and all(tuple(o.shape) == (0, 6) for o in out)
    low = _pred([(50, 50, 20, 20, 0.01, 0)])  # everything under conf_thres
    assert tuple(non_max_suppression(low, 0.25)[0].shape) == (0, 6)
    assert len(nms_numpy(np.zeros((0, 4)), np.zeros(0), 0.5)) == 0


def test_batch_images_are_independent_and_eval_tuple_accepted():
    a = _pred([(50, 50, 20, 20, 0.9, 0)])
    b = _pred([(50, 50, 20, 20, 0.01, 0)])
    batch = from_numpy(np.concatenate([to_numpy(a), to_numpy(b)], 0))
    out = non_max_suppression((batch, None), 0.25, 0.45)  # eval-mode model output is (pred, raw maps)
    assert [len(o) for o in out] == [1, 0]


def test_save_hybrid_labels_are_added_with_conf_1():
    p = _pred([(150, 150, 20, 20, 0.9, 0)])
    lb = [from_numpy(np.array([[2, 20, 20, 20, 20]], np.float32))]  # cls, xywh pixels
    out = to_numpy(non_max_suppression(p, 0.25, 0.45, labels=lb)[0])
    assert len(out) == 2
    np.testing.assert_allclose(out[0], [10, 10, 30, 30, 1.0, 2], atol=1e-5)


def _textbook_nms(boxes, scores, groups, thres):
    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = w * h
        with np.errstate(invalid="ignore"):  # two zero-area boxes: 0/0, NaN
            return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)

    keep = []
    for i in np.argsort(-scores, kind="stable"):  # the textbook loop, one box at a time
        if all(groups[k] != groups[i] or not iou(boxes[k], boxes[i]) > thres for k in keep):  # NaN: no suppression
            keep.append(i)
    return keep


@pytest.mark.framework_free  # numpy in, numpy out: the same under both backends
def test_numpy_nms_matches_brute_force_greedy():
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 100, (300, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (300, 2)).astype(np.float32)], 1)
    scores = rng.random(300).astype(np.float32)
    groups = rng.integers(0, 4, 300)
    assert nms_numpy(boxes, scores, 0.5, groups).tolist() == _textbook_nms(boxes, scores, groups, 0.5)


@pytest.mark.framework_free
@pytest.mark.parametrize("block", [1, 7, 64, 512])
@pytest.mark.parametrize("seed", [1, 2])
def test_blocked_nms_matches_brute_force_across_blocks_and_chains(block, seed):
    """Blocks that split groups and suppression chains (each box overlapping the next one along a line, so whether a
    box survives depends on the whole chain before it), tied scores, and one group far larger than the others."""
    from utils.nms import _greedy_nms_numpy
    rng = np.random.default_rng(seed)
    n = 400
    x = np.cumsum(rng.uniform(2, 9, n)).astype(np.float32) % 300  # consecutive boxes overlap by varying amounts
    y = rng.uniform(0, 30, n).astype(np.float32)
    boxes = np.stack([x, y, x + 14, y + 14], 1)
    scores = np.round(rng.random(n), 2).astype(np.float32)  # ties
    groups = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 12, n))
    for thres in (0.2, 0.45):
        kept = _greedy_nms_numpy(boxes, scores, thres, groups, block=block)
        assert sorted(kept.tolist()) == sorted(_textbook_nms(boxes, scores, groups, thres))
        assert (np.diff(scores[kept]) <= 0).all()  # best first (equal scores of different groups in any order)
        assert _greedy_nms_numpy(boxes, scores, thres, None, block=block).tolist() == \
            _textbook_nms(boxes, scores, np.zeros(n), thres)  # one group: exactly the textbook order


@pytest.mark.framework_free
@pytest.mark.parametrize("cells", [1 << 21, 300])  # 300: a batched call holds one group (or three of up to 8 boxes)
def test_groups_of_every_size_solved_together_match_brute_force(cells, monkeypatch):
    """Groups of 1 to 300 boxes (validation at conf 0.001 gives dozens of classes an image, most of them small):
    the small ones are padded and solved in batches of similar size, the large ones in blocks; every group's answer
    must be the textbook one, whatever the others' sizes and however the batches are cut."""
    import utils.nms
    from utils.nms import _greedy_nms_numpy
    monkeypatch.setattr(utils.nms, "SMALL_BATCH_CELLS", cells)
    rng = np.random.default_rng(3)
    sizes = [1, 2, 3, 5, 8, 9, 16, 17, 31, 33, 64, 65, 127, 128, 129, 300]
    groups = np.repeat(rng.permutation(len(sizes)) * 3, sizes)  # group ids not in size order
    n = len(groups)
    xy = rng.uniform(0, 60, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(4, 30, (n, 2)).astype(np.float32)], 1)
    boxes[::37, 2:] = boxes[::37, :2]  # some zero-area boxes: NaN IoU, which suppresses nothing
    scores = np.round(rng.random(n), 2).astype(np.float32)
    for thres in (0.3, 0.6):
        kept = _greedy_nms_numpy(boxes, scores, thres, groups, block=128)
        assert sorted(kept.tolist()) == sorted(_textbook_nms(boxes, scores, groups, thres))


def test_time_limit_reports_cut_images(caplog):
    batch = from_numpy(np.repeat(to_numpy(_pred([(50, 50, 20, 20, 0.9, 0)])), 3, 0))
    LOGGER.propagate = True  # let caplog see the project logger
    try:
        with caplog.at_level("WARNING", logger="yolov5"):
            out = non_max_suppression(batch, 0.25, 0.45, time_limit=0.0)
    finally:
        LOGGER.propagate = False
    assert [len(o) for o in out] == [1, 0, 0]
    assert "2 of 3 images" in caplog.text


@pytest.mark.parametrize("kw", [dict(multi_label=True), dict(agnostic=True), dict(classes=[0, 2], max_det=7)])
def test_kernel_path_matches_numpy_path(monkeypatch, kw):
    """Where the framework has an NMS kernel (torchvision, OneFlow CUDA) the candidates are built with tensor ops;
    a stand-in kernel runs that path on CPU and must give the numpy path's rows."""
    import utils.backend as backend
    rng = np.random.default_rng(1)
    p = np.zeros((2, 400, 8), np.float32)
    p[..., :2] = rng.uniform(0, 200, (2, 400, 2))
    p[..., 2:4] = rng.uniform(10, 60, (2, 400, 2))
    p[..., 4:] = rng.random((2, 400, 4))
    x = from_numpy(p)
    plain = non_max_suppression(x, 0.1, 0.5, **kw)

    def kernel(boxes, scores, iou):
        return from_numpy(nms_numpy(to_numpy(boxes), to_numpy(scores), iou))

    monkeypatch.setattr(backend, "nms_kernel", lambda dev: kernel)
    fused = non_max_suppression(x, 0.1, 0.5, **kw)
    for a, b in zip(plain, fused):
        assert len(a) > 0
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-6, atol=1e-5)


def test_default_time_limit_stops_a_huge_candidate_set(caplog):
    """The official limit by default, 0.5 + 0.05 * batch size seconds (0.65 s for 3 images): 30,000 disjoint
    candidates of one class (nothing suppresses anything, so every greedy pass sees all of them) take longer than
    that for the first image, so the other two are cut, with the warning, instead of stalling validation."""
    side = 174  # 174 x 174 grid of 4 px boxes 10 px apart: 30,276 candidates, none overlapping
    cx, cy = np.meshgrid(np.arange(side) * 10.0 + 5, np.arange(side) * 10.0 + 5)
    rows = np.zeros((side * side, 5 + 3), np.float32)
    rows[:, 0], rows[:, 1], rows[:, 2:4] = cx.ravel(), cy.ravel(), 4.0
    rows[:, 4] = np.linspace(0.9, 0.5, len(rows))
    rows[:, 5] = 1.0
    batch = from_numpy(np.repeat(rows[None], 3, 0))
    LOGGER.propagate = True
    try:
        with caplog.at_level("WARNING", logger="yolov5"):
            out = non_max_suppression(batch, 0.25, 0.45, max_det=300)
    finally:
        LOGGER.propagate = False
    assert [len(o) for o in out] == [300, 0, 0]  # the first image finished (best 300 kept), the rest were cut
    assert "NMS time limit 0.650s exceeded" in caplog.text and "2 of 3 images" in caplog.text
