"""Hand-worked checks of the detection metrics (IoU, matching, AP, P/R, confusion matrix, fitness)."""
import numpy as np
import pytest

from utils.backend import from_numpy, to_numpy
from utils.metrics import ConfusionMatrix, ap_per_class, box_iou, compute_ap, fitness, match_predictions

IOUV = np.linspace(0.5, 0.95, 10)


def test_box_iou_hand_worked_numpy_and_tensor():
    a = np.array([[0, 0, 10, 10]], np.float32)
    b = np.array([[5, 0, 15, 10], [0, 0, 10, 10], [20, 20, 30, 30], [2, 2, 4, 4]], np.float32)
    want = [50 / 150, 1.0, 0.0, 4 / 100]
    np.testing.assert_allclose(box_iou(a, b)[0], want, atol=1e-6)
    t = box_iou(from_numpy(a), from_numpy(b))
    assert tuple(t.shape) == (1, 4)
    np.testing.assert_allclose(to_numpy(t)[0], want, atol=1e-6)


def test_compute_ap_perfect_and_half():
    # Perfect: envelope 1 up to recall 1, then the sentinel (recall 1, precision 0) halves the last of the 100
    # trapezoids: 1 - 0.01 / 2 = 0.995, the figure the official code gives for perfect predictions.
    assert compute_ap(np.array([1.0]), np.array([1.0]))[0] == pytest.approx(0.995)
    # Recall 0.5 at precision 1, then 1.0 at precision 0.5: 0.5 * 1 + 0.5 * (1 + 0.5) / 2 - 0.01 * 0.5 / 2.
    assert compute_ap(np.array([0.5, 1.0]), np.array([1.0, 0.5]))[0] == pytest.approx(0.8725)


def _stats(dets, labels):
    """dets (N,6) xyxy conf cls, labels (M,5) cls xyxy -> the 4 arrays ap_per_class takes."""
    dets, labels = np.asarray(dets, np.float32).reshape(-1, 6), np.asarray(labels, np.float32).reshape(-1, 5)
    return match_predictions(dets, labels, IOUV), dets[:, 4], dets[:, 5], labels[:, 0]


def test_perfect_predictions_give_full_map_and_p_r_1():
    labels = [[0, 10, 10, 50, 50], [1, 60, 60, 100, 120], [1, 200, 10, 260, 90]]
    dets = [[*lb[1:], 0.9 - 0.1 * k, lb[0]] for k, lb in enumerate(labels)]
    tp, fp, p, r, f1, ap, cls = ap_per_class(*_stats(dets, labels))
    assert list(cls) == [0, 1]
    np.testing.assert_allclose(ap, 0.995)  # the 101-point maximum, see above
    np.testing.assert_allclose(p, 1.0)
    np.testing.assert_allclose(r, 1.0)
    np.testing.assert_allclose(tp, [1, 2])
    np.testing.assert_allclose(fp, 0)


def test_shifted_box_counts_only_at_thresholds_below_its_iou():
    # Shifted 2 px right: intersection 8*10 = 80, union 100 + 100 - 80 = 120, IoU 2/3.
    label, det = [0, 0, 0, 10, 10], [2, 0, 12, 10, 0.8, 0]
    assert box_iou(np.array([label[1:]], np.float32), np.array([det[:4]], np.float32))[0, 0] == pytest.approx(2 / 3)
    correct, *_ = _stats([det], [label])
    assert correct[0].tolist() == [True] * 4 + [False] * 6  # 0.50 0.55 0.60 0.65 <= 0.667 < 0.70
    ap = ap_per_class(*_stats([det], [label]))[5]
    assert ap[0, 0] == pytest.approx(0.995)
    assert ap[0].mean() == pytest.approx(0.995 * 4 / 10)


def test_matching_one_detection_per_label_and_class_must_agree():
    label = [[3, 0, 0, 10, 10]]
    dets = [[0, 0, 10, 10, 0.9, 3], [0, 0, 10, 10, 0.8, 3], [0, 0, 10, 10, 0.95, 4]]
    correct = match_predictions(np.array(dets, np.float32), np.array(label, np.float32), IOUV)
    assert correct[:, 0].tolist() == [True, False, False]  # duplicate is a FP, wrong class never matches
    # The duplicate halves precision at full recall: AP = 0.995 (recall reached at precision 1 first).
    tp, fp, p, r, f1, ap, cls = ap_per_class(*_stats(dets, label))
    assert list(cls) == [3] and ap[0, 0] == pytest.approx(0.995)


def test_missed_label_and_false_positive():
    labels = [[0, 0, 0, 10, 10], [0, 50, 50, 60, 60]]
    dets = [[0, 0, 10, 10, 0.9, 0], [100, 100, 110, 110, 0.8, 0]]
    tp, fp, p, r, f1, ap, cls = ap_per_class(*_stats(dets, labels))
    # PR points (r 0.5, p 1), (r 0.5, p 0.5), then the sentinel (r 1, p 0): precision 1 on [0, 0.5] (area 0.5),
    # a line 0.5 -> 0 on [0.5, 1] (area 0.125); at r = 0.5 the curve takes the lower value 0.5, which costs the
    # 0.49..0.50 trapezoid 0.01 * (1 - 0.5) / 2 = 0.0025: 0.5 + 0.125 - 0.0025.
    assert ap[0, 0] == pytest.approx(0.6225)
    assert r[0] == pytest.approx(0.5, abs=1e-3)


def test_no_predictions_give_zero():
    tp, fp, p, r, f1, ap, cls = ap_per_class(np.zeros((0, 10), bool), np.zeros(0), np.zeros(0), np.array([0, 2]))
    assert list(cls) == [0, 2] and ap.sum() == 0 and p.sum() == 0 and r.sum() == 0


def test_fitness_weights():
    assert fitness(np.array([[0.3, 0.4, 0.5, 0.2]]))[0] == pytest.approx(0.1 * 0.5 + 0.9 * 0.2)


def test_confusion_matrix_counts(tmp_path):
    cm = ConfusionMatrix(nc=2, conf=0.25, iou_thres=0.45)
    labels = np.array([[0, 0, 0, 10, 10], [1, 50, 50, 60, 60]], np.float32)
    dets = np.array([[0, 0, 10, 10, 0.9, 0], [50, 50, 60, 60, 0.9, 0], [200, 200, 210, 210, 0.9, 1],
                     [0, 0, 10, 10, 0.1, 1]], np.float32)  # last one under conf: ignored
    cm.process_batch(dets, labels)
    cm.process_batch(None, np.array([1.0]))
    m = cm.matrix
    assert m[0, 0] == 1 and m[0, 1] == 1  # right, and a class-1 object called class 0
    assert m[1, 2] == 1  # false alarm of class 1 on background
    assert m[2, 1] == 1  # class-1 object missed
    assert m.sum() == 4
    tp, fp = cm.tp_fp()
    assert tp.tolist() == [1, 0] and fp.tolist() == [1, 1]
    cm.plot(save_dir=tmp_path, names=["a", "b"])
    assert (tmp_path / "confusion_matrix.png").stat().st_size > 0


def test_curves_are_written(tmp_path):
    labels = [[0, 0, 0, 10, 10], [1, 50, 50, 60, 60]]
    dets = [[0, 0, 10, 10, 0.9, 0], [50, 50, 60, 60, 0.6, 1]]
    ap_per_class(*_stats(dets, labels), plot=True, save_dir=tmp_path, names={0: "a", 1: "b"})
    for f in ("PR_curve.png", "F1_curve.png", "P_curve.png", "R_curve.png"):
        assert (tmp_path / f).stat().st_size > 0
