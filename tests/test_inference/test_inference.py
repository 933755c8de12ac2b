"""utils/inference: the shared steps (preprocess, scale-back), the one label-txt writer, the model loader."""
import numpy as np
import pytest

from utils.backend import from_numpy, to_numpy, torch
from utils.inference import RunLabelFiles, check_save_format, load_model, preprocess, to_original

DET = np.array([[20, 20, 60, 40, 0.875, 3], [0, 50, 200, 100, 0.5, 0]], np.float32)  # on a 200 x 100 (w x h) image


def test_label_txt_yolo_and_voc_formats(tmp_path):
    RunLabelFiles(tmp_path).write("a/yolo.jpg", DET, (100, 200, 3), save_conf=True)
    RunLabelFiles(tmp_path).write("voc.png", from_numpy(DET), (100, 200), save_format=1)
    assert (tmp_path / "yolo.txt").read_text() == "3 0.2 0.3 0.2 0.2 0.875\n0 0.5 0.75 1 0.5 0.5\n"
    assert (tmp_path / "voc.txt").read_text() == "3 0.1 0.2 0.3 0.4\n0 0 0.5 1 1\n"
    RunLabelFiles(tmp_path).write("voc.png", DET[:1], (100, 200), save_format=1)  # a rerun replaces, never appends
    assert (tmp_path / "voc.txt").read_text() == "3 0.1 0.2 0.3 0.4\n"
    assert RunLabelFiles(tmp_path).write("none.jpg", DET[:0], (100, 200)) is None
    assert not (tmp_path / "none.txt").exists()  # no detections, no file (as ultralytics)


def test_save_format_checked_in_one_line():
    from utils.errors import UserError
    check_save_format(0), check_save_format(1)
    with pytest.raises(UserError, match=r"^--save-format 2: use 0 \(YOLO"):
        check_save_format(2)


def test_to_original_inverts_the_letterbox():
    """200 x 100 letterboxed to 128 x 128: gain .64, 32 px of padding above and below (128 - 64) / 2."""
    on_input = np.array([[12.8, 44.8, 38.4, 57.6, 0.9, 1]], np.float32)  # [20, 20, 60, 40] * .64 + (0, 32)
    for ratio_pad in (None, ((0.64, 0.64), (0.0, 32.0))):
        got = to_original(from_numpy(on_input), (128, 128), (100, 200, 3), ratio_pad)
        np.testing.assert_allclose(got, [[20, 20, 60, 40, 0.9, 1]], atol=1e-4)
        assert got.dtype == np.float32
    outside = to_original(np.array([[-10, 20, 300, 40, 0.5, 0]], np.float32), (100, 200), (100, 200))
    np.testing.assert_array_equal(outside[0, :4], [0, 20, 200, 40])  # clipped to the image
    assert to_original(np.zeros((0, 6), np.float32), (64, 64), (64, 64)).shape == (0, 6)


def test_preprocess_scales_and_batches_without_touching_its_input():
    im = np.full((3, 4, 6), 255, np.uint8)
    x = preprocess(im, "cpu")
    assert tuple(x.shape) == (1, 3, 4, 6) and x.dtype == torch.float32 and float(x.max()) == 1.0
    f = from_numpy(np.full((2, 3, 4, 6), 51.0, np.float32))
    y = preprocess(f, "cpu")
    assert tuple(y.shape) == (2, 3, 4, 6) and float(y[0, 0, 0, 0]) == pytest.approx(0.2)
    assert float(f[0, 0, 0, 0]) == 51.0  # the caller's float tensor is not divided in place
    assert preprocess(im, "cpu", half=True).dtype == torch.float16


def test_load_model_rounds_imgsz_to_the_stride(yolov5n_pt):
    model, imgsz = load_model(str(yolov5n_pt), device="cpu", imgsz=[100, 250])
    assert imgsz == [128, 256] and model.stride == 32 and model.names[0] == "person" and model.pt
    assert load_model(str(yolov5n_pt), device=torch.device("cpu"), imgsz=320)[1] == 320  # a device object too
    x = preprocess(np.zeros((3, 128, 256), np.uint8), model.device)
    assert to_numpy(model(x)[0]).shape[:2] == (1, 3 * (16 * 32 + 8 * 16 + 4 * 8))
