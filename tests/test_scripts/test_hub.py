"""hubconf.py entry points, AutoShape (every input kind, letterboxing, NMS attributes, tensors) and Detections
(printout, pandas, save/crop/render) on the project's own sample images, checked against the official code."""
import logging
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from utils.backend import BACKEND, to_numpy, torch

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "data" / "images"
STILL_LIFE = IMAGES / "still_life.jpg"  # 810x1080: a bowl, fruit and a vase that yolov5n finds
LANDSCAPE = IMAGES / "landscape.jpg"  # 1280x720: a sailing boat
SIZE = 320

# The official AutoShape (ultralytics/yolov5 5081342f, torch.hub.load('.', 'custom', path='yolov5n.pt',
# source='local')) on model([landscape.jpg, still_life.jpg], size=320): boxes in original pixels, conf, class.
OFFICIAL_BATCH = [
    [[439.77, 350.21, 645.88, 599.41, 0.68152, 8]],
    [[534.89, 401.99, 678.42, 699.64, 0.82038, 75],
     [258.76, 585.88, 355.41, 691.64, 0.58189, 47],
     [186.83, 586.24, 270.78, 683.33, 0.51674, 49],
     [252.84, 582.09, 354.86, 689.42, 0.44435, 49],
     [108.97, 684.34, 418.48, 779.98, 0.25266, 45]],
]
OFFICIAL_LINES = ["image 1/2: 720x1280 1 boat", "image 2/2: 1080x810 1 bowl, 1 apple, 2 oranges, 1 vase"]

# AutoShape's own work (inputs, NMS settings, results) is framework-free; its model call under OneFlow:
AUTOSHAPE_UNDER_ONEFLOW = "tests/test_scripts/test_hub.py::test_matches_the_official_autoshape"


@pytest.fixture(scope="module")
def model(yolov5n_pt):
    import hubconf
    return hubconf.custom(path=str(yolov5n_pt), _verbose=False)


@pytest.fixture(scope="module")
def batch(model):
    return model([str(LANDSCAPE), STILL_LIFE], size=SIZE)


@pytest.fixture
def log_text(caplog):
    """Everything the project logger prints during a test, as one string."""
    from utils.general import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True
    with caplog.at_level(logging.INFO, logger="yolov5"):
        yield lambda: caplog.text
    LOGGER.propagate = propagate


def rgb(path):
    return cv2.imread(str(path))[..., ::-1]


def boxes(results, i=0):
    return to_numpy(results.xyxy[i]).astype(np.float64)


# ----------------------------------------------------------------------------------------------------------------
# AutoShape
def test_matches_the_official_autoshape(batch):
    assert batch.s == (2, 3, 320, 320)  # both letterboxed to one shape: the longer side is 320 for each
    for i, expected in enumerate(OFFICIAL_BATCH):
        got, want = boxes(batch, i), np.array(expected)
        assert got.shape == want.shape, f"image {i}: {got.shape[0]} detections, official {want.shape[0]}"
        np.testing.assert_allclose(got[:, :4], want[:, :4], atol=0.5)  # original pixels, not letterboxed ones
        np.testing.assert_allclose(got[:, 4], want[:, 4], atol=0.005)
        assert (got[:, 5] == want[:, 5]).all()


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_inputs_of_every_kind_give_the_same_boxes(model):
    arr = rgb(STILL_LIFE)
    pil = Image.open(STILL_LIFE)
    inputs = {"str": str(STILL_LIFE), "Path": STILL_LIFE, "PIL": pil, "numpy RGB": arr,
              "numpy CHW": np.ascontiguousarray(arr.transpose(2, 0, 1)), "PIL RGBA": pil.convert("RGBA")}
    ref = boxes(model(str(STILL_LIFE), size=SIZE))
    assert len(ref) >= 4
    for kind, im in inputs.items():
        np.testing.assert_allclose(boxes(model(im, size=SIZE)), ref, atol=1e-3, err_msg=kind)
    listed = model(list(inputs.values()), size=SIZE)  # one batch: all the same size, so the same letterbox
    assert len(listed) == len(inputs)
    for i, kind in enumerate(inputs):
        np.testing.assert_allclose(boxes(listed, i), ref, atol=1e-3, err_msg=f"{kind} in a list")
    assert listed.files == ["still_life.jpg", "still_life.jpg", "still_life.jpg", "image3.jpg", "image4.jpg",
                            "image5.jpg"]  # a PIL image keeps the name it was opened from (a converted one has none)
    # A float array is resized in float (uint8 resizing rounds), so its boxes move a little, as in the official code
    floats = boxes(model(arr.astype(np.float64), size=SIZE))
    assert (floats[:, 5] == ref[:, 5]).all() and np.abs(floats[:, :4] - ref[:, :4]).max() < 10


