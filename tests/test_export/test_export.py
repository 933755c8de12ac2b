"""export.py and DetectMultiBackend on the official yolov5n.pt at 128 px: file names and metadata as ultralytics writes
them, the exported models' outputs against the PyTorch model's, --dynamic, the one-line messages, and under OneFlow
the .pt path and export.py's pointer to the PyTorch environment."""
import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.helpers.process_helpers import without_run_header
from utils.backend import IS_TORCH

ROOT = Path(__file__).resolve().parents[2]
IMGSZ = 128  # the official CI exports at 64, where yolov5n is not yet confident on these images
torch_only = pytest.mark.skipif(not IS_TORCH, reason="exports run in the PyTorch environment")
oneflow_only = pytest.mark.skipif(IS_TORCH, reason="what OneFlow users see")


def _image(coco128_dir, size, stem="000000000025"):
    """A real letterboxed image as the (1, 3, h, w) float32 array the models take."""
    from utils.augmentations import letterbox
    im0 = cv2.imread(str(coco128_dir / "images" / "train2017" / f"{stem}.jpg"))
    im = letterbox(im0, size, auto=False)[0].transpose(2, 0, 1)[::-1]
    return np.ascontiguousarray(im)[None].astype(np.float32) / 255


def _pytorch_output(weights, x):
    from models.experimental import attempt_load
    from utils.backend import from_numpy, to_numpy, torch
    model = attempt_load(weights, fuse=True)
    with torch.no_grad():
        return to_numpy(model(from_numpy(x))[0])


def assert_outputs_close(y, ref):
    """Decoded predictions: boxes (x, y, w, h in pixels) to 1e-4 plus 1e-5 of their size, objectness and class
    scores to 1e-4. Measured on the same giraffe at 64 px: boxes within 1.8e-4 px (2.2e-6 relative), scores within
    1.6e-6."""
    assert y.shape == ref.shape
    np.testing.assert_allclose(y[..., :4], ref[..., :4], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y[..., 4:], ref[..., 4:], rtol=0, atol=1e-4)


@pytest.fixture(scope="module")
def weights_copy(yolov5n_pt, tmp_path_factory):
    """export.py writes beside the weights: never into ../shared."""
    d = tmp_path_factory.mktemp("export")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    return d / "yolov5n.pt"


@pytest.fixture(scope="module")
def exported(weights_copy):
    if not IS_TORCH:
        pytest.skip("exports run in the PyTorch environment")
    import export
    files = export.run(weights=str(weights_copy), imgsz=[IMGSZ], include=("torchscript", "onnx", "openvino"),
                       opset=17)
    return {Path(f).name: Path(f) for f in files}


@torch_only
def test_official_file_names_and_metadata(exported, weights_copy):
    d = weights_copy.parent
    assert set(exported) == {"yolov5n.torchscript", "yolov5n.onnx", "yolov5n_openvino_model"}
    assert all(p.parent == d for p in exported.values())

    from utils.backend import torch
    extra = {"config.txt": ""}
    torch.jit.load(str(d / "yolov5n.torchscript"), _extra_files=extra)
    meta = json.loads(extra["config.txt"])
    assert meta["shape"] == [1, 3, IMGSZ, IMGSZ] and meta["stride"] == 32
    assert len(meta["names"]) == 80 and meta["names"]["0"] == "person"  # JSON keys are strings, as official

    import onnx
    m = onnx.load(str(d / "yolov5n.onnx"))
    props = {p.key: p.value for p in m.metadata_props}
    assert props["stride"] == "32" and ast.literal_eval(props["names"])[0] == "person"
    dims = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in (m.graph.input[0], m.graph.output[0])]
    assert m.graph.input[0].name == "images" and m.graph.output[0].name == "output0"
    assert dims == [[1, 3, IMGSZ, IMGSZ], [1, 3 * (16 * 16 + 8 * 8 + 4 * 4), 85]]  # 3 anchors per cell of 3 grids

    from utils.export.onnx_meta import read_onnx_info  # the reader --dnn uses where no onnx package is installed
    assert read_onnx_info(d / "yolov5n.onnx") == (props, (1, 3, IMGSZ, IMGSZ))

    ov = d / "yolov5n_openvino_model"
    assert {p.name for p in ov.iterdir()} == {"yolov5n.xml", "yolov5n.bin", "yolov5n.yaml"}


