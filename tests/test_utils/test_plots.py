"""Plot helpers write real images: mosaics with labels and predictions, label statistics, training curves, crops."""
import cv2
import numpy as np
import pandas as pd

from utils.backend import from_numpy
from utils.plots import Annotator, colors, output_to_target, plot_images, plot_labels, plot_results, save_one_box


def test_colors_and_annotator_draw_in_place_colour():
    # ultralytics.utils.plotting's palette (the official scripts draw through it): 042AFF, 0BDBEB, ... 20 colours
    assert colors(0) == (4, 42, 255) and colors(0, bgr=True) == (255, 42, 4) and colors(20) == colors(0)
    assert colors(1) == (11, 219, 235) and colors(19) == (162, 255, 11)
    im = np.zeros((100, 120, 3), np.uint8)
    a = Annotator(im, line_width=2)
    a.box_label([10, 30, 60, 80], "person 0.90", color=colors(0, True))
    out = a.result()
    assert tuple(out[55, 10]) == (255, 42, 4)  # left edge of the box in the box colour
    assert out[0:29, 10:60].any()  # label drawn above the box
    assert not out[90:, 100:].any()  # nothing elsewhere


def test_label_text_colour_and_a_label_past_the_right_edge_as_official():
    """As ultralytics' Annotator: dark text on the palette's light colours, white on its dark ones, the caller's
    colour on any other; a label wider than the room right of its box moves left to end at the image's edge."""
    def label_pixels(color, txt_color=(255, 255, 255), box=(10, 80, 60, 140), width=400):
        a = Annotator(np.zeros((150, width, 3), np.uint8), line_width=6)  # strokes 5 px wide: solid text pixels
        a.box_label(box, "person 0.90", color=color, txt_color=txt_color)
        return a.result()[:box[1] - 1]  # the rows above the box: the label only
    for color, text in [(colors(1, True), (104, 31, 17)), (colors(0, True), (255, 255, 255)),
                        ((128, 128, 128), (0, 0, 200))]:
        found = {tuple(int(v) for v in px) for px in label_pixels(color, txt_color=(0, 0, 200)).reshape(-1, 3)}
        assert text in found and color in found, (color, text)
    edge = label_pixels(colors(0, True), box=(340, 80, 390, 140))
    cols = np.flatnonzero(edge.any(axis=(0, 2)))
    assert cols.max() == 399 and cols.min() < 340  # within the image, starting left of the box


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


def test_crops_are_named_and_encoded_as_the_official_ones(tmp_path):
    """The official detect.py / segment/predict.py / AutoShape crop() write through ultralytics' save_one_box:
    x.jpg, x-2.jpg, x-3.jpg, ... and a PIL JPEG at quality 95 without chroma subsampling; same names, same bytes."""
    from PIL import Image
    im = np.random.default_rng(1).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    im[30:90, 40:120] = (20, 200, 60)  # a coloured block: chroma subsampling would blur its edges
    folder = tmp_path / "crops" / "person"
    crops = [save_one_box([40 + k, 30, 120, 90], im, file=folder / "x.jpg", BGR=True) for k in range(3)]
    assert sorted(p.name for p in folder.iterdir()) == ["x-2.jpg", "x-3.jpg", "x.jpg"]
    for crop, name in zip(crops, ["x.jpg", "x-2.jpg", "x-3.jpg"]):
        Image.fromarray(crop[..., ::-1]).save(tmp_path / "pil.jpg", quality=95, subsampling=0)
        assert (folder / name).read_bytes() == (tmp_path / "pil.jpg").read_bytes(), name