def test_numpy_images_are_rgb(model):
    as_rgb = model(rgb(STILL_LIFE), size=SIZE)
    as_bgr = model(cv2.imread(str(STILL_LIFE)), size=SIZE)  # the wrong channel order for AutoShape
    a, b = boxes(as_rgb), boxes(as_bgr)
    assert a.shape != b.shape or np.abs(a[:, 4] - b[:, 4]).max() > 1e-3


def test_grayscale_inputs_become_three_channels(model):
    gray = cv2.cvtColor(cv2.imread(str(STILL_LIFE)), cv2.COLOR_BGR2GRAY)
    for im in (gray, gray[..., None], Image.fromarray(gray)):
        r = model(im, size=SIZE)
        assert r.ims[0].shape == (*gray.shape, 3) and r.s == (1, 3, 320, 256)


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_nms_attributes(model, yolov5n_pt):
    import hubconf
    m = hubconf.custom(path=str(yolov5n_pt), _verbose=False)
    assert (m.conf, m.iou, m.agnostic, m.multi_label, m.classes, m.max_det, m.amp) == \
        (0.25, 0.45, False, False, None, 1000, False)
    full = boxes(m(STILL_LIFE, size=SIZE))
    m.conf = 0.5
    high = boxes(m(STILL_LIFE, size=SIZE))
    assert 0 < len(high) < len(full) and (high[:, 4] > 0.5).all()
    m.conf, m.classes = 0.25, [49]  # oranges only
    assert set(boxes(m(STILL_LIFE, size=SIZE))[:, 5]) == {49}
    m.classes, m.max_det = None, 1
    assert len(boxes(m(STILL_LIFE, size=SIZE))) == 1
    m.max_det, m.conf, m.multi_label = 1000, 0.05, True
    multi = boxes(m(STILL_LIFE, size=SIZE))
    m.multi_label = False
    single = boxes(m(STILL_LIFE, size=SIZE))
    assert len(multi) > len(single)  # several classes per box above 0.05
    m.agnostic = True
    assert len(boxes(m(STILL_LIFE, size=SIZE))) < len(single)  # overlapping boxes of different classes merge


def test_tensor_input_goes_straight_to_the_model(model):
    im = torch.zeros([1, 3, 64, 64])
    out = model(im)
    pred = out[0] if isinstance(out, (tuple, list)) else out
    assert tuple(pred.shape) == (1, 3 * (8 * 8 + 4 * 4 + 2 * 2), 85)  # raw decoded rows, no NMS


