"""export.py --nms for ONNX and OpenVINO: NMS inside the graph gives the rows that the Python post-processing
(non_max_suppression, one NMS per class) gives for the PyTorch model, as (N, 7) [image, x1, y1, x2, y2, score, class];
DetectMultiBackend names such a file in one line instead of post-processing it twice."""
import shutil

import cv2
import numpy as np
import pytest

from utils.backend import IS_TORCH

IMGSZ = 256
pytestmark = pytest.mark.skipif(not IS_TORCH, reason="exports run in the PyTorch environment")


def _images(coco128_dir):
    from utils.augmentations import letterbox
    for stem in ("000000000025", "000000000030", "000000000034"):
        im = letterbox(cv2.imread(str(coco128_dir / "images" / "train2017" / f"{stem}.jpg")), IMGSZ, auto=False)[0]
        yield np.ascontiguousarray(im.transpose(2, 0, 1)[::-1])[None].astype(np.float32) / 255


@pytest.fixture(scope="module")
def nms_export(yolov5n_pt, tmp_path_factory):
    import export
    d = tmp_path_factory.mktemp("nms")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    written = export.run(weights=d / "yolov5n.pt", imgsz=[IMGSZ], include=["onnx", "openvino"], nms=True,
                         conf_thres=0.25, iou_thres=0.45)
    assert len(written) == 2
    return d


def _python_nms(weights, x):
    from models.experimental import attempt_load
    from utils.backend import from_numpy, to_numpy, torch
    from utils.general import non_max_suppression
    model = attempt_load(weights, fuse=True)
    with torch.no_grad():
        return to_numpy(non_max_suppression(model(from_numpy(x))[0], 0.25, 0.45, multi_label=True)[0])


def _by_score(rows):
    return rows[np.argsort(-rows[:, -2], kind="stable")]


def test_nms_graph_gives_the_python_post_processing_rows(nms_export, coco128_dir):
    import onnxruntime

    from utils.export.to_openvino import import_openvino
    session = onnxruntime.InferenceSession(str(nms_export / "yolov5n.onnx"), providers=["CPUExecutionProvider"])
    assert [(o.name, o.shape) for o in session.get_outputs()] == [("output0", ["detections", 7])]
    core = import_openvino().Core()
    ov = core.compile_model(core.read_model(str(nms_export / "yolov5n_openvino_model" / "yolov5n.xml")), "CPU",
                            {"INFERENCE_PRECISION_HINT": "f32"})
    counts = []
    for x in _images(coco128_dir):
        ref = _by_score(_python_nms(nms_export / "yolov5n.pt", x))
        y = _by_score(session.run(None, {"images": x})[0])
        counts.append(len(ref))
        assert y.shape == (len(ref), 7) and (y[:, 0] == 0).all()
        np.testing.assert_allclose(y[:, 1:5], ref[:, :4], atol=1e-3)
        np.testing.assert_allclose(y[:, 5], ref[:, 4], atol=1e-5)
        assert (y[:, 6] == ref[:, 5]).all()
        np.testing.assert_allclose(_by_score(list(ov(x).values())[0]), y, atol=1e-3)
    assert sum(counts) > 3  # the images have objects found at this size


def test_multibackend_names_an_nms_model_in_one_line(nms_export):
    from models.multibackend import DetectMultiBackend, ModelLoadError
    for name in ("yolov5n.onnx", "yolov5n_openvino_model"):
        with pytest.raises(ModelLoadError) as e:
            DetectMultiBackend(str(nms_export / name))
        assert "\n" not in str(e.value) and "--nms" in str(e.value) and name in str(e.value)
