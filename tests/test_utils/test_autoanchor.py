"""AutoAnchor equals the official one: same k-means start, same genetic evolution, same random streams, so with the
same labels and seeds the anchors are the official anchors.

Reference figures: computed once with the official code (ultralytics/yolov5 5081342f in its own venv: torch 2.13,
numpy 2.4.6, scipy 1.17.1) by a script that builds the dataset object below (`_coco128`, `_synthetic`), seeds
`random.seed(s); np.random.seed(s)` and calls the official `utils.autoanchor.kmean_anchors(ds, n, img_size, thr=4.0,
gen=1000, verbose=False)`, or, for CHECK_*, builds the official `Model` from models/yolov5n.yaml with `anchors: 3`
(placeholder anchors), seeds 0 and calls `check_anchors(ds, model, thr=4.0, imgsz=320)`. The numbers are the
float32 results printed as Python floats.
"""
import random
import types

import numpy as np
import pytest

from utils import backend

KMEAN_COCO128_640_9 = [
    17.47197723388672, 19.89436912536621, 37.03388977050781, 36.49946975708008, 73.00635528564453, 68.57044982910156,
    105.47447967529297, 140.66818237304688, 140.21726989746094, 321.8350524902344, 260.3337707519531,
    191.86724853515625, 423.247802734375, 242.89395141601562, 370.666748046875, 390.3462219238281, 620.9509887695312,
    407.21282958984375]
KMEAN_COCO128_320_12 = [
    5.697596549987793, 5.436117172241211, 9.098377227783203, 14.288390159606934, 25.945608139038086, 14.92331600189209,
    29.23320960998535, 39.40418243408203, 63.428810119628906, 43.321006774902344, 48.78583908081055, 87.04607391357422,
    100.81938171386719, 100.6038589477539, 69.3131332397461, 158.46484375, 263.22650146484375, 76.35346984863281,
    170.7612762451172, 142.41636657714844, 160.1741943359375, 246.15394592285156, 308.7936706542969, 210.9175262451172]
KMEAN_SYNTHETIC_640_9 = [
    20.417285919189453, 23.936420440673828, 61.410125732421875, 26.096675872802734, 23.326522827148438,
    91.256103515625, 48.26189041137695, 62.41497802734375, 187.72654724121094, 32.04642105102539, 59.84173583984375,
    150.7120361328125, 134.85745239257812, 82.40319061279297, 319.46612548828125, 84.9945068359375, 122.35758209228516,
    566.379150390625]
# official check_anchors printed "1.20 anchors/target, 0.290 Best Possible Recall (BPR)" before replacing them
CHECK_BPR_BEFORE = 0.290
CHECK_COCO128_320_PIXELS = [
    5.434406757354736, 6.032996654510498, 10.796175956726074, 12.011242866516113, 25.51131820678711,
    28.173892974853516, 67.72125244140625, 44.453094482421875, 46.38294219970703, 80.54003143310547,
    70.16629791259766, 150.62696838378906, 131.02772521972656, 117.1065444946289, 177.7673797607422,
    207.3640594482422, 269.0012512207031, 176.42453002929688]


def _coco128(coco128_dir):
    """coco128's train labels and image sizes (w, h), images in file-name order; no label file = no boxes."""
    from PIL import Image
    shapes, labels = [], []
    for p in sorted((coco128_dir / "images" / "train2017").glob("*.jpg")):
        with Image.open(p) as im:
            shapes.append(im.size)
        lf = coco128_dir / "labels" / "train2017" / (p.stem + ".txt")
        rows = [list(map(float, line.split())) for line in lf.read_text().splitlines() if line.strip()] \
            if lf.exists() else []
        labels.append(np.array(rows, dtype=np.float32).reshape(-1, 5))
    return types.SimpleNamespace(shapes=np.array(shapes, dtype=np.float64), labels=labels)


def _synthetic():
    """40 square 640 px images with 6 log-normal boxes each (median 60 px)."""
    rng = np.random.RandomState(123)
    ds = types.SimpleNamespace(shapes=np.full((40, 2), 640.0), labels=[])
    for _ in range(40):
        wh = np.exp(rng.normal(np.log(60), 0.9, (6, 2))) / 640
        ds.labels.append(np.concatenate([np.zeros((6, 3)), wh.clip(0.004, 1)], 1).astype(np.float32))
    return ds


def _seed(s):
    random.seed(s)
    np.random.seed(s)


@pytest.fixture(scope="module")
def coco128(coco128_dir):
    ds = _coco128(coco128_dir)
    assert len(ds.labels) == 128 and sum(len(x) for x in ds.labels) == 929  # as REFERENCE.md counts them
    return ds


@pytest.mark.parametrize("img_size,n,expected", [(640, 9, KMEAN_COCO128_640_9), (320, 12, KMEAN_COCO128_320_12)])
def test_kmean_anchors_equal_official_on_coco128(coco128, img_size, n, expected):
    from utils.autoanchor import kmean_anchors
    _seed(0)
    k = kmean_anchors(coco128, n=n, img_size=img_size, thr=4.0, gen=1000, verbose=False)
    assert k.shape == (n, 2) and k.dtype == np.float32
    np.testing.assert_allclose(k.reshape(-1), expected, rtol=1e-5)