@pytest.mark.skipif(BACKEND != "torch", reason="torch.jit exists only in PyTorch")
def test_jit_trace_on_a_tensor_input(model):
    im = torch.rand([1, 3, 64, 64])
    model(im)  # as in the official CI: the Detect grids for 64 px are cached first, so both trace checks agree
    traced = torch.jit.trace(model, [im])
    np.testing.assert_allclose(to_numpy(traced(im)[0]), to_numpy(model(im)[0]), atol=1e-4)


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_wraps_a_multibackend_style_model(model, yolov5n_pt):
    """A loader object with .pt/.stride/.names/warmup() and forward(im, augment, visualize) is accepted as the
    official DetectMultiBackend is, with the same boxes."""
    from models.common import AutoShape
    from models.experimental import attempt_load
    from utils.backend import nn

    class Loader(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.model, self.pt, self.stride, self.names, self.device = inner, True, 32, inner.names, "cpu"

        def warmup(self, imgsz=(1, 3, 640, 640)):
            pass

        def forward(self, im, augment=False, visualize=False):
            return self.model(im)[0]

    wrapped = AutoShape(Loader(attempt_load(str(yolov5n_pt), device="cpu")), verbose=False)
    assert wrapped.dmb and wrapped.pt
    np.testing.assert_allclose(boxes(wrapped(STILL_LIFE, size=SIZE)), boxes(model(STILL_LIFE, size=SIZE)),
                               atol=1e-3)


@pytest.mark.parametrize("bad, words", [
    ("https://ultralytics.com/images/zidane.jpg", ["https://ultralytics.com/images/zidane.jpg", "not downloaded"]),
    ("no/such/image.jpg", ["image not found", "no/such/image.jpg"]),
    (12, ["int", "file path"]),
    ([], ["empty"]),
])
def test_bad_inputs_are_one_clear_line(model, bad, words):
    from models.autoshape import ImageInputError
    from utils.errors import UserError
    with pytest.raises(ImageInputError) as e:
        model(bad)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_not_an_image_file_is_one_clear_line(model, tmp_path):
    from models.autoshape import ImageInputError
    f = tmp_path / "notes.jpg"
    f.write_text("not a picture")
    with pytest.raises(ImageInputError, match="notes.jpg: not an image"):
        model(f)


# ----------------------------------------------------------------------------------------------------------------
# Detections
def test_print_line_and_repr(batch, log_text):
    text = str(batch)
    lines = text.splitlines()
    assert lines[:2] == OFFICIAL_LINES
    assert re.fullmatch(r"Speed: \d+\.\dms pre-process, \d+\.\dms inference, \d+\.\dms NMS per image at shape "
                        r"\(2, 3, 320, 320\)", lines[2]), lines[2]
    assert repr(batch) == "YOLOv5 <class 'models.common.Detections'> instance\n" + text
    batch.print()
    assert text in log_text()
    assert len(batch) == 2 and batch.n == 2 and len(batch.t) == 3 and all(t > 0 for t in batch.t)
    assert batch.files == ["landscape.jpg", "still_life.jpg"] and batch.names[75] == "vase"


def test_box_formats_and_pandas(batch):
    xyxy, xywh = boxes(batch, 1), to_numpy(batch.xywh[1])
    np.testing.assert_allclose(xywh[:, :2], (xyxy[:, :2] + xyxy[:, 2:4]) / 2, rtol=1e-5)
    np.testing.assert_allclose(xywh[:, 2:4], xyxy[:, 2:4] - xyxy[:, :2], rtol=1e-5)
    np.testing.assert_allclose(to_numpy(batch.xyxyn[1])[:, :4], xyxy[:, :4] / [810, 1080, 810, 1080], rtol=1e-5)
    np.testing.assert_allclose(to_numpy(batch.xywhn[1])[:, :4], xywh[:, :4] / [810, 1080, 810, 1080], rtol=1e-5)
    p = batch.pandas()
    df = p.xyxy[1]
    assert list(df.columns) == ["xmin", "ymin", "xmax", "ymax", "confidence", "class", "name"]
    assert list(p.xywhn[1].columns) == ["xcenter", "ycenter", "width", "height", "confidence", "class", "name"]
    np.testing.assert_allclose(df[["xmin", "ymin", "xmax", "ymax", "confidence"]].to_numpy(), xyxy[:, :5],
                               rtol=1e-5)
    assert df["name"].tolist() == ["vase", "apple", "orange", "orange", "bowl"]
    assert p.xyxy[0]["name"].tolist() == ["boat"] and len(p.xyxyn) == len(p.xywh) == 2
    assert not hasattr(batch.xyxy[0], "columns")  # pandas() works on a copy


def test_tolist(batch):
    parts = batch.tolist()
    assert [len(r) for r in parts] == [1, 1]
    assert str(parts[1]).splitlines()[0] == "image 1/1: 1080x810 1 bowl, 1 apple, 2 oranges, 1 vase"
    np.testing.assert_array_equal(boxes(parts[1]), boxes(batch, 1))


def test_save_writes_annotated_copies_in_rgb(model, tmp_path, log_text):
    arr = rgb(STILL_LIFE)
    before = arr.copy()
    r = model([arr, np.zeros((320, 640, 3))], size=SIZE)
    r.save(save_dir=tmp_path / "exp")
    r.save(save_dir=tmp_path / "exp")  # a second save goes to exp2, as runs/detect/exp does
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "exp2"]
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == ["image0.jpg", "image1.jpg"]
    saved = np.asarray(Image.open(tmp_path / "exp" / "image0.jpg").convert("RGB")).astype(int)
    assert saved.shape == arr.shape
    x1, y1, x2, y2 = boxes(r)[0, :4].astype(int)
    outside = np.ones(arr.shape[:2], bool)
    outside[max(y1 - 40, 0):y2 + 10, max(x1 - 10, 0):x2 + 10] = False  # the box and its label
    assert np.abs(saved - arr)[outside].mean() < 4  # the same picture, colours in the right order...
    assert np.abs(saved - arr[..., ::-1])[outside].mean() > 10  # ...which the swapped order is not
    assert np.abs(saved - arr).max() > 100  # and boxes drawn on it
    assert (arr == before).all()  # never drawn on the caller's array
    assert re.search(rf"Saved 2 images to \S*{re.escape(str(tmp_path / 'exp'))}(\x1b\[0m)?\n", log_text())


