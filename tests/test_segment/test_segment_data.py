"""The polygon dataset's training path: mosaic, random perspective, mixup, copy-paste, HSV and flips carry the
polygons, so each instance's mask still lies on its label box."""
import random
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
STEMS = ("000000000009", "000000000025", "000000000030", "000000000034")


@pytest.fixture(scope="module")
def four_images(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("seg4aug")
    (d / "images").mkdir()
    (d / "labels").mkdir()
    src = shared_dir / "data" / "coco128-seg"
    for s in STEMS:
        (d / "images" / f"{s}.jpg").symlink_to(src / "images" / "train2017" / f"{s}.jpg")
        (d / "labels" / f"{s}.txt").symlink_to(src / "labels" / "train2017" / f"{s}.txt")
    return d / "images"


def _hyp(root_dir, **kw):
    hyp = yaml.safe_load((root_dir / "data" / "hyps" / "hyp.scratch-low.yaml").read_text())
    hyp.update(kw)
    return hyp


def _box_iou(a, b):
    inter = np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None).prod()
    return inter / ((a[2:] - a[:2]).prod() + (b[2:] - b[:2]).prod() - inter)


@pytest.mark.parametrize("kind", ["mosaic", "letterbox"])
def test_augmented_masks_lie_on_their_label_boxes(four_images, root_dir, kind):
    from utils.segment.dataset import LoadImagesAndSegments
    hyp = _hyp(root_dir, copy_paste=0.5, mixup=0.5, degrees=10, shear=5, perspective=0.0005, flipud=0.5,
               mosaic=1.0 if kind == "mosaic" else 0.0)
    random.seed(0)
    np.random.seed(0)
    ds = LoadImagesAndSegments(str(four_images), 320, 4, augment=True, hyp=hyp, overlap=False)
    ious, flips_seen = [], 0
    for k in range(12):
        im, lb, _, shapes, masks = ds[k % 4]
        h, w = im.shape[1:]
        assert masks.shape == (len(lb), h, w) and (shapes is None) == (kind == "mosaic")
        for row, m in zip(lb, masks):
            if not m.any():
                continue
            ys, xs = np.nonzero(m)
            x, y, bw, bh = row[2:] * [w, h, w, h]
            ious.append(_box_iou(np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float),
                                 np.array([x - bw / 2, y - bh / 2, x + bw / 2, y + bh / 2])))
    assert len(ious) > 20
    assert np.median(ious) > 0.9 and np.percentile(ious, 5) > 0.7, np.percentile(ious, [0, 5, 50])


def test_augmented_overlap_masks_number_the_instances(four_images, root_dir):
    from utils.segment.dataset import LoadImagesAndSegments
    random.seed(1)
    np.random.seed(1)
    ds = LoadImagesAndSegments(str(four_images), 320, 4, augment=True, hyp=_hyp(root_dir, copy_paste=0.5),
                               overlap=True, downsample_ratio=4)
    for k in range(4):
        im, lb, _, _, masks = ds[k]
        assert masks.shape == (1, 80, 80) and masks.max() <= len(lb)
        assert len(set(np.unique(masks)) - {0}) >= min(len(lb), 1)


def test_shapes_generator_polygons_match_its_boxes(tmp_path):
    """make_shapes.py --segments: the same images as the detection set, each label the shape's outline, whose
    extent is the detection label's box (circles: within their 32-gon's sag)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    det = gen.make_shapes(tmp_path / "det", n_train=6, n_val=0, size=128, seed=3)
    seg = gen.make_shapes(tmp_path / "seg", n_train=6, n_val=0, size=128, seed=3, segments=True)
    for f in sorted((det / "labels" / "train").glob("*.txt")):
        assert (det / "images" / "train" / f"{f.stem}.jpg").read_bytes() == \
            (seg / "images" / "train" / f"{f.stem}.jpg").read_bytes()
        boxes = [list(map(float, ln.split())) for ln in f.read_text().splitlines()]
        polys = [list(map(float, ln.split())) for ln in (seg / "labels" / "train" / f.name).read_text().splitlines()]
        assert len(boxes) == len(polys) > 0
        for b, p in zip(boxes, polys):
            xy = np.array(p[1:]).reshape(-1, 2)
            assert p[0] == b[0] and len(xy) >= 3 and ((xy >= 0) & (xy <= 1)).all()
            (x1, y1), (x2, y2) = xy.min(0), xy.max(0)
            tol = 0.01 if b[0] == 0 else 1e-5  # class 0 is the circle
            np.testing.assert_allclose([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], b[1:], atol=tol)
