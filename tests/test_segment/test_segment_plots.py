"""Segmentation plots: val_batch*_labels.jpg and val_batch*_pred.jpg carry the masks as official segment/val.py draws
them (the loader's masks on the labels; each picture's first 15 predictions' masks, those over 0.25 confidence, on
the predictions), tinted 60 % in the class colour. Pixel tests against the boxes-only mosaics of the same batch, with
this process's backend tensors as the validation loop hands them."""
import numpy as np
import pytest

from utils import backend
from utils.plots import colors, images_as_drawn, output_to_target, plot_images
from utils.segment.evaluator import SegmentationEvaluator
from utils.segment.masks import polygons2masks
from utils.segment.plots import plot_images_and_masks

H = W = 64
GREY = 0.5  # the picture: one flat grey, so every tinted pixel is known
NAMES = {0: "a", 1: "b", 2: "c"}
SQUARES = [np.array([[8, 8], [40, 8], [40, 40], [8, 40]], np.float32),  # instance 0, class 1
           np.array([[44, 20], [60, 20], [60, 60], [44, 60]], np.float32),  # instance 1, class 2
           np.array([[10, 46], [30, 46], [30, 60], [10, 60]], np.float32)]  # only predicted, at conf 0.1


def _batch():
    masks = polygons2masks((H, W), SQUARES)  # (3, H, W) 0/1
    targets = np.array([[0, 1, 24 / W, 24 / H, 32 / W, 32 / H], [0, 2, 52 / W, 40 / H, 16 / W, 40 / H]], np.float32)
    # prototypes at the input resolution, one channel per square: +/-10 where it is on/off; coefficients one-hot
    protos = np.where(masks > 0, 10.0, -10.0).astype(np.float32)[None]
    pred = np.array([[8, 8, 41, 41, 0.9, 1, 1, 0, 0], [44, 20, 61, 61, 0.8, 2, 0, 1, 0],
                     [10, 46, 31, 61, 0.1, 0, 0, 0, 1]], np.float32)
    im = np.full((1, 3, H, W), GREY, np.float32)
    return masks, targets, protos, pred, im


def _t(x):
    return backend.from_numpy(np.ascontiguousarray(x))


def _evaluator_plots(tmp_path, overlap):
    """The two mosaics SegmentationEvaluator draws for batch 0 (arrays as drawn) and the files it wrote."""
    masks, targets, protos, pred, im = _batch()
    label_masks = (masks[0] + 2 * masks[1])[None] if overlap else masks[:2]  # the loader's layout
    drawn = {}

    def draw(name, fn, *args, **kwargs):
        drawn[name] = fn(*args, **kwargs)

    ev = SegmentationEvaluator(3, NAMES, overlap=overlap, plots=True, save_dir=tmp_path)
    ev.draw = draw
    shapes = [((H, W), ((1.0, 1.0), (0.0, 0.0)))]
    ev.update([_t(pred)], _t(protos), _t(targets), _t(label_masks), shapes, (H, W), ["p.jpg"])
    ev.plot_batch(0, _t(im), _t(targets), [_t(pred[:, :6])], ["p.jpg"], masks=_t(label_masks))
    return drawn, masks, targets, pred, im


def _boxes_only(im, targets, tmp_path, name):
    return plot_images(images_as_drawn(_t(im)), targets, ["p.jpg"], tmp_path / name, NAMES)


def _tinted(cls):
    grey = round(GREY * 255)
    return np.array(colors(cls), np.float32) * 0.6 + grey * 0.4


@pytest.mark.parametrize("overlap", [True, False])
def test_val_batch_plots_draw_masks_where_they_are(tmp_path, overlap):
    drawn, masks, targets, pred, im = _evaluator_plots(tmp_path, overlap)
    assert (tmp_path / "val_batch0_labels.jpg").is_file() and (tmp_path / "val_batch0_pred.jpg").is_file()
    labels_px = targets.copy()
    labels_px[:, 2:] *= (W, H, W, H)
    cases = {"val_batch0_labels.jpg": (_boxes_only(im, labels_px, tmp_path, "l.jpg"), [(0, 1), (1, 2)]),
             "val_batch0_pred.jpg": (_boxes_only(im, output_to_target([pred[:, :6]], 15), tmp_path, "p.jpg"),
                                     [(0, 1), (1, 2)])}
    for name, (plain, tinted) in cases.items():
        with_masks = drawn[name].astype(np.int16)
        assert with_masks.shape == plain.shape == (H, W, 3)
        differs = np.abs(with_masks - plain).max(-1) > 0
        inside = masks[[k for k, _ in tinted]].any(0)
        assert differs.any() and not (differs & ~inside).any(), name  # changed only where a drawn mask is
        for k, cls in tinted:  # the middle of each mask: 40 % picture + 60 % class colour (RGB)
            ys, xs = np.nonzero(masks[k])
            y, x = int(ys.mean()), int(xs.mean())
            assert differs[y, x], (name, k)
            np.testing.assert_allclose(with_masks[y, x], _tinted(cls), atol=1.5, err_msg=name)
        assert not differs[masks[2] > 0].any(), name  # square 2 is only a 0.1-confidence prediction: no tint


