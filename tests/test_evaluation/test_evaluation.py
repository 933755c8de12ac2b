"""utils/evaluation: DetectionEvaluator on hand-made predictions with figures derived by hand, the validation loop
on a fake model and loader, and the layering rule (library code never imports an entry script)."""
import ast
import logging
from pathlib import Path

import numpy as np
import pytest

from utils.backend import from_numpy, nn, torch
from utils.evaluation import (CocoPredictions, DetectionEvaluator, labels_in_pixels, run_validation,
                              validate_model)

ROOT = Path(__file__).resolve().parents[2]
SQUARE = ((100, 100), ((1.0, 1.0), (0.0, 0.0)))  # loader shapes entry: original (h, w), (gain, pad): no letterbox


def targets(rows):
    """Loader targets [image, cls, x, y, w, h] normalized, from pixel xyxy boxes on a 100 x 100 input."""
    out = []
    for img, cls, (x1, y1, x2, y2) in rows:
        out.append([img, cls, (x1 + x2) / 200, (y1 + y2) / 200, (x2 - x1) / 100, (y2 - y1) / 100])
    return np.array(out, np.float32).reshape(-1, 6)


def preds(*images):
    return [np.array(rows, np.float32).reshape(-1, 6) for rows in images]


@pytest.fixture
def log_text(caplog):
    from utils.general import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True
    with caplog.at_level(logging.INFO, logger="yolov5"):
        yield lambda: caplog.text
    LOGGER.propagate = propagate


def two_class_evaluator(**kw):
    """Class 0 (image 0): labels A and B; predictions A exactly (conf 0.9) and a box on nothing (conf 0.8).
    Class 1 (image 1): one label; one prediction of IoU 0.78 with it (conf 0.7)."""
    ev = DetectionEvaluator(nc=2, names={0: "cat", 1: "dog"}, **kw)
    t = targets([(0, 0, (10, 10, 30, 30)), (0, 0, (50, 50, 90, 90)), (1, 1, (0, 0, 20, 10))])
    p = preds([[10, 10, 30, 30, 0.9, 0], [0, 60, 10, 70, 0.8, 0]], [[0, 0, 15.6, 10, 0.7, 1]])
    ev.update(p, from_numpy(t), [SQUARE, SQUARE], (100, 100), paths=["a/000000000001.jpg", "a/000000000002.jpg"])
    return ev