def test_render_and_show(model, log_text, monkeypatch):
    arr = rgb(STILL_LIFE)
    r = model(arr, size=SIZE)
    out = r.render()
    assert out is r.ims and out[0].shape == arr.shape and np.abs(out[0].astype(int) - arr).max() > 100
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    r.show()  # headless: a warning, no window, no exception
    assert "Showing images is not supported in this environment" in log_text()


def test_crop(model, tmp_path):
    bgr = cv2.imread(str(STILL_LIFE))
    r = model(STILL_LIFE, size=SIZE)
    crops = r.crop(save_dir=tmp_path / "exp")
    assert len(crops) == len(boxes(r)) and {c["label"].split()[0] for c in crops} == {"apple", "orange", "vase"}
    vase = next(c for c in crops if c["label"].startswith("vase"))
    x1, y1, x2, y2 = (float(v) for v in vase["box"])
    assert vase["im"].shape[0] >= y2 - y1 and vase["im"].shape[1] >= x2 - x1  # enlarged a little, as official
    files = sorted(str(p.relative_to(tmp_path / "exp")) for p in (tmp_path / "exp").rglob("*.jpg"))
    assert files == ["crops/apple/still_life.jpg", "crops/orange/still_life-2.jpg", "crops/orange/still_life.jpg",
                     "crops/vase/still_life.jpg", "still_life.jpg"]
    saved = cv2.imread(str(tmp_path / "exp" / "crops" / "vase" / "still_life.jpg")).astype(int)
    assert saved.shape == vase["im"].shape and np.abs(saved - vase["im"]).mean() < 4  # crops are BGR, like cv2
    w, h = (x2 - x1) * 1.02 + 10, (y2 - y1) * 1.02 + 10  # the official crop margin: 2% + 10 px
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    expected = bgr[int(cy - h / 2):int(cy + h / 2), int(cx - w / 2):int(cx + w / 2)].astype(int)
    assert vase["im"].shape == expected.shape and np.abs(vase["im"] - expected).mean() < 2
    assert len(r.crop(save=False)) == len(crops)


# ----------------------------------------------------------------------------------------------------------------
# hubconf entry points
@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_named_model_reads_weights_from_the_working_folder(tmp_path, monkeypatch, yolov5n_pt):
    import hubconf
    from models.common import AutoShape
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolov5n.pt").symlink_to(yolov5n_pt)
    m = hubconf.yolov5n(_verbose=False)
    assert isinstance(m, AutoShape) and m.names[0] == "person"
    assert str(m(STILL_LIFE, size=SIZE)).splitlines()[0] == "image 1/1: 1080x810 1 apple, 2 oranges, 1 vase"


def test_missing_named_weights_say_where_to_put_them(tmp_path, monkeypatch):
    """The working folder and the repository root are both searched and named. The root is an empty stand-in: what a
    user's runs left in the checkout (make train-demo's runs/train/exp/weights/best.pt, a downloaded yolov5n.pt) must
    not decide this test."""
    import hubconf
    from utils.errors import UserError
    work, checkout = tmp_path / "work", tmp_path / "checkout"
    work.mkdir()
    checkout.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(hubconf, "ROOT", checkout)
    for entry in ("yolov5n", "yolov5x6"):
        with pytest.raises(UserError) as e:
            getattr(hubconf, entry)(_verbose=False)
        msg = str(e.value)
        assert "\n" not in msg and f"{entry}.pt not found" in msg and str(work) in msg and str(checkout) in msg
        assert "never downloaded" in msg and "pretrained=False" in msg and f"models/{entry}.yaml" in msg
    with pytest.raises(UserError, match="weights file not found: runs/train/exp/weights/best.pt"):
        hubconf.custom(path="runs/train/exp/weights/best")  # no suffix: .pt is added, as the official hubconf does


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_pretrained_false_builds_from_the_yaml(tmp_path, monkeypatch):
    import hubconf
    from models.yolo import DetectionModel
    monkeypatch.chdir(tmp_path)  # no weights anywhere near: nothing is read
    m = hubconf.yolov5n(pretrained=False, _verbose=False)
    assert type(m) is DetectionModel and m.yaml["nc"] == 80 and m.yaml_file == "yolov5n.yaml"
    m6 = hubconf.yolov5n6(pretrained=False, classes=3, _verbose=False)
    assert m6.yaml["nc"] == 3 and to_numpy(m6.stride).tolist() == [8, 16, 32, 64]


