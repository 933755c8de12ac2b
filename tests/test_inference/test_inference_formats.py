"""Every weights form a YOLOv5 user hands to the hub and the inference loader: export folders by name (OpenVINO runs,
the others say in one line which runtime they need), an ONNX graph OpenCV's DNN module cannot read (one line with
the way out), detect.py --visualize (feature maps) and --update (weights stripped), and inference models with
requires_grad off (0 gradients, as ultralytics reports)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from utils.backend import BACKEND, IS_TORCH, from_numpy, torch

ROOT = Path(__file__).resolve().parents[2]
STILL_LIFE = ROOT / "data" / "images" / "still_life.jpg"
torch_only = pytest.mark.skipif(not IS_TORCH, reason="exports and torch.hub run in the PyTorch environment")


@pytest.fixture(scope="module")
def openvino_export(yolov5n_pt, tmp_path_factory):
    """A 64 px OpenVINO export of yolov5n.pt (seconds), in a folder of its own."""
    pytest.importorskip("openvino")
    d = tmp_path_factory.mktemp("ov")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    import export
    export.run(weights=str(d / "yolov5n.pt"), imgsz=[64], include=("openvino",))
    assert (d / "yolov5n_openvino_model").is_dir()
    return d


@torch_only
def test_torch_hub_loads_an_openvino_folder_as_export_prints_it(openvino_export):
    """The line export.py prints: torch.hub.load('.', 'custom', '<name>_openvino_model', source='local'), by the
    absolute path it prints and by the bare folder name from the working folder. In a process of its own: torch.hub
    imports hubconf and the project's modules a second time, and the OpenVINO runtime loaded that way crashed the
    test process later (SIGSEGV in an unrelated test's subprocess start)."""
    code = f"""
import sys, torch
from models.common import AutoShape
for path in ({str(openvino_export / 'yolov5n_openvino_model')!r}, 'yolov5n_openvino_model'):
    m = torch.hub.load({str(ROOT)!r}, 'custom', path, source='local', _verbose=False)
    assert isinstance(m, AutoShape) and m.model.xml and m.names[0] == 'person', (type(m), m.names[0])
    r = m({str(STILL_LIFE)!r}, size=64)
    assert str(r).splitlines()[0].startswith('image 1/1: 1080x810'), str(r)
    assert r.xyxy[0].shape[1] == 6
print('hub ok')
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=openvino_export, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0 and "hub ok" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]


@torch_only
def test_two_openvino_models_leave_the_process_able_to_take_signals(openvino_export):
    """OpenVINO's CPU plugin swaps the thread's signal stack on each compile and puts back a freed one when two models
    are destroyed in the order they were made; the next SIGCHLD (handled on that stack under PyTorch's DataLoader
    handler) was then a SIGSEGV (utils/inference/format_loader.py keeps compiled models for the process's life)."""
    code = f"""
import gc, subprocess, sys, torch
from models.multibackend import DetectMultiBackend
a = DetectMultiBackend({str(openvino_export / 'yolov5n_openvino_model')!r})
b = DetectMultiBackend({str(openvino_export / 'yolov5n_openvino_model')!r})
del a, b
gc.collect()
loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2, num_workers=2)  # installs the SIGCHLD handler
assert [x.tolist() for x in loader] == [[0, 1], [2, 3]]
for _ in range(3):
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # each exit is a SIGCHLD
print('signals ok')
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0 and "signals ok" in p.stdout, (p.returncode, p.stdout[-2000:] + p.stderr[-3000:])


@torch_only
def test_hubconf_custom_openvino_matches_the_pt_at_its_size(openvino_export, yolov5n_pt):
    import hubconf
    ov = hubconf.custom(path=str(openvino_export / "yolov5n_openvino_model"), _verbose=False)
    pt = hubconf.custom(path=str(yolov5n_pt), _verbose=False)
    x = from_numpy(np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32))
    with torch.no_grad():
        a, b = ov(x), pt(x)
    b = b[0] if isinstance(b, (list, tuple)) else b  # a .pt model in eval mode may give (predictions, maps)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("name,runtime", [("m_saved_model", "tensorflow"), ("m_ncnn_model", "ncnn"),
                                          ("m_paddle_model", "paddle"), ("m_web_model", "tensorflowjs"),
                                          ("m.tflite", "ai_edge_litert"), ("m.engine", "tensorrt"),
                                          ("m.pb", "tensorflow"), ("m.mlpackage", "coremltools")])
def test_other_formats_by_name_say_their_runtime_in_one_line(tmp_path, name, runtime):
    import importlib.util

    from models.multibackend import DetectMultiBackend, ModelLoadError
    p = tmp_path / name
    p.mkdir() if "." not in name else p.write_bytes(b"\0")
    with pytest.raises(ModelLoadError) as e:
        DetectMultiBackend(str(p))
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and f"the {runtime} runtime" in msg and ".onnx" in msg
    if importlib.util.find_spec(runtime) is None:
        assert "not installed in this environment" in msg


def test_hubconf_finds_export_folders_and_says_what_it_takes(tmp_path, monkeypatch):
    import hubconf
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m_saved_model").mkdir()
    assert hubconf.find_weights("m_saved_model") == tmp_path / "m_saved_model"
    (tmp_path / "plain_folder").mkdir()
    with pytest.raises(hubconf.WeightsNotFoundError, match=r"\*_openvino_model/"):
        hubconf.find_weights("plain_folder")  # a folder that is no export: not taken for weights


def test_dnn_on_an_onnx_opencv_cannot_read_is_one_line(tmp_path):
    from models.multibackend import DetectMultiBackend, ModelLoadError
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07not a graph")
    with pytest.raises(ModelLoadError) as e:
        DetectMultiBackend(str(bad), dnn=True)
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg and "--dnn" in msg and "without --dynamic" in msg
    assert "onnxruntime" in msg


def test_opencv_refusal_names_the_node():
    """What OpenCV 4.x raises on ultralytics' own ONNX export of yolov5n.pt (its Floor nodes), turned into one line."""
    import cv2

    from utils.inference.format_loader import _opencv_refusal
    e = cv2.error("OpenCV(4.11.0) onnx_importer.cpp:1058: error: (-2:Unspecified error) in function 'handleNode'\n"
                  "> Node [Floor@ai.onnx]:(onnx_node!/model.11/Floor) parse error: OpenCV(4.11.0) ...")
    msg = _opencv_refusal("yolov5n.onnx", e)
    assert "\n" not in msg and "its Floor node" in msg and "export.py" in msg


def test_inference_model_reports_zero_gradients(yolov5n_pt, caplog):
    import logging

    from models.multibackend import DetectMultiBackend
    from utils.general import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True
    try:
        with caplog.at_level(logging.INFO, logger="yolov5"):
            m = DetectMultiBackend(str(yolov5n_pt))
    finally:
        LOGGER.propagate = propagate
    assert not any(p.requires_grad for p in m.parameters())
    summaries = [r.getMessage() for r in caplog.records if "summary:" in r.getMessage()]
    assert summaries and all(" 0 gradients" in s for s in summaries), summaries  # the fused summary only


def test_feature_visualization_files(tmp_path):
    from utils.plots import feature_visualization
    x = from_numpy(np.arange(2 * 12 * 5 * 6, dtype=np.float32).reshape(2, 12, 5, 6))
    f = feature_visualization(x, "models.common.C3", 4, n=32, save_dir=tmp_path)
    assert f == tmp_path / "stage4_C3_features.png" and f.stat().st_size > 0
    np.testing.assert_array_equal(np.load(tmp_path / "stage4_C3_features.npy"), x.numpy()[0])  # first image
    assert feature_visualization(x, "models.yolo.Detect", 24, save_dir=tmp_path) is None  # the head: skipped
    assert feature_visualization(x[:, :, :1], "Conv", 5, save_dir=tmp_path) is None  # 1-pixel maps: skipped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage4_C3_features.npy", "stage4_C3_features.png"]


def test_visualize_reaches_every_layer(monkeypatch):
    """DetectMultiBackend(visualize=folder) -> the model draws each layer's output with its index and type."""
    import models.yolo as yolo
    from models.yolo import DetectionModel
    calls = []
    monkeypatch.setattr(yolo, "feature_visualization", lambda x, t, i, save_dir: calls.append((t, i, save_dir)))
    model = DetectionModel(ROOT / "models" / "yolov5n.yaml").eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, 64, 64), visualize="here")
        assert [c[1] for c in calls] == list(range(len(model.model)))
        assert calls[0] == ("Conv", 0, "here") and calls[-1][0] == "Detect"
        calls.clear()
        model(torch.zeros(1, 3, 64, 64))
    assert calls == []