def test_pred_masks_kept_only_for_the_plotted_batches(tmp_path):
    """The predicted masks are kept for the first three batches (val_batch0-2), 15 per picture at most, and none
    once plots are off."""
    masks, targets, protos, pred, im = _batch()
    many = np.repeat(pred[:1], 20, 0)
    ev = SegmentationEvaluator(3, NAMES, overlap=False, plots=True, save_dir=tmp_path)
    ev.draw = lambda *a, **k: None
    shapes = [((H, W), ((1.0, 1.0), (0.0, 0.0)))]
    for b in range(4):
        ev.update([_t(many)], _t(protos), _t(targets), _t(masks[:2]), shapes, (H, W))
        kept = ev.pred_masks_for_plot
        assert [m.shape for m in kept] == ([(15, H, W)] if b < 3 else []), b
    quiet = SegmentationEvaluator(3, NAMES, overlap=False, plots=False)
    quiet.update([_t(many)], _t(protos), _t(targets), _t(masks[:2]), shapes, (H, W))
    assert quiet.pred_masks_for_plot == []


def test_train_batch_tint_and_skips_unconfident_predictions(tmp_path):
    """plot_images_and_masks (train_batch*.jpg) tints labels always and predictions over 0.25 confidence only."""
    masks, targets, _, pred, im = _batch()
    preds = output_to_target([pred[:, :6]], 15)
    out = plot_images_and_masks(im, preds, ["p.jpg"], tmp_path / "t.jpg", masks, NAMES, overlap=False)
    plain = plot_images(im, preds, ["p.jpg"], tmp_path / "u.jpg", NAMES)
    differs = np.abs(out.astype(np.int16) - plain).max(-1) > 0
    assert differs[masks[0] > 0].any() and not differs[masks[2] > 0].any()
    assert (tmp_path / "t.jpg").is_file()


def test_seg_results_png_marks_the_best_epoch(tmp_path):
    """A segment/train.py results.csv gives the official 16 panels, each titled with its value at the best epoch by
    the box + mask fitness (epoch 1 here, though epoch 2 has the better box mAPs)."""
    from utils.plots import plot_results
    from tests.test_segment.test_segment_train import OFFICIAL_KEYS
    rows = np.zeros((3, 20))
    rows[:, 0] = range(3)
    rows[:, 1] = [0.3, 0.2, 0.1]  # train/box_loss
    rows[:, [7, 8, 11, 12]] = [[0.1, 0.1, 0.1, 0.1], [0.2, 0.2, 0.6, 0.5], [0.3, 0.3, 0.1, 0.1]]
    (tmp_path / "results.csv").write_text(",".join(["epoch", *OFFICIAL_KEYS]) + "\n" +
                                          "\n".join(",".join(f"{v:g}" for v in r) for r in rows) + "\n")
    titles = plot_results(tmp_path / "results.csv")
    assert (tmp_path / "results.png").is_file() and len(titles) == 16
    assert titles[0] == "train/box_loss\n0.2" and titles[-1] == "metrics/mAP_0.5:0.95(M)\n0.5"


def test_plot_evolve_panels_each_hyperparameter(tmp_path):
    """evolve.png: the best row by the given fitness; its hyperparameters returned (the columns after the results)."""
    from utils.plots import plot_evolve
    keys = [f"r{i}" for i in range(12)] + ["lr0", "momentum"]
    rows = np.array([[0.1] * 12 + [0.01, 0.9], [0.5] * 12 + [0.02, 0.8], [0.2] * 12 + [0.03, 0.7]])
    (tmp_path / "evolve.csv").write_text(",".join(keys) + "\n" + "\n".join(",".join(map(str, r)) for r in rows))
    best = plot_evolve(tmp_path / "evolve.csv", lambda x: x[:, 0], n_results=12)
    assert best == {"lr0": 0.02, "momentum": 0.8} and (tmp_path / "evolve.png").is_file()
    assert plot_evolve(tmp_path / "evolve.csv", lambda x: -x[:, 0], n_results=12)["lr0"] == 0.01


def test_trainer_validation_draws_val_batches_with_masks(shared_dir, tmp_path):
    """The trainer's validation (SEGMENT.validate on the run's overlap loader) hands the loader's masks and the
    predicted ones to val_batch0_labels.jpg / val_batch0_pred.jpg: the labels mosaic differs from the boxes-only one,
    in the masks' colours."""
    from models.experimental import attempt_load
    from tests.helpers.seg_data import make_tiny_seg
    from utils.dataset_config import check_dataset
    from utils.segment.dataset import create_seg_dataloader
    from utils.tasks.segment import SEGMENT

    data = check_dataset(str(make_tiny_seg(shared_dir, tmp_path / "seg")))
    loader = create_seg_dataloader(data["val"], 96, 4, 32, rect=True, pad=0.5, workers=0, overlap_mask=True,
                                   mask_downsample_ratio=4)[0]
    model = attempt_load(shared_dir / "weights" / "yolov5n-seg-coco128.pt", "cpu", fuse=True,
                         build_model=SEGMENT.build_model)
    calls = {}

    class Capture:  # the run's PlotJobs: keeps what it is asked to draw
        def submit(self, what, fn, *args, **kwargs):
            calls[what] = (fn, args)

        def wait(self):
            pass

    results, _, _ = SEGMENT.validate(model, loader, data, save_dir=tmp_path, plots=True, plot_jobs=Capture())
    assert len(results) == 12
    fn, (im, labels, paths, f, masks, names, overlap) = calls["val_batch0_labels.jpg"]
    assert overlap is True and masks.shape[0] == im.shape[0] and masks.max() >= 1
    plain = plot_images(im, labels, paths, tmp_path / "plain.jpg", names)
    assert (np.abs(fn(im, labels, paths, f, masks, names, overlap).astype(np.int16) - plain).max(-1) > 0).mean() > 0.05
    _, (_, preds, _, _, pred_masks, _, pred_overlap) = calls["val_batch0_pred.jpg"]
    assert pred_overlap is False and preds.shape[1] == 7 and len(pred_masks) == len(preds) > 0