@torch_only
def test_onnxruntime_matches_pytorch(exported, weights_copy, coco128_dir):
    import onnxruntime
    x = _image(coco128_dir, IMGSZ)
    session = onnxruntime.InferenceSession(str(exported["yolov5n.onnx"]), providers=["CPUExecutionProvider"])
    (y,) = session.run(["output0"], {"images": x})
    ref = _pytorch_output(weights_copy, x)
    assert ref[..., 4].max() > 0.3  # a real image with confident detections, not an all-background check
    assert_outputs_close(y, ref)


@torch_only
def test_torchscript_loaded_with_jit_matches(exported, weights_copy, coco128_dir):
    from utils.backend import torch
    x = _image(coco128_dir, IMGSZ)
    ts = torch.jit.load(str(exported["yolov5n.torchscript"]))
    with torch.no_grad():
        y = ts(torch.from_numpy(x))
    assert isinstance(y, tuple) and len(y) == 1  # export mode: the decoded predictions only
    assert_outputs_close(y[0].numpy(), _pytorch_output(weights_copy, x))


@torch_only
def test_openvino_matches_pytorch(exported, weights_copy, coco128_dir):
    from models.multibackend import DetectMultiBackend
    from utils.backend import from_numpy, to_numpy
    x = _image(coco128_dir, IMGSZ)
    model = DetectMultiBackend(str(exported["yolov5n_openvino_model"]))
    assert model.xml and not (model.pt or model.onnx) and model.stride == 32 and model.names[0] == "person"
    assert_outputs_close(to_numpy(model(from_numpy(x))), _pytorch_output(weights_copy, x))


@torch_only
def test_dynamic_onnx_takes_two_batch_sizes(weights_copy, coco128_dir, tmp_path):
    import onnxruntime

    import export
    w = tmp_path / "dyn.pt"
    shutil.copy(weights_copy, w)
    (f,) = export.run(weights=str(w), imgsz=[IMGSZ], include=("onnx",), dynamic=True, opset=17)
    from utils.export.onnx_meta import read_onnx_info
    assert read_onnx_info(f)[1] == (None, 3, None, None)  # batch, height and width are symbolic
    session = onnxruntime.InferenceSession(f, providers=["CPUExecutionProvider"])
    x1 = _image(coco128_dir, IMGSZ)
    (y1,) = session.run(None, {"images": x1})
    assert y1.shape == (1, 1008, 85)
    # batch 2 at another size: the grids follow the input's shape
    from utils.augmentations import letterbox
    ims = [cv2.imread(str(coco128_dir / "images" / "train2017" / f"{s}.jpg")) for s in ("000000000025", "000000000034")]
    x2 = np.stack([letterbox(im, (96, 128), auto=False)[0].transpose(2, 0, 1)[::-1] for im in ims])
    x2 = np.ascontiguousarray(x2).astype(np.float32) / 255
    (y2,) = session.run(None, {"images": x2})
    assert y2.shape == (2, 3 * (12 * 16 + 6 * 8 + 3 * 4), 85)
    assert_outputs_close(y2, _pytorch_output(weights_copy, x2))


@torch_only
def test_simplified_onnx_matches_pytorch(exported, weights_copy, coco128_dir, tmp_path):
    import onnx
    import onnxruntime

    import export
    w = tmp_path / "slim.pt"
    shutil.copy(weights_copy, w)
    (f,) = export.run(weights=str(w), imgsz=[IMGSZ], include=("onnx",), simplify=True, opset=17)
    plain, slim = (len(onnx.load(str(p)).graph.node) for p in (exported["yolov5n.onnx"], f))
    assert slim < plain  # onnxslim ran (263 -> 236 nodes at 64 px)
    x = _image(coco128_dir, IMGSZ)
    (y,) = onnxruntime.InferenceSession(f, providers=["CPUExecutionProvider"]).run(None, {"images": x})
    assert_outputs_close(y, _pytorch_output(weights_copy, x))