def test_figures_derived_by_hand(log_text):
    """Class 0: tp [1, 0] by confidence, 2 labels -> recall [.5, .5], precision [1, .5]; the envelope is 1 up to
    recall .5, then falls linearly to 0 at recall 1 (the sentinel); at recall .5 np.interp takes the later point
    (.5). Trapezoids at 101 points: .49 + (1 + .5) / 2 * .01 + .125 = .6225 at every IoU threshold (the match has
    IoU 1). Class 1: one label found first: AP .995 (the last trapezoid falls to the 0 sentinel) while the IoU
    .78 passes the threshold (.5 ... .75: 6 of 10), else 0: mAP50-95 .597.
    P and R are read where the smoothed mean F1 peaks: below confidence .7 both classes keep their final
    precision and recall (.5, .5 and 1, 1), the widest plateau (mean F1 .75): P = R = .75."""
    ev = two_class_evaluator(verbose=True)
    m = ev.compute()
    assert m.seen == 2 and m.nt.tolist() == [2, 1] and m.ap_class.tolist() == [0, 1]
    np.testing.assert_allclose(m.ap50, [0.6225, 0.995], atol=1e-9)
    np.testing.assert_allclose(m.ap, [0.6225, 0.597], atol=1e-9)
    assert m.map50 == pytest.approx((0.6225 + 0.995) / 2, abs=1e-9)
    assert m.map50_95 == pytest.approx((0.6225 + 0.597) / 2, abs=1e-9)
    np.testing.assert_allclose(m.p, [0.5, 1.0], atol=1e-9)
    np.testing.assert_allclose(m.r, [0.5, 1.0], atol=1e-9)
    assert (m.mp, m.mr) == pytest.approx((0.75, 0.75), abs=1e-9)
    np.testing.assert_allclose(m.maps(), [0.6225, 0.597], atol=1e-9)
    assert m.results((1.0, 2.0, 3.0))[4:] == (1.0, 2.0, 3.0)
    text = log_text()  # the table: `all` and one row per class, in val.py's layout
    assert ("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("all", 2, 3, 0.75, 0.75, 0.80875, 0.60975) in text
    assert ("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("dog", 2, 1, 1, 1, 0.995, 0.597) in text


def test_no_per_class_rows_unless_verbose(log_text):
    two_class_evaluator().compute()
    assert "       all" in log_text() and "cat" not in log_text()


def test_missed_labels_and_background_detections():
    """An image with labels and no prediction adds its labels as misses; one with predictions and no labels adds
    false positives: with one exact hit among them, class 0 has recall 1/2 at precision 1/2."""
    ev = DetectionEvaluator(nc=1, names={0: "a"})
    t = targets([(0, 0, (10, 10, 30, 30)), (1, 0, (40, 40, 60, 60))])
    ev.update(preds([[10, 10, 30, 30, 0.9, 0]], []), t, [SQUARE, SQUARE], (100, 100))
    ev.update(preds([[5, 5, 15, 15, 0.95, 0]]), np.zeros((0, 6), np.float32), [SQUARE], (100, 100))
    m = ev.compute()
    assert m.seen == 3 and m.nt.tolist() == [2]
    assert m.p[0] == pytest.approx(0.5) and m.r[0] == pytest.approx(0.5)
    # tp by confidence [0, 1], 2 labels: precision [0, .5], recall [0, .5]; the envelope is .5 up to recall .5,
    # then falls linearly to the 0 sentinel at recall 1 (grid points at both ends, so the trapezoids are exact):
    # .5 * .5 + .5 * .5 / 2 = .375
    assert m.ap50[0] == pytest.approx(0.375, abs=1e-9)


def test_nothing_detected_gives_zeros_and_a_warning_without_labels(log_text):
    ev = DetectionEvaluator(nc=3, names={0: "a", 1: "b", 2: "c"})
    ev.update(preds([]), np.zeros((0, 6), np.float32), [SQUARE], (100, 100))
    m = ev.compute()
    assert (m.mp, m.mr, m.map50, m.map50_95) == (0, 0, 0, 0) and m.maps().tolist() == [0, 0, 0]
    assert "no labels found in val set" in log_text()


def test_wrong_class_is_never_a_match_but_single_cls_makes_it_one():
    t = targets([(0, 1, (10, 10, 30, 30))])
    p = preds([[10, 10, 30, 30, 0.9, 0]])
    ev = DetectionEvaluator(nc=2, names={0: "a", 1: "b"})
    ev.update(p, t, [SQUARE], (100, 100))
    assert ev.compute().map50 == 0
    t[:, 1] = 0  # the loader gives single-class labels as class 0
    ev = DetectionEvaluator(nc=1, names={0: "item"}, single_cls=True)
    ev.update(p, t, [SQUARE], (100, 100))
    assert ev.compute().map50 == pytest.approx(0.995)


def test_boxes_are_matched_and_saved_in_original_pixels(tmp_path):
    """A 200 x 100 (w x h) image letterboxed into 100 x 100: gain .5, 25 px of padding above and below. The label
    file holds the prediction in the original image, normalized: input [10, 35, 30, 45] -> original [20, 20, 60,
    40] -> centre (40/200, 30/100), size (40/200, 20/100)."""
    (tmp_path / "labels").mkdir()
    shapes = [((100, 200), ((0.5, 0.5), (0.0, 25.0)))]
    t = targets([(0, 0, (10, 35, 30, 45))])
    coco = CocoPredictions(tmp_path, "w", is_coco=False)
    ev = DetectionEvaluator(nc=1, names={0: "a"}, save_dir=tmp_path, save_txt=True, save_conf=True, coco=coco)
    ev.update(preds([[10, 35, 30, 45, 0.5, 0]]), t, shapes, (100, 100), paths=["x/img7.jpg"])
    row = np.loadtxt(tmp_path / "labels" / "img7.txt")
    np.testing.assert_allclose(row, [0, 0.2, 0.3, 0.2, 0.2, 0.5], atol=1e-6)
    assert coco.jdict == [{"image_id": "img7", "category_id": 0, "bbox": [20.0, 20.0, 40.0, 20.0],
                           "score": 0.5}]
    assert ev.compute().map50_95 == pytest.approx(0.995)


def test_coco_json_written_and_skipped_without_annotations(tmp_path, log_text):
    coco = CocoPredictions.for_dataset({"path": str(tmp_path)}, tmp_path, weights=["runs/best.pt"])
    ev = DetectionEvaluator(nc=2, names={0: "cat", 1: "dog"}, coco=coco)
    t = targets([(0, 0, (10, 10, 30, 30))])
    ev.update(preds([[10, 10, 30, 30, 0.9, 1], [10, 10, 30, 30, 0.8, 0]]), t, [SQUARE], (100, 100),
              paths=["000000000042.jpg"])
    m = ev.evaluate_coco(ev.compute())
    assert m.map50 == pytest.approx(0.995)  # no annotations: the evaluator's own figures stand
    import json
    entries = json.loads((tmp_path / "best_predictions.json").read_text())
    assert [(e["image_id"], e["category_id"], e["score"]) for e in entries] == [(42, 1, 0.9), (42, 0, 0.8)]
    assert "pycocotools evaluation skipped" in log_text()


def test_plots_write_curves_confusion_matrix_and_batch_images(tmp_path):
    ev = two_class_evaluator(plots=True, save_dir=tmp_path)
    im = torch.zeros((2, 3, 64, 64), dtype=torch.uint8)
    ev.plot_batch(0, im, from_numpy(targets([(0, 0, (10, 10, 30, 30))])), preds([[10, 10, 30, 30, 0.9, 0]], []),
                  ["a.jpg", "b.jpg"])
    ev.plot_batch(3, im, from_numpy(targets([])), preds([], []), ["a.jpg", "b.jpg"])  # only batches 0-2
    ev.compute()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "F1_curve.png", "PR_curve.png", "P_curve.png", "R_curve.png", "confusion_matrix.png",
        "val_batch0_labels.jpg", "val_batch0_pred.jpg"]
    # rows predicted, columns true: cat found once and missed once, dog found, one cat box on background
    np.testing.assert_array_equal(ev.confusion_matrix.matrix, [[1, 0, 1], [0, 1, 0], [1, 0, 0]])


def test_labels_in_pixels():
    t = labels_in_pixels(from_numpy(np.array([[0, 3, 0.5, 0.25, 0.5, 0.5]], np.float32)), (80, 160))
    np.testing.assert_array_equal(t, [[0, 3, 80, 20, 80, 40]])


# ----------------------------------------------------------------------------------------------------------------
# The loop
class BoxesModel(nn.Module):
    """Predicts, for every image, the given pixel xywh boxes with objectness 0.9 and class probabilities 1."""

    def __init__(self, boxes_xywh, cls, nc=2):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        rows = np.zeros((len(boxes_xywh), 5 + nc), np.float32)
        rows[:, :4], rows[:, 4] = boxes_xywh, 0.9
        rows[np.arange(len(cls)), 5 + np.asarray(cls)] = 1.0
        self.rows = from_numpy(rows)
        self.names, self.calls = {0: "cat", 1: "dog"}, []

    def forward(self, im, augment=False):
        self.calls.append((tuple(im.shape), str(im.dtype), float(im.max())))
        out = self.rows[None].repeat(im.shape[0], 1, 1) + self.weight
        return out, [out]  # eval-mode layout: (decoded, raw maps)


def fake_loader(n_batches=2, bs=2):
    t = targets([(i, 0, (10, 10, 30, 30)) for i in range(bs)])
    return [(torch.full((bs, 3, 100, 100), 255, dtype=torch.uint8), from_numpy(t),
             [f"{b}_{i}.jpg" for i in range(bs)], [SQUARE] * bs) for b in range(n_batches)]


def test_run_validation_loop_averages_losses_and_returns_val_run_layout(log_text):
    model = BoxesModel([[20, 20, 20, 20]], [0])
    ev = DetectionEvaluator(nc=2, names=model.names)
    seen = []

    def compute_loss(raw, tg):
        seen.append(len(tg))
        return None, from_numpy(np.array([1.0, 2.0, 3.0 * len(seen)], np.float32))

    (mp, mr, map50, map_, *losses), maps, t = run_validation(model, fake_loader(), ev, compute_loss=compute_loss,
                                                             speed_shape=(2, 3, 100, 100))
    assert model.calls == [((2, 3, 100, 100), str(torch.float32), 1.0)] * 2  # uint8 /255 in float
    assert seen == [2, 2]
    assert losses == pytest.approx([1.0, 2.0, 4.5])  # (3 + 6) / 2 batches
    assert map50 == pytest.approx(0.995) and maps.tolist() == pytest.approx([0.995, 0.995])
    assert len(t) == 3 and "Speed:" in log_text() and "at shape (2, 3, 100, 100)" in log_text()


def test_validate_model_leaves_the_model_in_fp32_eval(tmp_path):
    model = BoxesModel([[20, 20, 20, 20]], [0]).train()
    data = {"nc": 2, "names": {0: "cat", 1: "dog"}, "val": "images"}
    (mp, mr, map50, map_, *losses), maps, _ = validate_model(model, fake_loader(1), data, half=True,
                                                             save_dir=tmp_path, plots=False)
    assert losses == [0.0, 0.0, 0.0] and map50 == pytest.approx(0.995)
    assert not model.training and model.weight.dtype == torch.float32  # half is CUDA-only: fp32 here
    assert not any(tmp_path.iterdir())


def test_save_hybrid_adds_labels_as_detections():
    model = BoxesModel([[80, 80, 10, 10]], [1])  # a dog box where no label is
    ev = DetectionEvaluator(nc=2, names=model.names)
    _, maps, _ = run_validation(model, fake_loader(1), ev, save_hybrid=True)
    assert maps[0] == pytest.approx(0.995)  # every label became a confidence-1 detection of its class


# ----------------------------------------------------------------------------------------------------------------
# Layering
ENTRY_SCRIPTS = {"train", "val", "detect", "export", "hubconf"}


def test_no_library_module_imports_an_entry_script():
    """utils/, models/ and benchmarks/ hold library code: the entry scripts wire it, never the other way round."""
    offenders = []
    for folder in ("utils", "models", "benchmarks"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    mods = [node.module or ""]
                else:
                    continue
                offenders += [f"{f.relative_to(ROOT)}:{node.lineno} {m}" for m in mods
                              if m.split(".")[0] in ENTRY_SCRIPTS]
    assert not offenders, offenders
