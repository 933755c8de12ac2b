"""The official segmentation import paths (utils/segment/{general,dataloaders,metrics,augmentations,plots}.py) that
users' scripts copied from official segment/*.py use: the names exist, take the official arguments and give the
official results. Masks are checked against the official formulas written here with this backend's own ops."""
import ast
import importlib
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from utils import backend
from utils.backend import torch

ROOT = Path(__file__).resolve().parents[2]
FACADES = ("utils.segment.general", "utils.segment.dataloaders", "utils.segment.metrics",
           "utils.segment.augmentations")

# official utils/segment/metrics.py's column names, in order (data, written out: the test fails if one moves)
OFFICIAL_KEYS = ["train/box_loss", "train/seg_loss", "train/obj_loss", "train/cls_loss",
                 "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP_0.5(B)", "metrics/mAP_0.5:0.95(B)",
                 "metrics/precision(M)", "metrics/recall(M)", "metrics/mAP_0.5(M)", "metrics/mAP_0.5:0.95(M)",
                 "val/box_loss", "val/seg_loss", "val/obj_loss", "val/cls_loss", "x/lr0", "x/lr1", "x/lr2"]
OFFICIAL_BEST_KEYS = ["best/epoch", "best/precision(B)", "best/recall(B)", "best/mAP_0.5(B)", "best/mAP_0.5:0.95(B)",
                      "best/precision(M)", "best/recall(M)", "best/mAP_0.5(M)", "best/mAP_0.5:0.95(M)"]


# ------------------------------------------------------------------------------------------------ general.py
def _case():
    """Protos (2, 8, 12), coefficients (3, 2) and boxes (3, 4) in pixels of a (32, 48) input: prototype 0 is +4 on
    the left half and -4 on the right, prototype 1 the opposite."""
    protos = np.zeros((2, 8, 12), np.float32)
    protos[0, :, :6], protos[0, :, 6:] = 4, -4
    protos[1] = -protos[0]
    coefs = np.array([[1, 0], [0, 1], [0.5, 0.5]], np.float32)
    boxes = np.array([[0, 0, 48, 32], [8, 4, 40, 28], [4, 4, 44, 28]], np.float32)
    return protos, coefs, boxes


def _t(a):
    return backend.from_numpy(np.asarray(a))


def test_process_mask_is_the_sigmoid_of_the_coefficients_cropped_to_the_box():
    from utils.segment.general import process_mask
    protos, coefs, boxes = _case()
    out = process_mask(_t(protos), _t(coefs), _t(boxes), (32, 48))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and tuple(out.shape) == (3, 8, 12)
    got = backend.to_numpy(out)
    expected = np.zeros((3, 8, 12), np.float32)
    expected[0, :, :6] = 1                 # left half on, whole-image box
    expected[1, 1:7, 6:10] = 1             # right half on, box (8, 4, 40, 28) / 4 = cols 2..9, rows 1..6
    # mask 2: sigmoid(0) = 0.5 everywhere, and 0.5 is not > 0.5: all off, as official
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(process_mask(protos, coefs, boxes, (32, 48)), expected)  # numpy in, numpy out


def _official_soft_masks(protos, coefs):
    c, mh, mw = protos.shape
    return (coefs @ protos.float().view(c, -1)).sigmoid().view(-1, mh, mw)


def _official_crop(masks, boxes):
    n, h, w = masks.shape
    x1, y1, x2, y2 = (boxes[:, k].view(n, 1, 1) for k in range(4))
    cols = torch.arange(w, dtype=boxes.dtype).view(1, 1, w)
    rows = torch.arange(h, dtype=boxes.dtype).view(1, h, 1)
    return masks * ((cols >= x1) * (cols < x2) * (rows >= y1) * (rows < y2))


def _bilinear(masks, shape):
    return torch.nn.functional.interpolate(masks[None], size=tuple(shape), mode="bilinear", align_corners=False)[0]


def test_process_mask_upsampled_equals_the_official_formula():
    from utils.segment.general import process_mask
    rng = np.random.default_rng(1)
    protos, coefs = _t(rng.normal(size=(4, 10, 14)).astype(np.float32)), _t(rng.normal(size=(5, 4)).astype(np.float32))
    boxes = _t(np.array([[2, 3, 30, 25], [10, 0, 56, 40], [0, 0, 56, 40], [20.5, 5.5, 40.2, 33.7], [1, 1, 5, 5]],
                        np.float32))
    shape = (40, 56)
    scaled = boxes.clone()
    scaled[:, [0, 2]] *= 14 / 56
    scaled[:, [1, 3]] *= 10 / 40
    expected = (_bilinear(_official_crop(_official_soft_masks(protos, coefs), scaled), shape) > 0.5).float()
    out = process_mask(protos, coefs, boxes, shape, upsample=True)
    assert tuple(out.shape) == (5, 40, 56) and out.device == protos.device
    np.testing.assert_array_equal(backend.to_numpy(out), backend.to_numpy(expected))


def test_process_mask_native_equals_the_official_formula():
    from utils.segment.general import process_mask_native
    rng = np.random.default_rng(2)
    protos, coefs = _t(rng.normal(size=(4, 16, 16)).astype(np.float32)), _t(rng.normal(size=(6, 4)).astype(np.float32))
    boxes = _t(rng.uniform(0, 40, (6, 2)).repeat(2, 1).astype(np.float32) + np.array([0, 0, 15, 10], np.float32))
    shape = (36, 48)  # a letterboxed input: the prototypes carry 2 rows of padding above and below
    gain = min(16 / 36, 16 / 48)
    padw, padh = (16 - 48 * gain) / 2, (16 - 36 * gain) / 2
    soft = _official_soft_masks(protos, coefs)[:, int(padh):int(16 - padh), int(padw):int(16 - padw)]
    expected = (_official_crop(_bilinear(soft, shape), boxes) > 0.5).float()
    out = process_mask_native(protos, coefs, boxes, shape)
    assert out.dtype == torch.float32 and tuple(out.shape) == (6, 36, 48)
    np.testing.assert_array_equal(backend.to_numpy(out), backend.to_numpy(expected))


def test_crop_mask_keeps_the_tensor_and_its_dtype():
    from utils.segment.general import crop_mask
    masks = _t(np.ones((2, 4, 5), np.float32))
    out = crop_mask(masks, _t(np.array([[1, 1, 3, 4], [0, 0, 5, 1]], np.float32)))
    assert isinstance(out, torch.Tensor) and out.dtype == masks.dtype
    np.testing.assert_array_equal(backend.to_numpy(out).sum((1, 2)), [2 * 3, 5 * 1])


def test_scale_image_cuts_the_padding_and_resizes_to_the_original():
    from utils.segment.general import scale_image
    # input (64, 96) letterboxed from (100, 160): gain 0.6, 2 rows of padding above and below
    m = np.zeros((64, 96, 2), np.uint8)
    m[2:62, :, 0] = 1   # the picture's area: all of the original
    m[:2, :, 1] = 1     # padding only: nothing of the original
    out = scale_image((64, 96), m, (100, 160, 3))
    assert out.shape == (100, 160, 2) and out.dtype == np.uint8
    assert out[:, :, 0].all() and not out[:, :, 1].any()
    assert scale_image((64, 96), m[:, :, 0], (100, 160, 3)).shape == (100, 160, 1)
    with pytest.raises(ValueError, match="should be 2 or 3"):
        scale_image((64, 96), np.zeros(5, np.uint8), (100, 160, 3))


def test_masks2segments_and_scale_segments_are_offered():
    from utils.segment.general import masks2segments, scale_segments
    m = np.zeros((1, 20, 20), np.float32)
    m[0, 5:15, 4:12] = 1
    (seg,) = masks2segments(_t(m))
    assert seg.dtype == np.float32 and seg.min(0).tolist() == [4, 5] and seg.max(0).tolist() == [11, 14]
    np.testing.assert_allclose(scale_segments((20, 20), seg, (40, 40)), seg * 2)


# ------------------------------------------------------------------------------------------------ metrics.py
def test_keys_are_the_official_columns_and_the_trainers():
    from utils.segment.metrics import BEST_KEYS, KEYS
    from utils.tasks.segment import segment_task
    assert KEYS == OFFICIAL_KEYS and BEST_KEYS == OFFICIAL_BEST_KEYS
    assert segment_task().results_keys() == KEYS  # results.csv's columns are the ones users read by these names


def test_fitness_weighs_box_and_mask_map_as_official():
    from utils.segment.metrics import fitness
    from utils.tasks.segment import seg_fitness
    np.testing.assert_allclose(fitness(np.eye(8)), [0, 0, 0.1, 0.9, 0, 0, 0.1, 0.9])
    rows = np.random.default_rng(0).random((5, 12))
    np.testing.assert_allclose(fitness(rows), seg_fitness(rows))


def test_metrics_update_and_mean_results_round_trip():
    from utils.segment.metrics import Metric, Metrics, ap_per_class_box_and_mask
    assert Metric().mean_results() == (0.0, 0.0, 0.0, 0.0)
    # three labels (classes 0, 0, 1), three predictions of those classes: every box right, every mask wrong
    conf, pred_cls, target_cls = np.array([0.9, 0.8, 0.7]), np.array([0, 0, 1]), np.array([0, 0, 1])
    res = ap_per_class_box_and_mask(np.zeros((3, 10), bool), np.ones((3, 10), bool), conf, pred_cls, target_cls)
    assert list(res) == ["boxes", "masks"] and list(res["boxes"]) == ["p", "r", "ap", "f1", "ap_class"]
    m = Metrics()
    m.update(res)
    mp, mr, map50, map_, *mask = m.mean_results()
    assert (mp, mr) == (1, 1) and map50 > 0.99 and map_ > 0.99 and mask == [0, 0, 0, 0]
    assert list(m.ap_class_index) == [0, 1]
    assert len(m.class_result(1)) == 8 and m.class_result(1)[4:] == (0, 0, 0, 0)
    maps = m.get_maps(3)  # class 2 has no labels: the overall box + mask mAP50-95
    np.testing.assert_allclose(maps, [m.metric_box.ap[0], m.metric_box.ap[1], m.metric_box.map])


