"""export.py and DetectMultiBackend on the official segmentation and classification checkpoints of ../shared
(yolov5n-seg-coco128.pt at 160 px, yolov5n-cls-coco128cls.pt at 128 px): the files, output names and shapes and
metadata as official export.py writes them, each format's outputs against the .pt model's, segment/ and classify/
val and predict on the exports with the .pt's figures, another task's model named in one line by every script, the
official import path of the classes, and hubconf. Under OneFlow: the .pt models through DetectMultiBackend against
the ONNX files the PyTorch environment exports, run by OpenCV (--dnn), which needs neither framework."""
import ast
import json
import logging
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
SEG, CLS = "yolov5n-seg-coco128", "yolov5n-cls-coco128cls"
SEG_IMG, CLS_IMG = 160, 128
SEG_ANCHORS = 3 * sum((SEG_IMG // s) ** 2 for s in (8, 16, 32))  # 1575 at 160 px
CLS_NAMES = ["bowl", "carrot", "chair", "cup", "donut", "elephant", "person", "potted_plant", "teddy_bear", "umbrella"]
FORMATS = (".torchscript", ".onnx", "_openvino_model")
torch_only = pytest.mark.skipif(not IS_TORCH, reason="exports run in the PyTorch environment")
oneflow_only = pytest.mark.skipif(IS_TORCH, reason="what OneFlow users see")


@pytest.fixture(scope="module")
def weights_dir(shared_dir, tmp_path_factory):
    """export.py writes beside the weights: copies, never into ../shared."""
    d = tmp_path_factory.mktemp("task_export")
    for stem in (SEG, CLS):
        shutil.copy(shared_dir / "weights" / f"{stem}.pt", d / f"{stem}.pt")
    return d


@pytest.fixture(scope="module")
def exported(weights_dir):
    if not IS_TORCH:
        pytest.skip("exports run in the PyTorch environment")
    import export
    for stem, size in ((SEG, SEG_IMG), (CLS, CLS_IMG)):
        files = export.run(weights=str(weights_dir / f"{stem}.pt"), imgsz=[size], include=("torchscript", "onnx",
                                                                                               "openvino"))
        assert [Path(f).name for f in files] == [f"{stem}{s}" for s in FORMATS]
    return weights_dir


@pytest.fixture(scope="module")
def seg_yaml(shared_dir, tmp_path_factory):
    """coco128-seg with its first 32 images to validate on (a list file, as data YAMLs take): seconds per run."""
    d = tmp_path_factory.mktemp("seg_data")
    images = sorted((shared_dir / "data" / "coco128-seg" / "images" / "train2017").glob("*.jpg"))[:32]
    (d / "val32.txt").write_text("".join(f"{p}\n" for p in images))
    names = (ROOT / "data" / "coco128-seg.yaml").read_text().split("names:", 1)[1]
    (d / "coco128-seg.yaml").write_text(f"path: {d}\ntrain: val32.txt\nval: val32.txt\nnames:{names}")
    return d / "coco128-seg.yaml"


@pytest.fixture
def log_text(caplog):
    """Everything the project logger prints during a test, as one string."""
    from utils.log import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True
    with caplog.at_level(logging.INFO, logger="yolov5"):
        yield lambda: caplog.text
    LOGGER.propagate = propagate


def _seg_input(shared_dir):
    """A real letterboxed image (giraffes) as the (1, 3, h, w) float32 array the models take."""
    from utils.augmentations import letterbox
    im0 = cv2.imread(str(shared_dir / "data" / "coco128" / "images" / "train2017" / "000000000025.jpg"))
    im = letterbox(im0, SEG_IMG, auto=False)[0].transpose(2, 0, 1)[::-1]
    return np.ascontiguousarray(im)[None].astype(np.float32) / 255


def _cls_input(shared_dir):
    from utils.classify.dataset import classify_transform
    im0 = cv2.imread(str(shared_dir / "data" / "coco128-cls" / "val" / "person" / os.listdir(
        shared_dir / "data" / "coco128-cls" / "val" / "person")[0]))
    return classify_transform(im0, CLS_IMG)[None]


def _outputs(model, x):
    """A DetectMultiBackend's outputs as a list of numpy arrays (a .pt segmentation model: its first two)."""
    from utils.backend import from_numpy, to_numpy
    y = model(from_numpy(x))
    y = list(y[:2]) if isinstance(y, (list, tuple)) else [y]
    return [to_numpy(v) for v in y]


def assert_seg_close(y, ref):
    """Boxes (pixels) to 1e-4 plus 2e-5 of their size, scores to 1e-4, raw mask coefficients and prototypes to 1e-3.
    Measured at 320 px on the giraffes: boxes within 1.1e-3 px of up to 458 px (1.2e-5 relative), scores 2.3e-6,
    coefficients 1.4e-5, prototypes 1.2e-5 (ONNX and OpenVINO; TorchScript is exact)."""
    assert [v.shape for v in y] == [v.shape for v in ref]
    np.testing.assert_allclose(y[0][..., :4], ref[0][..., :4], rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(y[0][..., 4:85], ref[0][..., 4:85], rtol=0, atol=1e-4)
    np.testing.assert_allclose(y[0][..., 85:], ref[0][..., 85:], rtol=0, atol=1e-3)
    np.testing.assert_allclose(y[1], ref[1], rtol=0, atol=1e-3)


# ---------------------------------------------------------------------------------------------------- the classes
def test_official_import_paths_of_the_task_classes():
    from models import common, tasks, yolo
    from models.common import Classify, Proto  # noqa: F401  (official models/common.py defines them)
    from models.yolo import ClassificationModel, Segment, SegmentationModel  # official models/yolo.py
    assert tasks.SegmentationModel is SegmentationModel and tasks.ClassificationModel is ClassificationModel
    assert tasks.Segment is Segment and tasks.Proto is common.Proto and tasks.Classify is common.Classify
    assert {"Segment", "Proto", "Classify"} <= set(yolo.MODULES)  # the -seg YAMLs parse without importing tasks
    # no import circle behind it: tests/test_utils/test_layers.py runs ../shared/tools/import_cycles.py


# ---------------------------------------------------------------------------------------------------- PyTorch
@torch_only
def test_segmentation_files_outputs_and_metadata_as_official(exported):
    import onnx
    from utils.backend import torch
    from utils.export.onnx_meta import read_onnx_info, read_onnx_outputs
    m = onnx.load(str(exported / f"{SEG}.onnx"))
    dims = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in (*m.graph.input, *m.graph.output)]
    assert [v.name for v in (*m.graph.input, *m.graph.output)] == ["images", "output0", "output1"]
    assert dims == [[1, 3, SEG_IMG, SEG_IMG], [1, SEG_ANCHORS, 5 + 80 + 32], [1, 32, SEG_IMG // 4, SEG_IMG // 4]]
    props = {p.key: p.value for p in m.metadata_props}
    assert set(props) == {"stride", "names"} and props["stride"] == "32"
    assert ast.literal_eval(props["names"])[79] == "toothbrush"
    assert read_onnx_info(exported / f"{SEG}.onnx") == (props, (1, 3, SEG_IMG, SEG_IMG))
    assert read_onnx_outputs(exported / f"{SEG}.onnx") == [("output0", 3), ("output1", 4)]  # what --dnn names

    extra = {"config.txt": ""}
    torch.jit.load(str(exported / f"{SEG}.torchscript"), _extra_files=extra)
    meta = json.loads(extra["config.txt"])
    assert meta["shape"] == [1, 3, SEG_IMG, SEG_IMG] and meta["stride"] == 32 and meta["names"]["0"] == "person"
    ov = exported / f"{SEG}_openvino_model"
    assert {p.name for p in ov.iterdir()} == {f"{SEG}.xml", f"{SEG}.bin", f"{SEG}.yaml"}


@torch_only
def test_classification_files_outputs_and_metadata_as_official(exported):
    import onnx
    m = onnx.load(str(exported / f"{CLS}.onnx"))
    assert [v.name for v in m.graph.output] == ["output0"]
    assert [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim] == [1, 10]
    props = {p.key: p.value for p in m.metadata_props}
    assert props["stride"] == "32" and list(ast.literal_eval(props["names"]).values()) == CLS_NAMES


@torch_only
@pytest.mark.parametrize("dnn", [False, True], ids=["runtimes", "opencv"])
def test_every_format_matches_the_pt_model(exported, shared_dir, dnn):
    from models.multibackend import DetectMultiBackend
    xs, xc = _seg_input(shared_dir), _cls_input(shared_dir)
    seg_ref = _outputs(DetectMultiBackend(str(exported / f"{SEG}.pt")), xs)
    cls_ref = _outputs(DetectMultiBackend(str(exported / f"{CLS}.pt")), xc)
    assert seg_ref[0][..., 4].max() > 0.2 and cls_ref[0].argmax() == CLS_NAMES.index("person")  # real outputs
    for suffix in ((".onnx",) if dnn else FORMATS):
        seg = DetectMultiBackend(str(exported / f"{SEG}{suffix}"), dnn=dnn)
        assert seg.task == "segment" and seg.stride == 32 and seg.names[0] == "person"
        assert_seg_close(_outputs(seg, xs), seg_ref)
        clf = DetectMultiBackend(str(exported / f"{CLS}{suffix}"), dnn=dnn)
        assert clf.task == "classify" and list(clf.names.values()) == CLS_NAMES
        y = _outputs(clf, xc)
        assert y[0].shape == (1, 10)
        np.testing.assert_allclose(y[0], cls_ref[0], rtol=0, atol=1e-4)  # measured: 2.2e-6 at 224 px


@torch_only
def test_dynamic_onnx_takes_other_batches_and_sizes(weights_dir, tmp_path):
    import onnxruntime

    import export
    w = tmp_path / f"{SEG}.pt"
    shutil.copy(weights_dir / f"{SEG}.pt", w)
    (f,) = export.run(weights=str(w), imgsz=[SEG_IMG], include=("onnx",), dynamic=True)
    session = onnxruntime.InferenceSession(f, providers=["CPUExecutionProvider"])
    assert [o.shape[0] for o in session.get_outputs()] == ["batch", "batch"]
    y0, y1 = session.run(None, {"images": np.zeros((2, 3, 96, 128), np.float32)})
    assert y0.shape == (2, 3 * (12 * 16 + 6 * 8 + 3 * 4), 117) and y1.shape == (2, 32, 24, 32)
    w = tmp_path / f"{CLS}.pt"
    shutil.copy(weights_dir / f"{CLS}.pt", w)
    (f,) = export.run(weights=str(w), imgsz=[CLS_IMG], include=("onnx",), dynamic=True)
    session = onnxruntime.InferenceSession(f, providers=["CPUExecutionProvider"])
    assert session.run(None, {"images": np.zeros((3, 3, 64, 96), np.float32)})[0].shape == (3, 10)


@torch_only
def test_other_formats_and_nms_refused_for_seg_and_cls_in_one_line(weights_dir, tmp_path, log_text):
    import export
    from utils.errors import UserError
    w = tmp_path / f"{SEG}.pt"
    shutil.copy(weights_dir / f"{SEG}.pt", w)
    written, failed, unavailable = export.export_checkpoint(w, imgsz=[SEG_IMG], include=("paddle", "torchscript"))
    assert [Path(f).name for f in written] == [f"{SEG}.torchscript"] and failed == ["paddle"] and not unavailable
    lines = [ln for ln in log_text().splitlines() if "PaddlePaddle" in ln]
    assert len(lines) == 1 and "segmentation models export to torchscript, onnx, openvino" in lines[0]
    assert not w.with_name(f"{SEG}_paddle_model").exists()
    with pytest.raises(UserError, match="--nms: .* is a segmentation model"):
        export.run(weights=str(w), imgsz=[SEG_IMG], include=("onnx",), nms=True)


@torch_only
@pytest.mark.slow  # two validations
def test_segment_val_on_exports_gives_the_pt_figures(exported, seg_yaml, tmp_path):
    """Exports take square batch-1 letterboxed images (official); the .pt model does as well with task='speed'
    (no rect batches). Measured on all 128 images at 320 px: .pt, TorchScript, ONNX and OpenVINO all box 0.0255
    0.1145 0.0432 0.0249, mask 0.0242 0.101 0.0349 0.0144."""
    from segment.val import run

    def figures(weights, task):
        results, _, _ = run(data=str(seg_yaml), weights=str(weights), imgsz=SEG_IMG, batch_size=1, device="cpu",
                            workers=1, plots=False, project=tmp_path, task=task)
        return np.array(results[:8])

    ref = figures(exported / f"{SEG}.pt", "speed")
    assert ref[2] > 0.005 and ref[6] > 0.005  # box and mask mAP50: the model finds objects at this size
    got = figures(exported / f"{SEG}.onnx", "val")  # forced to batch 1, as official, and its two outputs read
    assert np.abs(got - ref).max() <= 0.005, (got, ref)


@torch_only
@pytest.mark.parametrize("suffix", FORMATS)
def test_classify_val_on_exports_gives_the_pt_figures(exported, shared_dir, tmp_path, suffix):
    """Measured at 224 px: top-1 0.566, top-5 0.868 for the .pt and each export."""
    from classify.val import run

    def top(weights):
        top1, top5, _ = run(data=str(shared_dir / "data" / "coco128-cls"), weights=str(weights), imgsz=CLS_IMG,
                            batch_size=1, device="cpu", workers=1, project=tmp_path, verbose=False)
        return np.array([top1, top5])

    ref, got = top(exported / f"{CLS}.pt"), top(exported / f"{CLS}{suffix}")
    assert ref[0] > 0.3 and np.abs(got - ref).max() <= 0.005, (got, ref)


@torch_only
def test_predict_scripts_run_the_exports(exported, shared_dir, tmp_path):
    from classify.predict import run as classify_predict
    from segment.predict import run as segment_predict
    src = tmp_path / "images"
    src.mkdir()
    for stem in ("000000000025", "000000000030"):
        shutil.copy(shared_dir / "data" / "coco128" / "images" / "train2017" / f"{stem}.jpg", src)
    d = segment_predict(weights=str(exported / f"{SEG}.onnx"), source=str(src), imgsz=(SEG_IMG, SEG_IMG),
                        conf_thres=0.1, save_txt=True, project=tmp_path, name="seg", device="cpu")
    lines = (d / "labels" / "000000000025.txt").read_text().splitlines()
    assert lines and all(len(ln.split()) >= 7 and len(ln.split()) % 2 == 1 for ln in lines)  # class + polygon
    assert (d / "000000000025.jpg").is_file()
    tops = {}
    for suffix in (".pt", "_openvino_model"):
        d = classify_predict(weights=str(exported / f"{CLS}{suffix}"), source=str(src), imgsz=(CLS_IMG, CLS_IMG),
                             save_txt=True, project=tmp_path, name="cls", device="cpu")
        tops[suffix] = [(d / "labels" / f"{s}.txt").read_text() for s in ("000000000025", "000000000030")]
    assert tops[".pt"] == tops["_openvino_model"] and len(tops[".pt"][0].splitlines()) == 5


@torch_only
def test_each_script_names_the_scripts_of_another_tasks_model(exported, shared_dir):
    from utils.export.task_outputs import WrongTaskError
    from utils.inference import load_model
    cases = [(f"{SEG}{s}", "detect", "segment/val.py or segment/predict.py") for s in FORMATS] + \
            [(f"{CLS}{s}", "segment", "classify/val.py or classify/predict.py") for s in FORMATS] + \
            [(f"{SEG}.pt", "classify", "segment/val.py or segment/predict.py")]
    for name, task, scripts in cases:
        with pytest.raises(WrongTaskError, match=f"is a YOLOv5 .* model, not a .* model: run it with {scripts}$"):
            load_model(str(exported / name), device="cpu", task=task)
    with pytest.raises(WrongTaskError, match="yolov5n.pt is a YOLOv5 detection model, not a classification model: "
                                             "run it with val.py or detect.py"):
        load_model(str(shared_dir / "weights" / "yolov5n.pt"), device="cpu", task="classify")


def test_detection_scripts_name_seg_and_cls_checkpoints_while_the_loader_takes_them(weights_dir):
    """Both backends: val.py and detect.py (load_model, task 'detect') name the scripts of a seg or cls .pt in one
    line, while DetectMultiBackend itself loads any task's checkpoint, as official."""
    from models.multibackend import DetectMultiBackend
    from utils.errors import UserError
    from utils.inference import load_model
    for stem, scripts in ((SEG, "segment/val.py or segment/predict.py"),
                          (CLS, "classify/val.py or classify/predict.py")):
        with pytest.raises(UserError, match=f"not a YOLOv5 detection model .*run it with {scripts}"):
            load_model(str(weights_dir / f"{stem}.pt"), device="cpu")
    assert DetectMultiBackend(str(weights_dir / f"{SEG}.pt")).task == "segment"
    assert DetectMultiBackend(str(weights_dir / f"{CLS}.pt")).task == "classify"


def test_hubconf_returns_seg_and_cls_checkpoints_unwrapped(weights_dir, log_text):
    """Both backends: hubconf.custom on the .pt files gives the DetectMultiBackend around the task's model, with a
    warning instead of AutoShape (which post-processes detections), as official."""
    import hubconf
    from models.multibackend import DetectMultiBackend
    from models.yolo import ClassificationModel, SegmentationModel
    from utils.backend import to_numpy, torch
    seg = hubconf.custom(str(weights_dir / f"{SEG}.pt"), _verbose=False)
    assert isinstance(seg, DetectMultiBackend) and isinstance(seg.model, SegmentationModel) and seg.task == "segment"
    clf = hubconf.custom(str(weights_dir / f"{CLS}.pt"), autoshape=False, _verbose=False)
    assert isinstance(clf.model, ClassificationModel)
    assert to_numpy(clf(torch.zeros(1, 3, CLS_IMG, CLS_IMG))).shape == (1, 10)
    assert log_text().count("not AutoShape compatible") == 1  # the wrapped one, not the autoshape=False one


@torch_only
def test_hubconf_returns_exported_seg_and_cls_models_unwrapped(exported, log_text):
    import hubconf
    from models.autoshape import AutoShape
    clf = hubconf.custom(str(exported / f"{CLS}.onnx"), _verbose=False)
    assert not isinstance(clf, AutoShape) and clf.onnx and clf.task == "classify"
    seg = hubconf.custom(f"{exported / SEG}_openvino_model", _verbose=False)
    assert not isinstance(seg, AutoShape) and seg.xml and seg.task == "segment"
    assert log_text().count("not AutoShape compatible") == 2


@torch_only  # OneFlow runs the same code (--pt-only needs no export), slower
@pytest.mark.slow  # two validations
def test_benchmarks_validate_segmentation_with_its_mask_map_and_name_classifiers(weights_dir, seg_yaml, tmp_path,
                                                                                  monkeypatch):
    """benchmarks.py on a seg checkpoint runs segment/val.py (official): the .pt row's figure is the mask mAP50-95
    that segment/val.py gives on the same square images; a classifier is one line."""
    import importlib.util

    from segment.val import run as seg_val
    from utils.errors import UserError
    spec = importlib.util.spec_from_file_location("benchmarks_script", ROOT / "benchmarks.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "ROOT", tmp_path)  # its table and validations go to ROOT/runs/benchmarks
    table = bench.run(weights=weights_dir / f"{SEG}.pt", imgsz=SEG_IMG, data=seg_yaml, device="cpu", pt_only=True)
    results, _, _ = seg_val(data=str(seg_yaml), weights=str(weights_dir / f"{SEG}.pt"), imgsz=SEG_IMG, batch_size=1,
                            device="cpu", workers=1, plots=False, project=tmp_path, task="speed")
    row = table[table["Format"] == "PyTorch"].iloc[0]
    assert row["mAP50-95"] == round(float(results[7]), 4) and row["mAP50-95"] > 0
    with pytest.raises(UserError, match="a classification model; .*classify/val.py"):
        bench.run(weights=weights_dir / f"{CLS}.pt", imgsz=CLS_IMG, device="cpu", pt_only=True)


@torch_only
@pytest.mark.slow
def test_cli_export_and_detection_val_one_line(exported, tmp_path):
    """The whole export.py process on the seg checkpoint names segment/'s scripts; val.py given the export says in
    one line which scripts run it, exit 1."""
    w = tmp_path / f"{SEG}.pt"
    shutil.copy(exported / f"{SEG}.pt", w)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "export.py"), "--weights", str(w), "--img", str(SEG_IMG),
                        "--include", "onnx"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and f"python segment/predict.py --weights {w.with_suffix('.onnx')}" in out, out[-3000:]
    assert f"python segment/val.py --weights {w.with_suffix('.onnx')}" in out
    p = subprocess.run([sys.executable, str(ROOT / "val.py"), "--weights", str(w.with_suffix(".onnx")), "--img",
                        str(SEG_IMG), "--project", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=600)
    lines = [ln for ln in without_run_header(p.stderr) if ln.strip() and not ln.startswith("YOLOv5 backend:")]
    assert p.returncode == 1 and len(lines) == 1 and "run it with segment/val.py" in lines[0], p.stderr[-3000:]


# ---------------------------------------------------------------------------------------------------- OneFlow
@oneflow_only
def test_oneflow_pt_models_equal_pytorch_exports_run_by_opencv(weights_dir, shared_dir, other_python, tmp_path):
    from models.multibackend import DetectMultiBackend
    for stem in (SEG, CLS):
        shutil.copy(weights_dir / f"{stem}.pt", tmp_path / f"{stem}.pt")
    other_python.run("import export\n" + "\n".join(
        f"export.run(weights={str(tmp_path / f'{stem}.pt')!r}, imgsz=[{size}], include=('onnx',))"
        for stem, size in ((SEG, SEG_IMG), (CLS, CLS_IMG))))
    xs, xc = _seg_input(shared_dir), _cls_input(shared_dir)
    seg_pt = DetectMultiBackend(str(tmp_path / f"{SEG}.pt"))
    seg_dnn = DetectMultiBackend(str(tmp_path / f"{SEG}.onnx"), dnn=True)
    assert seg_pt.task == seg_dnn.task == "segment"
    ref = _outputs(seg_dnn, xs)
    assert ref[0][..., 4].max() > 0.2
    assert_seg_close(_outputs(seg_pt, xs), ref)
    cls_pt = DetectMultiBackend(str(tmp_path / f"{CLS}.pt"))
    cls_dnn = DetectMultiBackend(str(tmp_path / f"{CLS}.onnx"), dnn=True)
    assert cls_pt.task == cls_dnn.task == "classify" and list(cls_dnn.names.values()) == CLS_NAMES
    np.testing.assert_allclose(_outputs(cls_pt, xc)[0], _outputs(cls_dnn, xc)[0], rtol=0, atol=1e-4)
    from classify.val import run  # classify/val.py --dnn: the ONNX model's top-1/top-5 are the .pt model's
    tops = [run(data=str(shared_dir / "data" / "coco128-cls"), weights=str(tmp_path / f"{CLS}{suffix}"), dnn=dnn,
                imgsz=CLS_IMG, batch_size=1, device="cpu", workers=1, project=tmp_path / "runs", verbose=False)[:2]
            for suffix, dnn in ((".pt", False), (".onnx", True))]
    assert tops[0][0] > 0.3 and np.abs(np.subtract(*tops)).max() <= 0.005, tops


@oneflow_only
def test_oneflow_export_of_seg_points_to_pytorch(weights_dir):
    import export
    from utils.errors import NeedsPyTorchError
    with pytest.raises(NeedsPyTorchError, match="PyTorch environment"):
        export.run(weights=str(weights_dir / f"{SEG}.pt"), imgsz=[SEG_IMG], include=("onnx",))
    assert not (weights_dir / f"{SEG}.onnx").exists()