@pytest.mark.oneflow_covered_by("tests/test_inference/test_inference_formats.py::test_visualize_reaches_every_layer")
@pytest.mark.slow
def test_detect_visualize_and_update(yolov5n_pt, tmp_path):
    """detect.py --visualize writes stage{i}_{module}_features.png/.npy per layer into <run>/<image stem>/, and
    --update rewrites the weights stripped (EMA as the model, fp16, no optimizer, epoch -1)."""
    w = tmp_path / "w.pt"
    shutil.copy(yolov5n_pt, w)
    env = {"YOLO_BACKEND": BACKEND, "YOLO_QUIET": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"}
    p = subprocess.run([sys.executable, str(ROOT / "detect.py"), "--weights", str(w), "--img", "64", "--source",
                        str(STILL_LIFE), "--project", str(tmp_path / "runs"), "--visualize", "--update"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    maps = tmp_path / "runs" / "exp" / "still_life"
    pngs = sorted(f.name for f in maps.glob("*.png"))
    assert "stage0_Conv_features.png" in pngs and "stage23_C3_features.png" in pngs and len(pngs) == 24
    assert np.load(maps / "stage0_Conv_features.npy").shape == (16, 32, 32)  # yolov5n's first conv at 64 px
    assert f"Optimizer stripped from {w}" in p.stdout + p.stderr
    from utils.checkpoint import load_checkpoint
    ck = load_checkpoint(w, tensors=False, build_models=False)
    assert ck["epoch"] == -1 and ck["optimizer"] is None and ck["ema"] is None and ck["model"] is not None


@pytest.mark.slow
def test_dnn_on_a_dynamic_export_runs_or_says_one_line(yolov5n_pt, tmp_path, other_python):
    """A --dynamic ONNX export (made in the PyTorch environment) under --dnn: it runs where this environment's
    OpenCV reads it (OpenCV 5), else it is the one-line refusal (OpenCV 4.x, the OneFlow environment's), never a
    cv2.error."""
    import cv2

    from models.multibackend import DetectMultiBackend, ModelLoadError
    w = tmp_path / "yolov5n.pt"
    shutil.copy(yolov5n_pt, w)
    python = sys.executable if IS_TORCH else other_python.python
    code = f"import export; export.run(weights={str(w)!r}, imgsz=[64], include=('onnx',), dynamic=True)"
    env = {"YOLO_BACKEND": "torch", "YOLO_QUIET": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    onnx = w.with_suffix(".onnx")
    try:
        cv2.dnn.readNetFromONNX(str(onnx))
        readable = True
    except cv2.error:
        readable = False
    if readable:
        m = DetectMultiBackend(str(onnx), dnn=True)
        assert tuple(m(from_numpy(np.zeros((1, 3, 64, 64), np.float32))).shape) == (1, 252, 85)
    else:
        with pytest.raises(ModelLoadError) as e:
            DetectMultiBackend(str(onnx), dnn=True)
        assert "\n" not in str(e.value) and "without --dynamic" in str(e.value)