def test_kmean_anchors_equal_official_on_synthetic_boxes():
    from utils.autoanchor import kmean_anchors
    _seed(1)
    k = kmean_anchors(_synthetic(), n=9, img_size=640, thr=4.0, gen=1000, verbose=False)
    np.testing.assert_allclose(k.reshape(-1), KMEAN_SYNTHETIC_640_9, rtol=1e-5)


def test_evolution_improves_on_kmeans(coco128):
    """The genetic stage is not a no-op: zero generations give the bare (sorted) k-means anchors, which differ."""
    from utils.autoanchor import kmean_anchors
    _seed(0)
    k0 = kmean_anchors(coco128, n=9, img_size=640, gen=0, verbose=False)
    assert np.abs(k0.reshape(-1) - np.array(KMEAN_COCO128_640_9)).max() > 1.0


def test_check_anchors_replaces_placeholder_anchors_as_official(coco128, capfd):
    """yolov5n with `anchors: 3` (placeholders): BPR 0.290 <= 0.98, so AutoAnchor evolves new ones; the model's
    anchors (pixels = grid units x stride) equal the official result, in order of growing stride."""
    import logging
    from models.yolo import DetectionModel, load_model_yaml
    from utils.autoanchor import check_anchors
    cfg = load_model_yaml("yolov5n.yaml")
    cfg["anchors"] = 3
    model = DetectionModel(cfg)
    _seed(0)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("yolov5")
    log.addHandler(handler)
    try:
        bpr, replaced = check_anchors(coco128, model, thr=4.0, imgsz=320)
    finally:
        log.removeHandler(handler)
    text = "\n".join(r.getMessage() for r in records)
    assert f"{CHECK_BPR_BEFORE:.3f} Best Possible Recall (BPR)" in text and "poor fit" in text
    assert "Done ✅" in text and "best possible recall" in text
    assert replaced and bpr > 0.98
    det = model.model[-1]
    px = backend.to_numpy(det.anchors) * backend.to_numpy(det.stride).reshape(-1, 1, 1)
    np.testing.assert_allclose(px.reshape(-1), CHECK_COCO128_320_PIXELS, rtol=1e-5)


def test_check_anchors_orders_levels_in_pixels():
    """New anchors are assigned to levels small to large in pixels; in grid units the order may look reversed
    (here the P5 anchors, divided by 32, are smaller than the P3 ones divided by 8)."""
    from utils.autoanchor import _write_anchors, check_anchor_order
    det = types.SimpleNamespace(anchors=backend.torch.zeros(3, 1, 2), stride=backend.torch.tensor([8.0, 16.0, 32.0]))
    _write_anchors(det, [[[8, 8]], [[20, 20]], [[40, 40]]])
    check_anchor_order(det)  # pixels: already growing, left alone
    np.testing.assert_array_equal(backend.to_numpy(det.anchors)[:, 0, 0], [8, 20, 40])
    _write_anchors(det, [[[40, 40]], [[20, 20]], [[8, 8]]])
    check_anchor_order(det)
    np.testing.assert_array_equal(backend.to_numpy(det.anchors)[:, 0, 0], [8, 20, 40])


def test_kmeans_equals_scipy_to_the_bit():
    """utils.autoanchor._kmeans is scipy.cluster.vq.kmeans in numpy (the official call): the same random restarts
    from numpy's global state and the same float32 arithmetic, so the codebooks are equal bit for bit."""
    vq = pytest.importorskip("scipy.cluster.vq")
    from utils.autoanchor import _kmeans
    rng = np.random.RandomState(5)
    for _ in range(12):
        x = rng.lognormal(0, 1, (rng.randint(20, 1500), 2)).astype(np.float32)
        k, s = int(rng.randint(2, 13)), int(rng.randint(1000))
        np.random.seed(s)
        expected = vq.kmeans(x, k, iter=30)[0]
        np.random.seed(s)
        got = _kmeans(x, k, 30)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), (k, s)


def test_anchor_evolution_does_not_import_scipy():
    """scipy.cluster's import (0.3 s of a training run's start on 2 cores) stays off the AutoAnchor path."""
    from tests.helpers.process_helpers import fresh_python
    code = ("import sys, types, random, numpy as np\n"
            "from utils.autoanchor import kmean_anchors\n"
            "rng = np.random.RandomState(0)\n"
            "ds = types.SimpleNamespace(shapes=np.full((20, 2), 640.0), labels=[np.concatenate([np.zeros((5, 3)), "
            "rng.uniform(0.02, 0.5, (5, 2))], 1).astype(np.float32) for _ in range(20)])\n"
            "random.seed(0); np.random.seed(0)\n"
            "k = kmean_anchors(ds, n=9, img_size=640, gen=10, verbose=False)\n"
            "assert k.shape == (9, 2)\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.cluster')))\n")
    p = fresh_python(code)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout
