"""The polygon dataset's training path: mosaic, random perspective, mixup, copy-paste, HSV and flips carry the
polygons, so each instance's mask still lies on its label box."""
import random

import numpy as np
import pytest
import yaml

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