def test_other_class_count_copies_matching_weights(yolov5n_pt, tmp_path, monkeypatch):
    import hubconf
    from utils.checkpoint import load_any
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolov5n.pt").symlink_to(yolov5n_pt)
    m = hubconf.yolov5n(classes=3, _verbose=False)
    sd = load_any(yolov5n_pt)["model"]["state_dict"]
    own = {k: to_numpy(v) for k, v in m.state_dict().items()}
    np.testing.assert_allclose(own["model.0.conv.weight"], sd["model.0.conv.weight"].astype(np.float32))
    assert own["model.24.m.0.weight"].shape[0] == 3 * 8  # the new head, not the checkpoint's 3 * 85
    assert m.names == ["0", "1", "2"]  # 80 checkpoint names do not fit 3 classes


def test_entry_points_have_the_official_signatures():
    import inspect

    import hubconf
    official = ["pretrained", "channels", "classes", "autoshape", "_verbose", "device"]
    for name in ("yolov5n", "yolov5s", "yolov5m", "yolov5l", "yolov5x",
                 "yolov5n6", "yolov5s6", "yolov5m6", "yolov5l6", "yolov5x6"):
        assert list(inspect.signature(getattr(hubconf, name)).parameters) == official, name
    assert list(inspect.signature(hubconf.custom).parameters) == ["path", "autoshape", "_verbose", "device"]
    assert list(inspect.signature(hubconf._create).parameters) == ["name", "pretrained", "channels", "classes",
                                                                   "autoshape", "verbose", "device"]


@pytest.mark.skipif(BACKEND != "torch", reason="torch.hub exists only in PyTorch")
def test_torch_hub_load_local(yolov5n_pt, tmp_path, monkeypatch):
    from models.common import AutoShape
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolov5n.pt").symlink_to(yolov5n_pt)
    for m in (torch.hub.load(str(ROOT), "custom", path="yolov5n", source="local", _verbose=False),
              torch.hub.load(str(ROOT), "yolov5n", source="local", _verbose=False)):
        assert isinstance(m, AutoShape)
        assert str(m(str(STILL_LIFE), size=SIZE)).splitlines()[0] == "image 1/1: 1080x810 1 apple, 2 oranges, 1 vase"


def _hubconf_cli(args, cwd):
    env = {"YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "hubconf.py"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
@pytest.mark.slow
def test_hubconf_main(tmp_path, yolov5n_pt):
    (tmp_path / "yolov5n.pt").symlink_to(yolov5n_pt)
    p = _hubconf_cli(["--model", "yolov5n"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr
    assert "image 1/5: 1080x810 1 bowl, 1 apple, 2 oranges, 1 vase" in out
    assert "image 2/5: 720x1280 1 boat" in out and "image 5/5: 320x640 (no detections)" in out
    assert "Saved 5 images to" in out
    assert sorted(p.name for p in (tmp_path / "runs" / "detect" / "exp").iterdir()) == \
        ["image2.jpg", "image4.jpg", "landscape.jpg", "still_life.jpg", "still_life2.jpg"]  # two inputs, one name
    if (ROOT / "yolov5s.pt").exists():  # a user's own yolov5s.pt in the checkout: the default model would load
        return
    p = _hubconf_cli([], tmp_path)  # the official default, yolov5s, whose weights are not there
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "yolov5s.pt not found" in p.stderr.strip().splitlines()[-1]


# ----------------------------------------------------------------------------------------------------------------
# data/images
def test_sample_images_are_the_generator_output(tmp_path):
    sys.path.insert(0, str(ROOT / "data" / "scripts"))
    try:
        import make_sample_images
    finally:
        sys.path.remove(str(ROOT / "data" / "scripts"))
    made = make_sample_images.make_images(tmp_path)
    committed = sorted(IMAGES.glob("*.jpg"))
    assert sorted(p.name for p in made) == [p.name for p in committed] and len(committed) >= 2
    for p in committed:
        assert p.stat().st_size < 100_000, f"{p.name} is {p.stat().st_size} bytes"
        a, b = cv2.imread(str(p)).astype(int), cv2.imread(str(tmp_path / p.name)).astype(int)
        assert a.shape == b.shape and np.abs(a - b).mean() < 2, p.name  # regenerating gives the same picture
    assert len({cv2.imread(str(p)).shape[:2] for p in committed}) == len(committed)  # different sizes


@pytest.mark.oneflow_covered_by(AUTOSHAPE_UNDER_ONEFLOW)
def test_detect_default_source_is_data_images(yolov5n_pt, tmp_path):
    import detect
    opt = detect.parse_opt(["--weights", str(yolov5n_pt)])
    assert Path(opt.source) == IMAGES
    save_dir = detect.run(weights=[str(yolov5n_pt)], imgsz=(128, 128), project=tmp_path, name="exp")
    assert sorted(p.name for p in save_dir.glob("*.jpg")) == sorted(p.name for p in IMAGES.glob("*.jpg"))