@torch_only
def test_multibackend_flags_and_outputs_per_format(exported, weights_copy, coco128_dir):
    from models.common import DetectMultiBackend
    from utils.backend import from_numpy, to_numpy
    x = _image(coco128_dir, IMGSZ)
    ref = _pytorch_output(weights_copy, x)
    others = ("xml", "engine", "coreml", "saved_model", "pb", "tflite", "edgetpu", "tfjs", "paddle", "triton")
    for name, flag in (("yolov5n.pt", "pt"), ("yolov5n.torchscript", "jit"), ("yolov5n.onnx", "onnx")):
        m = DetectMultiBackend(str(weights_copy.parent / name))
        assert [getattr(m, k) for k in ("pt", "jit", "onnx")] == [k == flag for k in ("pt", "jit", "onnx")]
        assert not any(getattr(m, k) for k in others) and m.fp16 is False
        assert m.stride == 32 and len(m.names) == 80 and m.names[79] == "toothbrush"
        m.warmup(imgsz=(1, 3, IMGSZ, IMGSZ))
        y = m(from_numpy(x))
        y = y[0] if isinstance(y, list) else y  # .pt: the eval-mode pair, as the official class returns it
        assert_outputs_close(to_numpy(y), ref)
    dnn = DetectMultiBackend(str(exported["yolov5n.onnx"]), dnn=True)  # OpenCV's ONNX runtime
    assert dnn.dnn and dnn.names[0] == "person"
    assert_outputs_close(to_numpy(dnn(from_numpy(x))), ref)


@torch_only
def test_static_model_given_another_size_says_which(exported, coco128_dir):
    from models.multibackend import DetectMultiBackend, ModelLoadError
    from utils.backend import from_numpy
    m = DetectMultiBackend(str(exported["yolov5n.onnx"]))
    with pytest.raises(ModelLoadError, match=r"--imgsz 128 128"):
        m(from_numpy(_image(coco128_dir, 96)))
    two = np.concatenate([_image(coco128_dir, IMGSZ)] * 2)
    assert tuple(m(from_numpy(two)).shape) == (2, 1008, 85)  # a batch-1 export runs larger batches one at a time


def test_unknown_and_unsupported_formats_one_line(tmp_path):
    from models.multibackend import DetectMultiBackend, ModelLoadError
    from utils.errors import UserError
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"\0")
    with pytest.raises(ModelLoadError, match="TensorRT models need the tensorrt runtime"):
        DetectMultiBackend(str(engine))
    other = tmp_path / "m.weights"  # no export suffix: read as a checkpoint, whose reader names what it is not
    other.write_text("not a model")
    with pytest.raises(UserError, match="m.weights"):
        DetectMultiBackend(str(other))
    with pytest.raises(ModelLoadError, match="not found"):
        DetectMultiBackend(str(tmp_path / "missing.onnx"))


@torch_only
def test_bad_options_are_one_line_errors(weights_copy):
    import export
    from utils.errors import UserError
    with pytest.raises(UserError, match="valid --include arguments are torchscript, onnx, openvino"):
        export.run(weights=str(weights_copy), imgsz=[IMGSZ], include=("onnxx",))
    with pytest.raises(UserError, match="--half only compatible with GPU export"):
        export.run(weights=str(weights_copy), imgsz=[IMGSZ], include=("onnx",), half=True, device="cpu")


@torch_only
def test_export_removes_what_killed_exports_left(weights_copy, tmp_path):
    """A killed export leaves its temporary file (or folder) beside the weights; the next export removes those whose
    writer is gone, and nothing else: not a live writer's, not a user's file of a similar name."""
    import export
    from tests.helpers.process_helpers import dead_pid
    from utils.atomic_files import temp_path_for
    w = tmp_path / "yolov5n.pt"
    shutil.copy(weights_copy, w)
    host = temp_path_for(w).name.split(".")[2]
    dead, live = dead_pid(), os.getppid()
    left_file = tmp_path / f"yolov5n.onnx.{host}.{dead}.yolo-partial.onnx"
    left_folder = tmp_path / f"yolov5n_openvino_model.{host}.{dead}.yolo-partial"
    live_file = tmp_path / f"yolov5n.torchscript.{host}.{live}.yolo-partial.torchscript"
    users = [tmp_path / "yolov5n.notes.3.tmp", tmp_path / f"yolov5n.onnx.{host}.{dead}.partial.onnx"]
    left_file.write_bytes(b"cut short")
    (left_folder / "sub").mkdir(parents=True)
    for f in (live_file, *users):
        f.write_bytes(b"kept")
    (f,) = export.run(weights=str(w), imgsz=[64], include=("torchscript",))
    assert Path(f).is_file()
    assert not left_file.exists() and not left_folder.exists()
    assert live_file.exists() and all(u.read_bytes() == b"kept" for u in users)


