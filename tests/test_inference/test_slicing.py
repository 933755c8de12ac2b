"""Sliced inference: the tile grid, the shift back to image pixels, the merge (NMS / greedy NMM, IoU / IoS) against
hand-computed cases, the batched predictor on a stand-in model, and the bad-input lines."""
import numpy as np
import pytest

from utils.errors import UserError
from utils.tiles import SliceSettings, match_values, merge_detections, shift_boxes, tile_grid


def _settings(**kw):
    return SliceSettings.of(kw.pop("size", 512), kw.pop("overlap", 0.2), **kw)


# ------------------------------------------------------------------------------------------------------------ grid
def test_grid_steps_by_size_minus_overlap_and_moves_the_last_tile_inside():
    """1000 px at 512, overlap int(0.2 * 512) = 102: starts 0, 410, then 820 would end at 1332 > 1000, so the last
    tile is moved back to end on the edge: 488-1000."""
    g = tile_grid(1000, 1000, _settings())
    spans = [(0, 512), (410, 922), (488, 1000)]
    assert g.tolist() == [[x1, y1, x2, y2] for y1, y2 in spans for x1, x2 in spans]  # row by row


def test_grid_rectangular_and_per_axis_overlap():
    g = tile_grid(300, 900, SliceSettings.of((256, 512), overlap=(0.5, 0.0)))
    # rows: 0-256, then 128 would end at 384 > 300 -> 44-300; columns: 0-512, then 512 -> 900 - 512 = 388-900
    assert g.tolist() == [[0, 0, 512, 256], [388, 0, 900, 256], [0, 44, 512, 300], [388, 44, 900, 300]]


def test_grid_of_an_image_smaller_than_the_slice_is_the_image():
    assert tile_grid(300, 200, _settings()).tolist() == [[0, 0, 200, 300]]
    assert tile_grid(512, 512, _settings()).tolist() == [[0, 0, 512, 512]]  # an exact fit: one tile


@pytest.mark.parametrize("h, w", [(1, 1), (513, 511), (1080, 1920), (4000, 3000)])
def test_grid_covers_the_image_with_full_size_tiles(h, w):
    s = _settings(size=256, overlap=0.25)
    g = tile_grid(h, w, s)
    cover = np.zeros((h, w), bool)
    for x1, y1, x2, y2 in g:
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
        assert (y2 - y1, x2 - x1) == (min(h, 256), min(w, 256))
        cover[y1:y2, x1:x2] = True
    assert cover.all()


@pytest.mark.parametrize("kw, message", [
    (dict(overlap=1.0), r"slice overlap 1.0 is outside \[0, 1\)"),
    (dict(overlap=-0.1), r"slice overlap -0.1 is outside \[0, 1\)"),
    (dict(size=0), r"slice size 0x0 must be whole pixels"),
    (dict(merge="wbf"), r"slice merge 'wbf' is not one of nmm, nms"),
    (dict(metric="giou"), r"slice match metric 'giou' is not one of ios, iou"),
    (dict(threshold=1.5), r"slice match threshold 1.5 is outside"),
])
def test_bad_settings_are_one_line_user_errors(kw, message):
    with pytest.raises(UserError, match=message) as e:
        _settings(**kw)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------------------------------- shift, match
def test_shift_boxes_moves_corners_only():
    d = np.array([[1, 2, 3, 4, 0.5, 7]], np.float32)
    np.testing.assert_array_equal(shift_boxes(d, (100, 10)), [[101, 12, 103, 14, 0.5, 7]])
    assert d[0, 0] == 1  # a copy


def test_match_values_iou_and_ios():
    a = np.array([0, 0, 10, 10], np.float32)
    b = np.array([[5, 0, 15, 10], [2, 2, 4, 4], [20, 20, 30, 30]], np.float32)
    np.testing.assert_allclose(match_values(a, b, "iou"), [50 / 150, 4 / 100, 0])
    np.testing.assert_allclose(match_values(a, b, "ios"), [0.5, 1.0, 0])  # the small box lies wholly inside a


# ------------------------------------------------------------------------------------------------------------ merge
A = [0, 0, 10, 10, 0.9, 0]
B = [5, 0, 15, 10, 0.8, 0]  # IoU with A 1/3, IoS 1/2
INSIDE = [2, 2, 4, 4, 0.7, 0]  # inside A: IoU 0.04, IoS 1
OTHER_CLASS = [5, 0, 15, 10, 0.95, 1]


def _merge(rows, **kw):
    return merge_detections(np.array(rows, np.float32), _settings(**kw))


def test_nmm_merges_into_the_union_box_with_the_best_score():
    out, groups = _merge([B, A], metric="iou", threshold=0.3)
    np.testing.assert_allclose(out, [[0, 0, 15, 10, 0.9, 0]])
    assert groups == [[1, 0]]  # A kept (best), B merged in


