"""The formats of the converters' environment (.venv-tf, `make setup-tf`): CoreML, TensorFlow SavedModel, GraphDef,
TFLite (fp32, fp16, int8), TF.js, PaddlePaddle, NCNN; their runners in DetectMultiBackend; benchmarks.py.

The framework-free parts (TFLite metadata, names, calibration images, benchmarks.py's --hard-fail) run under both
backends. The conversions run in .venv-tf as subprocesses, once, from the PyTorch suite; they skip while that
environment is missing (it is built on request: about 6 GB)."""
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from utils.backend import IS_TORCH

ROOT = Path(__file__).resolve().parents[2]
TF_PY = ROOT / ".venv-tf" / "bin" / "python"
IMGSZ = 128
# CI builds .venv-tf and sets YOLO_REQUIRE_TF_ENV=1: there a missing environment fails these tests instead of
# skipping them
TF_REQUIRED = os.environ.get("YOLO_REQUIRE_TF_ENV") == "1"
needs_tf_env = pytest.mark.skipif(not IS_TORCH or not (TF_PY.exists() or TF_REQUIRED),
                                  reason="the converters' environment .venv-tf is missing (make setup-tf); its tests "
                                         "run once, from the PyTorch suite")


def _benchmarks_script():
    """benchmarks.py itself (the name `benchmarks` is the package of benchmark scripts)."""
    spec = importlib.util.spec_from_file_location("benchmarks_script", ROOT / "benchmarks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------------ framework-free
def test_tflite_metadata_round_trip_and_files_without_it(tmp_path):
    from utils.export.tflite_meta import append_tflite_metadata, read_tflite_metadata
    body = b"\x1c\x00\x00\x00TFL3" + bytes(range(256)) * 4  # stands for the flatbuffer: left byte for byte
    f = tmp_path / "m.tflite"
    f.write_bytes(body)
    assert read_tflite_metadata(f) is None
    meta = {"stride": 32, "names": {0: "person", 1: "bicycle"}}
    append_tflite_metadata(f, meta)
    assert f.read_bytes().startswith(body)
    assert read_tflite_metadata(f) == meta


@pytest.mark.parametrize("name,kind", [("yolov5n-fp16.tflite", "tflite"), ("yolov5n-int8.tflite", "tflite"),
                                       ("yolov5n_edgetpu.tflite", "edgetpu"), ("yolov5n_saved_model", "saved_model"),
                                       ("yolov5n.pb", "pb"), ("yolov5n_web_model", "tfjs"),
                                       ("yolov5n_paddle_model", "paddle"), ("yolov5n_ncnn_model", "ncnn"),
                                       ("yolov5n.mlpackage", "coreml")])
def test_export_names_are_recognised(name, kind):
    from utils.export.formats import model_type
    flags = model_type(name)
    assert [k for k, v in flags.items() if v] == [kind]


def test_calibration_images_are_letterboxed_rgb_in_unit_range(tmp_path):
    from utils.export.calibration import calibration_images
    from utils.export.prepare import ExportError
    blue = np.zeros((60, 100, 3), np.uint8)
    blue[..., 0] = 255  # BGR blue
    for i in range(3):
        cv2.imwrite(str(tmp_path / f"{i}.png"), blue)
    ims = calibration_images(tmp_path, (64, 64), n=2)
    assert ims.shape == (2, 64, 64, 3) and ims.dtype == np.float32
    assert ims[0, 32, 32].tolist() == [0, 0, 1]  # RGB: the blue channel last
    assert abs(ims[0, 0, 32, 0] - 114 / 255) < 1e-6  # the letterbox's grey border above the wide image
    with pytest.raises(ExportError) as e:
        calibration_images(tmp_path / "empty.yaml", (64, 64))
    assert "\n" not in str(e.value) and "--int8" in str(e.value)
    for i in range(3, 101):  # 101 images: the official export calibrates on the first 100
        cv2.imwrite(str(tmp_path / f"{i}.png"), blue[:4, :4])
    assert calibration_images(tmp_path, (8, 8)).shape == (100, 8, 8, 3)


def test_benchmarks_hard_fail_flags_and_floor():
    import pandas as pd
    b = _benchmarks_script()
    assert b.parse_opt([]).hard_fail is False
    assert b.parse_opt(["--hard-fail"]).hard_fail is True
    assert b.parse_opt(["--hard-fail", "0.25"]).hard_fail == "0.25"
    with pytest.raises(SystemExit):
        b.parse_opt(["--hard-fail", "high"])
    table = pd.DataFrame([["PyTorch", 4.1, 0.29, 10.0], ["CoreML", 7.8, None, None], ["ONNX", 7.6, 0.28, 8.0]],
                         columns=b.COLUMNS)
    b._hard_fail(table, ["CoreML: CoreML inference needs macOS (export only)"], "0.25", test=False)  # passes
    with pytest.raises(b.BenchmarkFailure, match="ONNX 0.28"):
        b._hard_fail(table, [], "0.285", test=False)
    with pytest.raises(b.BenchmarkFailure, match="NCNN"):
        b._hard_fail(table, ["NCNN: export failed"], True, test=False)


@pytest.mark.slow
@pytest.mark.skipif(not IS_TORCH, reason="exports run in the PyTorch environment")
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is not None, reason="this environment has TensorFlow")
def test_converter_formats_outside_their_environment_say_so_in_one_line(yolov5n_pt, tmp_path):
    shutil.copy(yolov5n_pt, tmp_path / "yolov5n.pt")
    p = subprocess.run([str(Path(os.sys.executable)), str(ROOT / "export.py"), "--weights", "yolov5n.pt", "--img",
                        "64", "--include", "saved_model", "torchscript"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout + p.stderr
    assert p.returncode == 1 and (tmp_path / "yolov5n.torchscript").is_file(), out[-3000:]
    lines = [ln for ln in out.splitlines() if "SavedModel" in ln and "failure" in ln]
    assert len(lines) == 1 and "make setup-tf" in lines[0], out[-3000:]
    assert "Traceback" not in out and not (tmp_path / "yolov5n_saved_model").exists()


# ------------------------------------------------------------------------------------------------ in .venv-tf
def _tf_env_run(args, cwd, timeout=1200):
    env = {**os.environ, "YOLO_BACKEND": "torch", "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([str(TF_PY), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


CALIBRATION_IMAGES = 16  # int8 calibration set: the export took 33 s with 16 images, 45 s with the default 100


@pytest.fixture(scope="module")
def coco128_yaml(coco128_dir, tmp_path_factory):
    """coco128 with a training list of its first CALIBRATION_IMAGES images."""
    d = tmp_path_factory.mktemp("data")
    import yaml
    with open(ROOT / "data" / "coco128.yaml") as y:
        names = yaml.safe_load(y)["names"]
    images = sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:CALIBRATION_IMAGES]
    (d / "calibration.txt").write_text("".join(f"{f}\n" for f in images))
    with open(d / "coco128.yaml", "w") as y:
        yaml.safe_dump({"path": str(coco128_dir), "train": str(d / "calibration.txt"), "val": "images/train2017",
                        "names": names}, y)
    return d / "coco128.yaml"


@pytest.fixture(scope="module")
def converted(yolov5n_pt, coco128_yaml, tmp_path_factory):
    """Every converter format of yolov5n.pt at 128 px, int8 calibrated on 16 coco128 images: one export.py run in
    .venv-tf."""
    assert TF_PY.exists(), f"YOLO_REQUIRE_TF_ENV=1 and {TF_PY} is missing: build it with `make setup-tf`"
    d = tmp_path_factory.mktemp("converted")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    p = _tf_env_run([str(ROOT / "export.py"), "--weights", "yolov5n.pt", "--img", str(IMGSZ), "--include", "coreml",
                     "saved_model", "pb", "tflite", "tfjs", "paddle", "ncnn", "--int8", "--data", str(coco128_yaml)],
                    cwd=d)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "failure" not in out, out[-4000:]
    return d


@needs_tf_env
@pytest.mark.slow
def test_export_writes_every_converter_format(converted):
    expected = ["yolov5n.mlpackage", "yolov5n_saved_model/saved_model.pb", "yolov5n_saved_model/metadata.yaml",
                "yolov5n.pb", "yolov5n-fp32.tflite", "yolov5n-fp16.tflite", "yolov5n-int8.tflite",
                "yolov5n_web_model/model.json", "yolov5n_web_model/group1-shard1of1.bin",
                "yolov5n_paddle_model/model.pdiparams", "yolov5n_paddle_model/metadata.yaml",
                "yolov5n_ncnn_model/model.ncnn.param", "yolov5n_ncnn_model/model.ncnn.bin"]
    missing = [f for f in expected if not (converted / f).exists()]
    assert not missing
    sizes = {f: (converted / f).stat().st_size for f in ("yolov5n-fp32.tflite", "yolov5n-fp16.tflite",
                                                           "yolov5n-int8.tflite")}
    # 1.87 M parameters: about 7.5 MB in fp32, half in fp16, a quarter in int8
    assert sizes["yolov5n-fp16.tflite"] < 0.6 * sizes["yolov5n-fp32.tflite"]
    assert sizes["yolov5n-int8.tflite"] < 0.35 * sizes["yolov5n-fp32.tflite"]


PARITY = r'''
import json, sys
import cv2, numpy as np
from utils.augmentations import letterbox
from models.multibackend import DetectMultiBackend
from utils.backend import from_numpy, to_numpy, torch
d, image, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
im = letterbox(cv2.imread(image), size, auto=False)[0].transpose(2, 0, 1)[::-1]
x = from_numpy(np.ascontiguousarray(im)[None].astype(np.float32) / 255)
with torch.no_grad():
    ref = to_numpy(DetectMultiBackend(f"{d}/yolov5n.pt")(x)[0])
out = {}
# Paddle first: it cannot load into a process that has TensorFlow (PaddleRunner says so)
for name in ("yolov5n_paddle_model", "yolov5n_ncnn_model", "yolov5n_saved_model", "yolov5n.pb", "yolov5n-fp32.tflite",
             "yolov5n-fp16.tflite", "yolov5n-int8.tflite"):
    m = DetectMultiBackend(f"{d}/{name}")
    y = to_numpy(m(x))
    top = int(ref[0, :, 4].argmax())
    (ax, ay, aw, ah), (bx, by, bw, bh) = y[0, top, :4], ref[0, top, :4]
    inter = max(0, min(ax + aw / 2, bx + bw / 2) - max(ax - aw / 2, bx - bw / 2)) * \
        max(0, min(ay + ah / 2, by + bh / 2) - max(ay - ah / 2, by - bh / 2))
    out[name] = dict(shape=list(y.shape), box=float(np.abs(y[..., :4] - ref[..., :4]).max()),
                     score=float(np.abs(y[..., 4:] - ref[..., 4:]).max()), stride=m.stride, name0=m.names[0],
                     top_iou=float(inter / (aw * ah + bw * bh - inter)),
                     top_cls=[int(y[0, top, 5:].argmax()), int(ref[0, top, 5:].argmax())])
from utils.export.to_tfjs import read_tfjs_graph
from utils.export.run_tensorflow import GraphDefRunner
gd, meta = read_tfjs_graph(__import__("pathlib").Path(d) / "yolov5n_web_model")
open(f"{d}/tfjs_roundtrip.pb", "wb").write(gd.SerializeToString())
a = GraphDefRunner(f"{d}/yolov5n.pb")(to_numpy(x))[0]
b = GraphDefRunner(f"{d}/tfjs_roundtrip.pb")(to_numpy(x))[0]
out["tfjs"] = dict(diff=float(np.abs(a - b).max()), meta=meta)
import coremltools as ct
spec = ct.models.MLModel(f"{d}/yolov5n.mlpackage", skip_model_load=True).get_spec()
out["coreml"] = dict(inputs=[i.name for i in spec.description.input], meta=dict(spec.description.metadata.userDefined))
print("RESULT" + json.dumps(out))
'''


@needs_tf_env
@pytest.mark.slow
def test_exports_run_in_detectmultibackend_like_the_pt(converted, coco128_dir):
    """The same giraffe through each runtime against the .pt: fp32 graphs within 0.05 px and 1e-3 in the scores
    (onnx2tf and x2paddle reorder float sums); fp16 and NCNN within 0.5 px and 0.01; int8 keeps the most confident
    anchor's class, its box overlapping the .pt's by IoU > 0.8."""
    image = coco128_dir / "images" / "train2017" / "000000000025.jpg"
    p = _tf_env_run(["-c", PARITY, str(converted), str(image), str(IMGSZ)], cwd=ROOT)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    r = json.loads(p.stdout.split("RESULT", 1)[1])
    for name, v in r.items():
        if name in ("tfjs", "coreml"):
            continue
        assert v["shape"] == [1, 3 * (16 ** 2 + 8 ** 2 + 4 ** 2), 85] and v["stride"] == 32, (name, v)
        assert v["name0"] == "person", (name, v)
        assert v["top_cls"][0] == v["top_cls"][1], (name, v)
        if "int8" in name:  # its xywh were within 5.5 px of the .pt's at 128 px when measured
            assert v["top_iou"] > 0.8, (name, v)
        elif "fp16" in name or "ncnn" in name:  # ncnn's CPU kernels approximate exp (sigmoid): 0.15 px, 1.6e-3
            assert v["box"] < 0.5 and v["score"] < 1e-2, (name, v)
        else:
            assert v["box"] < 0.05 and v["score"] < 1e-3, (name, v)
    assert r["tfjs"]["diff"] == 0 and r["tfjs"]["meta"]["names"]["0"] == "person"
    assert r["coreml"]["inputs"] == ["image"] and r["coreml"]["meta"]["stride"] == "32"