# ------------------------------------------------------------------------------------------------ dataloaders.py
@pytest.fixture(scope="module")
def four_image_yaml(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("seg4")
    src = shared_dir / "data" / "coco128-seg"
    stems = sorted(p.stem for p in (src / "images" / "train2017").glob("*.jpg"))[:4]
    for sub, suffix in (("images", ".jpg"), ("labels", ".txt")):
        (d / sub).mkdir()
        for s in stems:
            shutil.copy(src / sub / "train2017" / f"{s}{suffix}", d / sub / f"{s}{suffix}")
    y = d / "seg4.yaml"
    y.write_text(f"path: {d}\ntrain: images\nval: images\nnames:\n" + "".join(f"  {i}: c{i}\n" for i in range(80)))
    return y


@pytest.mark.parametrize("overlap", [True, False])
def test_create_dataloader_gives_batches_with_masks(four_image_yaml, overlap):
    from utils.general import check_dataset
    from utils.segment.dataloaders import LoadImagesAndLabelsAndMasks, create_dataloader
    train = check_dataset(str(four_image_yaml))["train"]
    loader, dataset = create_dataloader(train, 160, 2, 32, False, None, False, False, 0.0, False, -1, 0,
                                        mask_downsample_ratio=4, overlap_mask=overlap)
    assert isinstance(dataset, LoadImagesAndLabelsAndMasks) and len(dataset) == 4
    imgs, targets, paths, shapes, masks = next(iter(loader))
    assert tuple(imgs.shape) == (2, 3, 160, 160) and imgs.dtype == torch.uint8 and len(paths) == 2
    assert targets.shape[1] == 6 and len(targets)
    m = backend.to_numpy(masks)
    assert m.shape == ((2, 40, 40) if overlap else (len(targets), 40, 40)) and m.dtype == np.uint8
    if overlap:  # pixel value k + 1 marks the picture's k-th target
        assert m.max() == max(int((backend.to_numpy(targets)[:, 0] == i).sum()) for i in range(2))
    else:
        assert set(np.unique(m)) <= {0, 1} and (m.reshape(len(m), -1).max(1) == 1).mean() > 0.9


def test_dataset_takes_the_official_arguments(four_image_yaml):
    from utils.segment.dataloaders import LoadImagesAndLabelsAndMasks
    images = four_image_yaml.parent / "images"
    # the official positional order: ..., min_items, prefix, downsample_ratio, overlap, rank, seed
    ds = LoadImagesAndLabelsAndMasks(str(images), 160, 4, False, None, False, False, False, False, 32, 0.0, 0, "",
                                     2, True, -1, 0)
    im, labels, path, shapes, masks = ds[0]
    assert masks.shape == (1, 80, 80) and ds.downsample_ratio == 2 and ds.overlap
    assert LoadImagesAndLabelsAndMasks.collate_fn([ds[0], ds[1]])[4].shape[0] == 2


# ------------------------------------------------------------------------------------------------ augmentations.py
def _squares():
    targets = np.array([[0, 10, 10, 50, 40], [3, 30, 20, 90, 70]], float)
    segments = [np.array([[10, 10], [50, 10], [50, 40], [10, 40]], float),
                np.array([[30, 20], [90, 20], [90, 70], [30, 70]], float)]
    return targets, segments


def test_random_perspective_with_no_warp_keeps_everything():
    from utils.segment.augmentations import random_perspective
    im = np.random.default_rng(0).integers(0, 255, (80, 100, 3), dtype=np.uint8)
    targets, segments = _squares()
    out, t, s = random_perspective(im, targets.copy(), segments, 0, 0, 0, 0, 0)
    np.testing.assert_array_equal(out, im)
    np.testing.assert_allclose(t, targets)
    assert isinstance(s, np.ndarray) and s.shape == (2, 1000, 2)
    np.testing.assert_allclose(np.c_[s.min(1), s.max(1)], targets[:, 1:])
    assert random_perspective(im, np.zeros((0, 5)), [])[2] == []


def test_random_perspective_boxes_are_their_warped_polygons_boxes():
    from utils.segment.augmentations import random_perspective
    im = np.zeros((80, 100, 3), np.uint8)
    targets, segments = _squares()
    random.seed(4)
    out, t, s = random_perspective(im, targets.copy(), segments, degrees=20, translate=0.1, scale=0.3, shear=5,
                                   perspective=0.0005, border=(-10, -10))
    assert out.shape == (60, 80, 3) and len(t) == len(s) >= 1
    for box, poly in zip(t[:, 1:], s):
        inside = poly[(poly[:, 0] >= 0) & (poly[:, 0] <= 80) & (poly[:, 1] >= 0) & (poly[:, 1] <= 60)]
        np.testing.assert_allclose(box, [*inside.min(0), *inside.max(0)])


def test_mixup_joins_images_labels_and_polygons():
    from utils.segment.augmentations import mixup
    im, im2 = np.full((8, 8, 3), 200, np.uint8), np.full((8, 8, 3), 100, np.uint8)
    lb, lb2 = np.ones((2, 5)), np.zeros((1, 5))
    s, s2 = np.ones((2, 1000, 2)), np.zeros((1, 1000, 2))
    np.random.seed(0)
    out, labels, segs = mixup(im, lb, s, im2, lb2, s2)
    assert 100 < out[0, 0, 0] < 200 and labels.shape == (3, 5) and segs.shape == (3, 1000, 2)
    assert segs[:2].all() and not segs[2].any()
    ragged = mixup(im, lb, [np.ones((4, 2)), np.ones((5, 2))], im2, lb2, [np.ones((3, 2))])[2]
    assert [len(x) for x in ragged] == [4, 5, 3]


# ------------------------------------------------------------------------------------------------ plots.py
def test_plot_results_with_masks_writes_results_png(tmp_path):
    from utils.segment.plots import plot_results_with_masks
    rows = np.random.default_rng(0).random((4, len(OFFICIAL_KEYS)))
    lines = [",".join(f"{k:>20s}" for k in ["epoch", *OFFICIAL_KEYS])]
    lines += [",".join(f"{v:>20.5g}" for v in [e, *row]) for e, row in enumerate(rows)]
    (tmp_path / "results.csv").write_text("\n".join(lines) + "\n")
    titles = plot_results_with_masks(file=str(tmp_path / "results.csv"))
    png = tmp_path / "results.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sum(bool(t) for t in titles) == 16 and any(t.startswith("metrics/mAP_0.5:0.95(M)") for t in titles)


def test_plot_images_and_masks_takes_the_official_call(tmp_path):
    import cv2
    from utils.segment.plots import plot_images_and_masks
    images = np.full((2, 3, 32, 32), 128, np.uint8)
    targets = np.array([[0, 1, 0.5, 0.5, 0.5, 0.5], [1, 2, 0.3, 0.3, 0.2, 0.2]], np.float32)
    masks = np.zeros((2, 32, 32), np.uint8)
    masks[0, 8:24, 8:24] = 1
    masks[1, 4:12, 4:12] = 1  # per-instance layout (no value over 1), told apart as official tells it
    paths = ["a.jpg", "b.jpg"]
    plot_images_and_masks(_t(images), _t(targets), _t(masks), paths, tmp_path / "official.jpg")  # official order
    plot_images_and_masks(images, targets, paths, tmp_path / "ours.jpg", masks, overlap=False)
    official, ours = cv2.imread(str(tmp_path / "official.jpg")), cv2.imread(str(tmp_path / "ours.jpg"))
    plot_images_and_masks(images, targets, paths, tmp_path / "plain.jpg", None)
    assert official is not None and np.array_equal(official, ours)
    assert not np.array_equal(ours, cv2.imread(str(tmp_path / "plain.jpg")))  # the masks were tinted in


# ------------------------------------------------------------------------------------------------ the facades
@pytest.mark.parametrize("name", FACADES)
def test_facade_docstring_names_what_it_offers(name):
    mod = importlib.import_module(name)
    missing = [n for n in mod.__all__ if n not in mod.__doc__]
    assert not missing, f"{name}'s docstring does not name {missing}"
    assert all(hasattr(mod, n) for n in mod.__all__)


def test_no_project_module_imports_the_segment_facades():
    files = [p for d in ("models", "utils", "segment", "classify") for p in (ROOT / d).rglob("*.py")]
    files += list(ROOT.glob("*.py"))
    offenders = []
    for p in files:
        if ".".join(p.relative_to(ROOT).with_suffix("").parts) in FACADES:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] + [f"{node.module}.{a.name}" for a in node.names] \
                if isinstance(node, ast.ImportFrom) and node.module else []
            offenders += [f"{p.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n in FACADES]
    assert not offenders, offenders
