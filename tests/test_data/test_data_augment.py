"""Augmentations: labels survive every augmentation, the fast paths match ultralytics' formulation."""
import random

import cv2
import numpy as np
import pytest
import yaml

from benchmarks.classic_loader import ClassicLoadImagesAndLabels, augment_hsv_lut
from utils.augmentations import augment_hsv, box_candidates, letterbox, random_perspective, warp_into
from utils.dataloaders import LoadImagesAndLabels
from utils.general import ROOT

# one saturated colour per class: a filled box of class c is drawn in COLOURS[c] (BGR)
COLOURS = [(0, 0, 255), (0, 255, 0), (255, 0, 0), (0, 255, 255), (255, 0, 255), (255, 255, 0)]


def hyp(name="low", **kw):
    with open(ROOT / "data" / "hyps" / f"hyp.scratch-{name}.yaml") as f:
        h = yaml.safe_load(f)
    h.update(kw)
    return h


@pytest.fixture(scope="module")
def boxes_dataset(tmp_path_factory):
    """Images of various sizes with non-overlapping filled boxes; class = colour index."""
    root = tmp_path_factory.mktemp("boxes")
    rng = np.random.default_rng(0)
    (root / "images").mkdir()
    (root / "labels").mkdir()
    for i in range(10):
        h, w = int(rng.integers(90, 200)), int(rng.integers(90, 200))
        im = np.full((h, w, 3), 100, np.uint8)
        rows = []
        for c in range(3):  # three boxes in three horizontal bands: never overlapping
            bw, bh = int(rng.integers(15, w // 2)), int(rng.integers(12, h // 4))
            x1 = int(rng.integers(0, w - bw))
            y1 = int(rng.integers(c * h // 3, (c + 1) * h // 3 - bh))
            cls = int((i + c) % len(COLOURS))
            im[y1:y1 + bh, x1:x1 + bw] = COLOURS[cls]
            rows.append(f"{cls} {(x1 + bw / 2) / w:.6f} {(y1 + bh / 2) / h:.6f} {bw / w:.6f} {bh / h:.6f}\n")
        cv2.imwrite(str(root / "images" / f"{i}.png"), im)  # lossless: colours stay exact
        (root / "labels" / f"{i}.txt").write_text("".join(rows))
    return root


def rgb_fill_fraction(im_chw, box_xyxy, cls, shrink=2.0):
    """Fraction of the label box (shrunk by a few px against interpolated edges) filled with the class colour."""
    im = im_chw.transpose(1, 2, 0)  # RGB
    x1, y1, x2, y2 = box_xyxy
    x1, y1 = int(np.ceil(x1 + shrink)), int(np.ceil(y1 + shrink))
    x2, y2 = int(np.floor(x2 - shrink)), int(np.floor(y2 - shrink))
    if x2 <= x1 or y2 <= y1:
        return None  # too thin to judge
    patch = im[y1:y2, x1:x2].astype(int)
    target = np.array(COLOURS[cls][::-1])
    return (np.abs(patch - target).sum(-1) < 60).mean()


def check_item(item, imgsz, axis_aligned=True, check_fill=True):
    im, labels, _, _ = item
    assert im.shape == (3, imgsz, imgsz) and im.dtype == np.uint8
    assert labels.dtype == np.float32 and labels.shape[1] == 6
    assert np.isfinite(labels).all()
    xywh = labels[:, 2:]
    assert ((xywh >= 0) & (xywh <= 1)).all()
    x1, y1 = (xywh[:, 0] - xywh[:, 2] / 2) * imgsz, (xywh[:, 1] - xywh[:, 3] / 2) * imgsz
    x2, y2 = (xywh[:, 0] + xywh[:, 2] / 2) * imgsz, (xywh[:, 1] + xywh[:, 3] / 2) * imgsz
    assert (x1 >= -0.5).all() and (y1 >= -0.5).all() and (x2 <= imgsz + 0.5).all() and (y2 <= imgsz + 0.5).all()
    fills = []
    for (cls, *_), box in zip(labels[:, 1:], np.stack((x1, y1, x2, y2), 1)):
        f = rgb_fill_fraction(im, box, int(cls))
        if f is not None:
            fills.append(f)
    if fills and check_fill:
        if axis_aligned:  # the filled box covers its label box
            assert min(fills) > 0.9, fills
        else:  # rotated/sheared: the label is the box around the rotated box, so less of it is covered
            assert min(fills) > 0.15, fills
    if not axis_aligned and check_fill:  # ...but the label box is the tight box around the colour, where it is not clipped
        for (cls, *_), box in zip(labels[:, 1:], np.stack((x1, y1, x2, y2), 1)):
            if box.min() < 3 or box.max() > imgsz - 3:
                continue
            bx1, by1, bx2, by2 = (int(v) for v in (max(box[0] - 6, 0), max(box[1] - 6, 0), box[2] + 6, box[3] + 6))
            patch = im.transpose(1, 2, 0)[by1:by2, bx1:bx2].astype(int)
            ys, xs = np.nonzero(np.abs(patch - np.array(COLOURS[int(cls)][::-1])).sum(-1) < 60)
            if len(xs) < 10:
                continue  # another object of the same colour may share the area; nothing to judge
            mb = np.array([xs.min() + bx1, ys.min() + by1, xs.max() + 1 + bx1, ys.max() + 1 + by1])
            assert (np.abs(mb - box) < 4).all(), (mb, box)
    return len(labels)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("extra", [{}, {"fliplr": 0.5, "flipud": 0.5, "scale": 0.9},
                                   {"degrees": 20.0, "shear": 5.0}, {"perspective": 0.0005, "degrees": 5.0},
                                   {"mixup": 1.0}])
def test_labels_survive_augmentation(boxes_dataset, fused, extra):
    h = hyp(hsv_h=0.0, hsv_s=0.0, hsv_v=0.0, **extra)  # colours must stay exact to find the boxes
    imgsz = 160
    dataset = LoadImagesAndLabels if fused else ClassicLoadImagesAndLabels
    ds = dataset(str(boxes_dataset / "images"), img_size=imgsz, batch_size=4, augment=True, hyp=h)
    random.seed(1)
    np.random.seed(1)
    axis_aligned = not (extra.get("degrees") or extra.get("shear") or extra.get("perspective"))
    mix = bool(extra.get("mixup"))  # colours are blended 50/50 with another mosaic: only geometry is checked
    n = sum(check_item(ds[i % len(ds)], imgsz, axis_aligned, check_fill=not mix) for i in range(24))
    assert n > 24  # most boxes survive


def _same_draws(fast, ref, i):
    """Item i of the fused and the classic loader from the same seeds: the labels must be equal; the two images."""
    out = []
    for ds in (fast, ref):
        random.seed(i)
        np.random.seed(i)
        out.append(ds[i % len(ds)])
    (im_a, lb_a, *_), (im_b, lb_b, *_) = out
    np.testing.assert_allclose(lb_a, lb_b, atol=1e-4)
    return im_a, im_b


def test_fused_mosaic_matches_classic_path(boxes_dataset):
    """Same seeds -> same draws in the same order: labels equal, images nearly equal."""
    imgsz = 160
    kw = dict(img_size=imgsz, batch_size=4, augment=True, hyp=hyp())
    fast = LoadImagesAndLabels(str(boxes_dataset / "images"), **kw)
    ref = ClassicLoadImagesAndLabels(str(boxes_dataset / "images"), **kw)
    diffs = []
    for i in range(12):
        im_a, im_b = _same_draws(fast, ref, i)
        diffs.append(np.abs(im_a.astype(int) - im_b.astype(int)).mean())
    # these images are resized to the mosaic's scale: once here, twice (load, then warp) in the classic path, so the
    # interpolation differs a little (0.17-0.63 grey levels measured), and at the tiles' edges
    assert np.mean(diffs) < 1.0, diffs


def test_fused_mosaic_puts_pixels_where_the_labels_are(tmp_path):
    """Images already at the training size: both paths interpolate once, so the fused mosaic must give the classic
    path's pixels, not a shifted copy of them (a shortcut that placed tiles up to half a pixel off, with the labels
    at the exact place, trained every image slightly wrong). Shift by phase correlation, against the same draws."""
    imgsz, rng = 128, np.random.default_rng(1)
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    for i in range(6):  # smooth texture (a shift shows in every pixel) and one box each
        im = cv2.GaussianBlur(rng.integers(0, 255, (imgsz, imgsz, 3), dtype=np.uint8), (9, 9), 0)
        cv2.imwrite(str(tmp_path / "images" / f"{i}.png"), im)
        (tmp_path / "labels" / f"{i}.txt").write_text("0 0.5 0.5 0.4 0.3\n")
    kw = dict(img_size=imgsz, batch_size=4, augment=True, hyp=hyp(hsv_h=0.0, hsv_s=0.0, hsv_v=0.0))
    fast = LoadImagesAndLabels(str(tmp_path / "images"), **kw)
    ref = ClassicLoadImagesAndLabels(str(tmp_path / "images"), **kw)
    worst = 0.0
    for i in range(12):
        im_a, im_b = _same_draws(fast, ref, i)
        a, b = (x.astype(np.float64).mean(0) for x in (im_a, im_b))
        (dx, dy), _ = cv2.phaseCorrelate(a, b)
        # measured with OpenCV 5.0: at most 0.07 px and 0.08 grey levels (tile edges); with OpenCV 4.11 (the OneFlow
        # environment) up to 0.37 px and 0.22 (not traced yet: warp_into equals its warpAffine there too). The
        # half-pixel shortcut gave 0.1-0.56 px and 0.44-1.4 grey levels on these draws.
        worst = max(worst, abs(dx), abs(dy))
        assert np.abs(a - b).mean() < 0.3, i
    assert worst < 0.4, worst


def test_warp_into_equals_warpaffine():
    """Over the tile's own bounding box, the pixels of cv2.warpAffine over the whole output, in the same place."""
    rng = np.random.default_rng(0)
    src = cv2.GaussianBlur(rng.integers(0, 255, (120, 150, 3), dtype=np.uint8), (7, 7), 0)
    cases = [np.array([[a, 0, b], [0, a, d]]) for a, b, d in
             ((1.3, -20.4, 15.7), (0.6, 30.2, -10.1), (1.0, 5.0, 5.0), (0.77, -3.3, 40.45))]  # scale + translation
    cases.append(cv2.getRotationMatrix2D((60, 60), 30, 0.8))
    for A in cases:
        out = np.full((128, 128, 3), 114, np.uint8)
        assert warp_into(out, src, A)
        ref = cv2.warpAffine(src, A, (128, 128), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_TRANSPARENT,
                             dst=np.full_like(out, 114))
        assert np.abs(out.astype(int) - ref.astype(int)).max() <= 1, A  # fixed-point rounding at most
    left = np.full((128, 128, 3), 114, np.uint8)
    warp_into(left, src, np.array([[0.5, 0, 40.0], [0, 0.5, 0.0]]))
    assert (left[:, :40] == 114).all() and (left[60:] == 114).all()  # nothing drawn outside the placed image


def test_hsv_matches_ultralytics_lut():
    rng = np.random.default_rng(0)
    im = cv2.GaussianBlur(rng.integers(0, 255, (96, 96, 3), dtype=np.uint8), (3, 3), 0)
    im[:10] = (0, 0, 250)  # reds, where the hue wraps
    for seed in range(5):
        np.random.seed(seed)
        a = augment_hsv(im.copy(), 0.015, 0.7, 0.4)
        np.random.seed(seed)
        b = augment_hsv_lut(im.copy(), 0.015, 0.7, 0.4)
        d = np.abs(a.astype(int) - b.astype(int))
        assert d.mean() < 0.5 and np.percentile(d, 99.9) <= 6, (d.mean(), d.max())
        np.random.seed(seed)
        rgb = augment_hsv(im.copy(), 0.015, 0.7, 0.4, to_rgb=True)
        np.testing.assert_array_equal(rgb, a[..., ::-1])
    assert not np.array_equal(a, im)  # it did change the image


def test_letterbox_shapes_and_padding():
    im = np.zeros((480, 640, 3), np.uint8)
    out, ratio, (dw, dh) = letterbox(im, 320, auto=False)
    assert out.shape == (320, 320, 3) and ratio == (0.5, 0.5) and (dw, dh) == (0, 40)
    out, _, (dw, dh) = letterbox(im, 320, auto=True, stride=32)
    assert out.shape == (256, 320, 3) and dh == 8
    out, _, _ = letterbox(np.zeros((100, 50, 3), np.uint8), 640, scaleup=False, auto=False)
    assert out.shape == (640, 640, 3) and (out[:, :295] == 114).all()  # not upscaled, centred
    out, ratio, _ = letterbox(im, (320, 400), auto=False, scaleFill=True)
    assert out.shape == (320, 400, 3) and ratio == (400 / 640, 320 / 480)


def test_random_perspective_boxes_inside_and_candidates():
    random.seed(0)
    im = np.zeros((200, 200, 3), np.uint8)
    targets = np.array([[0, 10, 10, 60, 60], [1, 150, 150, 199, 199], [2, 0, 0, 3, 3]], dtype=np.float64)
    for _ in range(30):
        out, t = random_perspective(im, targets, degrees=30, translate=0.2, scale=0.5, shear=10, perspective=0.001)
        assert out.shape == im.shape
        assert np.isfinite(t).all()
        assert (t[:, 1:] >= 0).all() and (t[:, [1, 3]] <= 200).all() and (t[:, [2, 4]] <= 200).all()
        assert (t[:, 3] - t[:, 1] > 2).all() and (t[:, 4] - t[:, 2] > 2).all()
    keep = box_candidates(np.array([[0, 0, 10, 10], [0, 0, 10, 10]]).T.astype(float),
                          np.array([[0, 0, 10, 10], [0, 0, 1, 1]]).T.astype(float))
    assert keep.tolist() == [True, False]


def test_polygon_labels_fused_matches_classic(tmp_path):
    """With polygon labels, boxes come from the transformed polygons on both paths (as in ultralytics)."""
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    for i in range(4):
        im = np.full((120, 160, 3), 90, np.uint8)
        pts = np.array([[20 + 5 * i, 20], [120, 30], [100, 100], [30, 90]])
        cv2.fillPoly(im, [pts], COLOURS[i])
        cv2.imwrite(str(tmp_path / "images" / f"{i}.png"), im)
        row = " ".join(f"{x / 160:.5f} {y / 120:.5f}" for x, y in pts)
        (tmp_path / "labels" / f"{i}.txt").write_text(f"{i} {row}\n")
    kw = dict(img_size=128, batch_size=2, augment=True, hyp=hyp(degrees=15.0))
    fast = LoadImagesAndLabels(str(tmp_path / "images"), **kw)
    ref = ClassicLoadImagesAndLabels(str(tmp_path / "images"), **kw)
    assert all(len(s) == 1 for s in fast.segments)
    for i in range(6):
        out = []
        for ds in (fast, ref):
            random.seed(i)
            np.random.seed(i)
            out.append(ds[i % 4][1])
        np.testing.assert_allclose(out[0], out[1], atol=1e-4)


def test_mosaic9_rect_augment_and_copy_paste_paths(boxes_dataset, tmp_path):
    h = hyp("high", hsv_h=0.0, hsv_s=0.0, hsv_v=0.0)  # copy_paste 0.1, mixup 0.1
    ds = LoadImagesAndLabels(str(boxes_dataset / "images"), img_size=128, batch_size=4, augment=True, hyp=h)
    random.seed(0)
    np.random.seed(0)
    for i in range(6):
        im, labels = ds.load_mosaic9(i)
        assert im.shape == (128, 128, 3) and np.isfinite(labels).all()
        assert (labels[:, 1:] >= 0).all() and (labels[:, 1:] <= 128).all()
    # --rect with augmentation: letterboxed to the batch shape, random_perspective, no mosaic
    ds = LoadImagesAndLabels(str(boxes_dataset / "images"), img_size=128, batch_size=4, augment=True, hyp=h,
                             rect=True)
    for i in range(len(ds)):
        im, labels, _, shapes = ds[i]
        assert tuple(im.shape[1:]) == tuple(int(x) for x in ds.batch_shapes[ds.batch[i]]) and shapes is not None
        assert ((labels[:, 2:] >= 0) & (labels[:, 2:] <= 1)).all()
