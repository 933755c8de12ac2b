"""Plot helpers write real images: mosaics with labels and predictions, label statistics, training curves, crops."""
import cv2
import numpy as np
import pandas as pd

from utils.backend import from_numpy
from utils.plots import Annotator, colors, output_to_target, plot_images, plot_labels, plot_results, save_one_box


def test_colors_and_annotator_draw_in_place_colour():
    assert colors(0) == (255, 56, 56) and colors(0, bgr=True) == (56, 56, 255) and colors(20) == colors(0)
    im = np.zeros((100, 120, 3), np.uint8)
    a = Annotator(im, line_width=2)
    a.box_label([10, 30, 60, 80], "person 0.90", color=colors(0, True))
    out = a.result()
    assert tuple(out[55, 10]) == (56, 56, 255)  # left edge of the box in the box colour
    assert out[0:29, 10:60].any()  # label drawn above the box
    assert not out[90:, 100:].any()  # nothing elsewhere


def test_plot_images_labels_and_predictions(tmp_path):
    ims = np.full((3, 3, 64, 96), 90, np.uint8)
    labels = np.array([[0, 1, 0.5, 0.5, 0.5, 0.5], [2, 0, 0.2, 0.3, 0.2, 0.2]], np.float32)  # normalized xywh
    plot_images(from_numpy(ims), from_numpy(labels), ["a.jpg", "b.jpg", "c.jpg"], tmp_path / "l.jpg", {0: "x", 1: "y"})
    preds = [from_numpy(np.array([[10, 10, 40, 40, 0.9, 1]], np.float32)), from_numpy(np.zeros((0, 6), np.float32)),
             from_numpy(np.array([[5, 5, 20, 20, 0.1, 0]], np.float32))]
    t = output_to_target(preds)
    assert t.shape == (2, 7)
    np.testing.assert_allclose(t[0], [0, 1, 25, 25, 30, 30, 0.9], rtol=1e-6)  # [img, cls, xywh, conf]
    plot_images(ims, t, None, tmp_path / "p.jpg", ["x", "y"])
    m = cv2.imread(str(tmp_path / "l.jpg"))
    assert m.shape == (128, 192, 3)  # 2x2 grid of 64x96 tiles
    assert (m != 90).any(axis=2).sum() > 100  # boxes and names were drawn
    assert (tmp_path / "p.jpg").stat().st_size > 0


def test_plot_labels_and_results(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.concatenate([rng.integers(0, 3, (40, 1)), rng.random((40, 4)) * 0.5 + 0.1], 1)
    plot_labels(labels, ["a", "b", "c"], tmp_path)
    assert (tmp_path / "labels.jpg").stat().st_size > 0 and (tmp_path / "labels_correlogram.jpg").stat().st_size > 0
    cols = ["epoch", "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision", "metrics/recall",
            "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss", "val/obj_loss", "val/cls_loss", "x/lr0",
            "x/lr1", "x/lr2"]
    pd.DataFrame(rng.random((4, len(cols))), columns=[f"{c:>20s}" for c in cols]).to_csv(tmp_path / "results.csv",
                                                                                        index=False)
    plot_results(tmp_path / "results.csv")
    assert cv2.imread(str(tmp_path / "results.png")) is not None


def test_save_one_box_crops_with_gain_and_pad(tmp_path):
    im = np.zeros((100, 100, 3), np.uint8)
    im[40:60, 30:70] = 255
    crop = save_one_box([30, 40, 70, 60], im, file=tmp_path / "c" / "x.jpg", BGR=True)
    # w 40 * 1.02 + 10 = 50.8 around x 50: 24.6..75.4 -> int 24..75 (51 px); h 20 * 1.02 + 10 = 30.4 -> 34..65 (31 px)
    assert crop.shape == (31, 51, 3)
    assert (tmp_path / "c" / "x.jpg").exists()