def test_nmm_takes_and_merges_at_the_threshold():
    """SAHI 0.12.8's rule: a metric equal to the threshold matches (>=), both when the best box takes boxes from the
    pool and when each is merged into the growing box: at IoS exactly 0.5, B merges into A."""
    out, groups = _merge([A, B], metric="ios", threshold=0.5)
    np.testing.assert_allclose(out, [[0, 0, 15, 10, 0.9, 0]])
    assert groups == [[0, 1]]
    np.testing.assert_allclose(_merge([A, B], metric="ios", threshold=0.51)[0], [A, B])


def test_equal_scores_are_ordered_by_corner_as_sahi_orders_them():
    left, right = [0, 0, 10, 10, 0.5, 0], [5, 0, 15, 10, 0.5, 0]
    assert _merge([right, left], merge="nms", metric="iou", threshold=0.3)[1] == [[1]]  # the left one kept


def test_nmm_with_ios_merges_a_box_inside_another_that_iou_keeps_apart():
    np.testing.assert_allclose(_merge([A, INSIDE])[0], [A])  # IoS 1 > 0.5: merged (the union is A)
    np.testing.assert_allclose(_merge([A, INSIDE], metric="iou")[0], [A, INSIDE])


def test_nms_keeps_the_best_box_unchanged():
    np.testing.assert_allclose(_merge([B, A], merge="nms", metric="iou", threshold=0.3)[0], [A])
    np.testing.assert_allclose(_merge([B, A], merge="nms", metric="iou", threshold=0.4)[0], [A, B])


def test_classes_merge_apart_unless_class_agnostic():
    np.testing.assert_allclose(_merge([A, OTHER_CLASS], metric="iou", threshold=0.3)[0], [OTHER_CLASS, A])
    out = _merge([A, OTHER_CLASS], metric="iou", threshold=0.3, class_agnostic=True)[0]
    np.testing.assert_allclose(out, [[0, 0, 15, 10, 0.95, 1]])  # the higher score's class


def test_merged_box_grows_and_a_later_box_must_match_the_grown_box():
    """A takes b (IoU 60 / 140) and c (IoU 50 / 150), both >= 0.3; merging b first grows the box to 0-14, and c's
    IoU with the grown box, 50 / 190 = 0.26, no longer passes, so c is dropped, not merged."""
    b, c = [4, 0, 14, 10, 0.8, 0], [-5, 0, 5, 10, 0.7, 0]
    out, groups = _merge([A, b, c], metric="iou", threshold=0.3)
    assert groups == [[0, 1]]
    np.testing.assert_allclose(out, [[0, 0, 14, 10, 0.9, 0]])


def test_merge_of_nothing_and_of_one():
    assert _merge(np.zeros((0, 6)))[0].shape == (0, 6)
    np.testing.assert_allclose(_merge([A])[0], [A])


# -------------------------------------------------------------------------------------------------- the predictor
class CentreBoxModel:
    """Stands in for a DetectMultiBackend: for every input image one class-0 box of 20 x 20 input pixels at its
    centre, confidence 0.9; records the batch shapes it was called with."""
    stride, pt, fp16, jit = 32, True, False, False
    input_shape = None
    names = {0: "a", 1: "b"}

    def __init__(self):
        from utils.backend import torch
        self.device, self.calls = torch.device("cpu"), []

    def __call__(self, x, augment=False):
        from utils.backend import torch
        b, _, h, w = x.shape
        self.calls.append(tuple(x.shape))
        out = torch.zeros((b, 1, 7))
        out[:, 0, :5] = torch.tensor([w / 2, h / 2, 20.0, 20.0, 0.9])
        out[:, 0, 5] = 1.0
        return out


def test_predictor_batches_tiles_and_shifts_each_box_back():
    from utils.inference.slicing import SlicedPredictor
    model = CentreBoxModel()
    s = SliceSettings.of(200, overlap=0.0, full_image=False, merge="nms", metric="iou", batch=4)
    im = np.zeros((400, 600, 3), np.uint8)
    det = SlicedPredictor(model, 320, s).predict(im)
    # 6 tiles of 200 x 200 inferred at 320 x 320 (gain 1.6): a 20 px box is 12.5 px, centred on each tile
    assert model.calls == [(4, 3, 320, 320), (2, 3, 320, 320)]  # 6 tiles in batches of 4
    centres = sorted(((d[0] + d[2]) / 2, (d[1] + d[3]) / 2) for d in det)
    assert centres == sorted((x, y) for y in (100, 300) for x in (100, 300, 500))
    np.testing.assert_allclose(det[:, 2] - det[:, 0], 12.5)


def test_predictor_adds_the_full_image_pass_and_merges_it():
    from utils.inference.slicing import SlicedPredictor
    model = CentreBoxModel()
    s = SliceSettings.of(200, overlap=0.0, batch=16)  # SAHI's defaults: full image, GREEDYNMM, IOS 0.5
    raw = SlicedPredictor(model, 320, s).predict_raw(np.zeros((400, 600, 3), np.uint8))
    assert model.calls == [(6, 3, 320, 320), (1, 3, 224, 320)]  # the full image letterboxed as AutoShape does
    assert len(raw) == 7
    np.testing.assert_allclose(raw[-1, :4], [300 - 18.75, 200 - 18.75, 300 + 18.75, 200 + 18.75], atol=1e-3)


def test_a_slice_larger_than_the_image_is_one_tile_said_once(log_lines):
    from utils.inference.slicing import SlicedPredictor
    model = CentreBoxModel()
    p = SlicedPredictor(model, 320, SliceSettings.of(512))
    for _ in range(2):
        assert len(p.predict(np.zeros((100, 150, 3), np.uint8))) == 1
    assert model.calls == [(1, 3, 224, 320)] * 2  # no full-image pass on top of the one tile
    said = [x for x in log_lines if "not smaller than the image" in x]
    assert len(said) == 1 and "slice 512x512" in said[0] and "(100x150)" in said[0]


def test_a_batch_one_export_runs_tiles_one_at_a_time(log_lines):
    from utils.inference.slicing import SlicedPredictor
    model = CentreBoxModel()
    model.pt, model.input_shape, model.w = False, (1, 3, 256, 256), "m.onnx"
    p = SlicedPredictor(model, 640, SliceSettings.of(200, overlap=0.0, full_image=False))
    assert len(p.predict(np.zeros((200, 400, 3), np.uint8))) == 2
    assert model.calls == [(1, 3, 256, 256)] * 2  # the export's own shape, one tile a call
    assert any("m.onnx was exported for batch 1: tiles run one at a time" in x for x in log_lines)


# ----------------------------------------------------------------------------------------------------- detect.py
def test_detect_slice_writes_the_merged_detections(yolov5n_pt, coco128_dir, tmp_path):
    """detect.py --slice on a coco128 image: its label file holds what SlicedPredictor gives for the image at the
    same settings (tiles of 256 px inferred at 256: 6 tiles and the full-image pass)."""
    import cv2

    import detect
    from utils.backend import inference_mode
    from utils.inference import load_model
    from utils.inference.slicing import SlicedPredictor
    image = coco128_dir / "images" / "train2017" / "000000000009.jpg"
    out = detect.run(weights=yolov5n_pt, source=image, imgsz=(256, 256), device="cpu", save_txt=True,
                     save_conf=True, nosave=True, project=tmp_path, name="sliced", slice=[256], slice_overlap=[0.2])
    got = np.loadtxt(out / "labels" / "000000000009.txt", ndmin=2)
    model, _ = load_model(yolov5n_pt, device="cpu", imgsz=256)
    with inference_mode():
        want = SlicedPredictor(model, 256, SliceSettings.of(256)).predict(cv2.imread(str(image)))
    assert len(got) == len(want) > 0
    h, w = 480, 640
    xywh = np.stack([(want[:, 0] + want[:, 2]) / 2 / w, (want[:, 1] + want[:, 3]) / 2 / h,
                     (want[:, 2] - want[:, 0]) / w, (want[:, 3] - want[:, 1]) / h], 1)
    want_rows = np.concatenate((want[:, 5:6], xywh, want[:, 4:5]), 1)
    want_rows = want_rows[np.lexsort((want_rows[:, 1], want_rows[:, 5]))]
    got = got[np.lexsort((got[:, 1], got[:, 5]))]
    np.testing.assert_allclose(got, want_rows, atol=1.01 / 480)  # boxes written rounded to whole pixels


def test_slice_refuses_a_stream_in_one_line():
    from utils.inference.sliced_writer import open_sliced_source
    with pytest.raises(UserError, match=r"--slice runs on images and videos, not on the stream 0"):
        open_sliced_source("0", stream=True)


# ------------------------------------------------------------------------------------------ Detector and AutoShape
# Under OneFlow only the model call differs from PyTorch: test_detect_slice_writes_the_merged_detections runs it there.
SLICED_UNDER_ONEFLOW = "tests/test_inference/test_slicing.py::test_detect_slice_writes_the_merged_detections"