def _cli(args, cwd, backend=None, python=sys.executable):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if backend:
        env["YOLO_BACKEND"] = backend
    return subprocess.run([str(python), str(ROOT / "export.py"), *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


@torch_only
@pytest.mark.slow
def test_cli_unavailable_include_says_one_line_and_exports_the_rest(weights_copy, tmp_path):
    w = tmp_path / "yolov5n.pt"
    shutil.copy(weights_copy, w)
    p = _cli(["--weights", str(w), "--img", str(IMGSZ), "--include", "engine", "torchscript"], tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-3000:]
    assert (tmp_path / "yolov5n.torchscript").is_file() and not (tmp_path / "yolov5n.engine").exists()
    lines = [ln for ln in without_run_header(out) if "engine" in ln]  # not the arguments line's include=['engine', ..]
    assert len(lines) == 1 and "not available here" in lines[0], out[-3000:]
    assert "Traceback" not in out


@torch_only
@pytest.mark.slow
def test_cli_official_ci_step(weights_copy, tmp_path):
    """The official CI's `python export.py --weights $m.pt --img 64 --include torchscript`, run from the folder."""
    shutil.copy(weights_copy, tmp_path / "yolov5n.pt")
    p = _cli(["--weights", "yolov5n.pt", "--img", "64", "--include", "torchscript"], tmp_path)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "export success" in p.stdout + p.stderr and (tmp_path / "yolov5n.torchscript").stat().st_size > 1e6


# ---------------------------------------------------------------------------------------------------- OneFlow
@oneflow_only
def test_oneflow_export_points_to_pytorch(weights_copy):
    import export
    from utils.errors import NeedsPyTorchError
    with pytest.raises(NeedsPyTorchError, match="PyTorch environment"):
        export.run(weights=str(weights_copy), imgsz=[IMGSZ], include=("onnx",))
    assert not weights_copy.with_suffix(".onnx").exists()


@oneflow_only
@pytest.mark.slow
def test_oneflow_export_cli_one_line(weights_copy, tmp_path):
    p = _cli(["--weights", str(weights_copy), "--img", str(IMGSZ), "--include", "onnx"], tmp_path, backend="oneflow")
    import re
    # OneFlow's own import-time notices (libibverbs, glog lines such as W20261123 ... CUDA driver) are not ours
    lines = [ln for ln in without_run_header(p.stderr) if ln.strip()
             and not ln.startswith(("YOLOv5 backend:", "libibverbs")) and not re.match(r"^[IWE]\d{8} ", ln)]
    assert p.returncode == 1 and len(lines) == 1 and "YOLO_BACKEND=torch" in lines[0], p.stderr[-3000:]
    assert "Traceback" not in p.stderr and not weights_copy.with_suffix(".onnx").exists()


@oneflow_only
def test_oneflow_pt_through_multibackend_equals_pytorch_onnx(weights_copy, coco128_dir, other_python, tmp_path):
    """Under OneFlow the .pt runs through DetectMultiBackend, and its output equals the ONNX model that the PyTorch
    environment exports from the same file, run here by OpenCV (--dnn), which needs neither framework."""
    from models.multibackend import DetectMultiBackend, ModelLoadError
    from utils.backend import from_numpy, to_numpy
    w = tmp_path / "yolov5n.pt"
    shutil.copy(weights_copy, w)
    other_python.run(f"import export; export.run(weights={str(w)!r}, imgsz=[{IMGSZ}], include=('onnx',))")
    x = _image(coco128_dir, IMGSZ)
    pt = DetectMultiBackend(str(w))
    assert pt.pt and pt.stride == 32 and pt.names[0] == "person" and not pt.fp16
    y = pt(from_numpy(x))
    assert isinstance(y, list) and len(y) == 2  # the eval-mode pair (predictions, raw maps), as under PyTorch
    dnn = DetectMultiBackend(str(w.with_suffix(".onnx")), dnn=True)
    assert dnn.names[0] == "person" and dnn.input_shape == (1, 3, IMGSZ, IMGSZ)  # metadata read without onnx
    ref = to_numpy(dnn(from_numpy(x)))
    assert ref[..., 4].max() > 0.3
    assert_outputs_close(to_numpy(y[0]), ref)
    from utils.errors import NeedsPyTorchError
    ts = tmp_path / "any.torchscript"
    ts.write_bytes(b"PK")  # never read: the PyTorch check comes first
    with pytest.raises(NeedsPyTorchError, match="PyTorch environment"):
        DetectMultiBackend(str(ts))
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        with pytest.raises(ModelLoadError, match="onnxruntime"):
            DetectMultiBackend(str(w.with_suffix(".onnx")))