@pytest.mark.oneflow_covered_by(SLICED_UNDER_ONEFLOW)
def test_detector_and_hub_model_slice_as_slicedpredictor(yolov5n_pt, coco128_dir):
    import cv2

    import hubconf
    from utils.backend import inference_mode, to_numpy
    from utils.inference import Detector
    from utils.inference.slicing import SlicedPredictor
    image = coco128_dir / "images" / "train2017" / "000000000025.jpg"
    im0 = cv2.imread(str(image))
    det = Detector(yolov5n_pt, device="cpu", imgsz=320, slice=256)
    with inference_mode():
        want = SlicedPredictor(det.model, 320, SliceSettings.of(256)).predict(im0)
    r = det.predict(str(image))[0]
    assert len(want) > 0
    np.testing.assert_allclose(r["boxes"], want[:, :4], atol=1e-4)
    np.testing.assert_allclose(r["scores"], want[:, 4], atol=1e-6)
    hub = hubconf.custom(path=str(yolov5n_pt), _verbose=False)
    got = to_numpy(hub(str(image), size=320, slice=SliceSettings.of(256)).xyxy[0])
    np.testing.assert_allclose(got, want, atol=1e-3)  # the hub model's own weights (fused the same): same boxes


@pytest.mark.oneflow_covered_by(SLICED_UNDER_ONEFLOW)
def test_segment_predict_slice_writes_merged_masks(shared_dir, coco128_dir, tmp_path):
    """segment/predict.py --slice: one polygon line per merged detection, each inside its box; the masks are the
    union of the tiles' masks merged into each detection (SlicedSegmenter)."""
    import cv2

    from segment import predict
    from utils.backend import inference_mode
    from utils.inference import load_model
    from utils.segment.sliced_predict import SlicedSegmenter
    weights = shared_dir / "weights" / "yolov5n-seg-coco128.pt"
    image = coco128_dir / "images" / "train2017" / "000000000009.jpg"
    out = predict.run(weights=weights, source=image, imgsz=(320, 320), device="cpu", save_txt=True, nosave=True,
                      conf_thres=0.2, project=tmp_path, name="s", slice=[256])
    lines = (out / "labels" / "000000000009.txt").read_text().splitlines()
    model, _ = load_model(weights, device="cpu", imgsz=320, task="segment")
    with inference_mode():
        det, masks = SlicedSegmenter(model, 320, SliceSettings.of(256), conf_thres=0.2).predict(cv2.imread(str(image)))
    assert len(lines) == len(det) == len(masks) > 0 and masks.shape[1:] == (480, 640)
    for d, m in zip(det, masks):
        ys, xs = np.nonzero(m)
        assert len(xs) and xs.min() >= d[0] - 1 and xs.max() <= d[2] + 1 and ys.min() >= d[1] - 1


# --------------------------------------------------------------------------------------------------------- val.py
@pytest.fixture
def coco4(coco128_dir, tmp_path):
    """The first 4 coco128 images and labels (links) and their YAML."""
    root = tmp_path / "coco4"
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True)
    for im in sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:4]:
        (root / "images" / im.name).symlink_to(im)
        (root / "labels" / f"{im.stem}.txt").symlink_to(coco128_dir / "labels" / "train2017" / f"{im.stem}.txt")
    import yaml
    f = tmp_path / "coco4.yaml"
    f.write_text(yaml.safe_dump({"path": str(root), "train": "images", "val": "images",
                                 "names": {i: f"class{i}" for i in range(80)}}))
    return f


@pytest.mark.oneflow_covered_by(SLICED_UNDER_ONEFLOW)
def test_val_slice_scores_and_reports_ap_by_size(yolov5n_pt, coco4, tmp_path, capsys):
    import json

    import val
    kw = dict(data=coco4, weights=yolov5n_pt, imgsz=320, batch_size=4, device="cpu", workers=0, save_json=True,
              plots=False, project=tmp_path)
    plain = val.run(**kw, name="plain")[0]
    sliced = val.run(**kw, name="sliced", slice=[256])[0]
    out = capsys.readouterr().out
    assert out.count("area= small") == 4  # pycocotools' AP and AR lines for small objects, one pair per run
    for name, r in (("plain", plain), ("sliced", sliced)):
        stats = json.loads((tmp_path / name / "ap_by_size.json").read_text())
        assert set(stats) >= {"AP", "AP_small", "AP_medium", "AP_large"} and 0 < stats["AP"] <= 1
        assert 0 < r[3] <= r[2] <= 1  # mAP50-95 <= mAP50
    assert json.loads((tmp_path / "sliced" / "labels_coco.json").read_text())["annotations"]
    assert sliced[:4] != plain[:4]


def test_val_bad_slice_overlap_is_one_line(yolov5n_pt, coco4, tmp_path):
    import val
    with pytest.raises(UserError, match=r"^slice overlap -0.5 is outside \[0, 1\)"):
        val.run(data=coco4, weights=yolov5n_pt, imgsz=320, device="cpu", project=tmp_path / "runs", slice=[256],
                slice_overlap=[-0.5])
    assert not (tmp_path / "runs").exists()  # refused before a run folder was made
