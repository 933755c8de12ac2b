"""DetectMultiBackend: the one loader every inference path runs models through (utils.inference.load_model for
val.py, detect.py, Detector and the segment/ and classify/ scripts; hubconf.py for AutoShape).

    model = DetectMultiBackend("yolov5n.onnx", device=torch.device("cpu"))
    pred = model(im)          # im (b, 3, h, w) float in [0, 1] -> decoded predictions (b, anchors, 5 + nc)
    model.stride, model.names, model.pt, model.jit, model.onnx, model.fp16
    model.task                # 'detect', 'segment' or 'classify': what the model does, from its outputs

Segmentation models give a list [predictions (b, anchors, 5 + nc + nm), prototypes (b, nm, h/4, w/4)] (a .pt model
in eval mode also its raw maps, as official), classifiers their logits (b, nc). A .pt file of any task loads, as
official (build_model=models.from_record.build_model, which load_model passes for detection's scripts, takes
detection checkpoints only and names the others' scripts).

Formats (file names as export.py writes them):
    *.pt                  this project's or ultralytics' checkpoints, under either backend
    *.torchscript         needs the PyTorch environment (torch.jit)
    *.onnx                onnxruntime, or OpenCV's DNN module with dnn=True
    *_openvino_model/     the OpenVINO runtime
    *_saved_model/, *.pb, *.tflite, *_paddle_model/, *_ncnn_model/
                          TensorFlow, LiteRT, Paddle Inference, ncnn (utils/export/run_*.py), where installed: the
                          converters' environment (make setup-tf, .venv-tf) has them all
The runtimes that take numpy arrays (onnxruntime, OpenCV DNN, OpenVINO) work under either backend: tensors go out
and come back through utils.backend's numpy bridge. Only the PyTorch environment installs onnxruntime and
openvino (requirements.txt); under OneFlow an .onnx model runs with dnn=True (--dnn, OpenCV; its metadata is read
by utils/export/onnx_meta.py, which needs no onnx package), or after `pip install onnxruntime`. The other
formats (TensorRT, Edge TPU, CoreML, TF.js, Triton) get one line saying what runs them.
"""
import ast
import importlib.util
import json
import re
from pathlib import Path

import cv2
import numpy as np

from models.experimental import attempt_load
from models.from_record import build_any_model
from models.model_config import MAX_NC
from models.tasks import model_task
from utils.backend import cuda_available, from_numpy, is_cuda, nn, require_pytorch, select_device, to_numpy, torch
from utils.errors import UserError
from utils.export.formats import FLAGS, FORMATS, RUN_HERE, RUNNERS, RUNTIMES, model_type
from utils.export.onnx_meta import read_onnx_info, read_onnx_outputs
from utils.export.task_outputs import task_from_ranks
from utils.export.to_openvino import import_openvino
from utils.yaml_files import describe, read_yaml

# OpenVINO's CPU plugin installs a signal stack (sigaltstack) for the thread that compiles a model and puts back the
# one it replaced when the model is destroyed; with two models destroyed in the order they were made, the thread is
# left with the freed stack of the first, and the next signal handled on it (SIGCHLD from a finished subprocess under
# PyTorch's DataLoader handler, a fault under faulthandler) kills the process with SIGSEGV. Seen with openvino
# 2026.4 in the test suite (two models loaded by one test, a subprocess run by a later one). Compiled models are
# therefore kept for the process's life: a few MB each, and processes load one or, in benchmarks.py, a handful.
_OPENVINO_KEPT = []


class ModelLoadError(UserError):
    pass


def _names_dict(names, source="the model"):
    """Class names as {int: str}, from a list or dict of at most MAX_NC names stored with a model; else one line."""
    if isinstance(names, (list, tuple)):
        names = dict(enumerate(names))
    if isinstance(names, dict):  # JSON metadata (TorchScript) keeps the class indices as text
        names = {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in names.items()}
    if (not isinstance(names, dict) or len(names) > MAX_NC or
            not all(isinstance(k, int) and isinstance(v, (str, int)) for k, v in names.items())):
        raise ModelLoadError(f"{source}: class names {describe(names)} are not a list or dict of at most "
                             f"{MAX_NC:,} names; re-export the model with export.py.")
    return {int(k): str(v) for k, v in names.items()}


def onnx_file_info(w):
    """(stride, names or None, static input shape or None) of an .onnx file, read without the onnx package; a
    damaged file or metadata is one ModelLoadError line, and so is a graph exported with --nms."""
    try:
        meta, shape = read_onnx_info(w)
    except ValueError as e:
        raise ModelLoadError(f"--weights {w}: {e}; re-export it with export.py --include onnx") from None
    _refuse_nms_graph(w, meta)
    shape = shape if shape and all(isinstance(d, int) and d > 0 for d in shape) else None
    if "stride" in meta:
        return _stride(meta["stride"], w), _literal_names(meta.get("names"), w), shape
    return 32, None, shape


def _first_line(e):
    return " ".join(str(e).split())[:160]


def _stride(v, source):
    try:
        x = float(v) if isinstance(v, (int, float, str)) and not isinstance(v, bool) else 0.0
    except ValueError:
        x = 0.0
    if not (x.is_integer() and 1 <= x <= 1024):
        raise ModelLoadError(f"{source}: stride {describe(v)} is not a whole number of pixels; re-export the model.")
    return int(x)


def _literal_names(text, source="ONNX metadata"):
    """Class names stored as a Python literal (ONNX metadata): read with ast.literal_eval, which evaluates no code."""
    try:
        names = ast.literal_eval(text) if isinstance(text, str) and len(text) < (1 << 20) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        names = None
    return _names_dict(names, source)


def _no_runtime_here(w, kind):
    """One line for a format this loader does not run: what its runtime is, whether it is installed, the way on."""
    use = "use a .pt, .torchscript, .onnx or *_openvino_model export instead"
    if kind == "triton":
        return f"--weights {w}: Triton Inference Server models are not run by this project; {use}"
    label = "NCNN" if kind == "ncnn" else FORMATS[FLAGS.index(kind)][0]
    module, how = RUNTIMES[kind]
    if importlib.util.find_spec(module) is None:
        return (f"--weights {w}: {label} models need the {module} runtime, not installed in this environment ({how}); "
                f"{use}")
    return f"--weights {w}: {label} models are not run by this project yet (its {module} runtime is installed); {use}"


def _opencv_refusal(w, e):
    """One line for an ONNX graph OpenCV's DNN module cannot read or run (e.g. the Floor nodes of ultralytics'
    own exports, or the shape arithmetic of any --dynamic export), with the two ways on."""
    node = re.search(r"Node \[(\w+)@", str(e))
    what = f"its {node.group(1)} node" if node else str(e).strip().splitlines()[-1][:120]
    return (f"--weights {w}: OpenCV's DNN module (--dnn) cannot run this ONNX graph ({what}). Export it again with "
            "this project's export.py without --dynamic (python export.py --weights <model>.pt --include onnx), or "
            "run it with onnxruntime (pip install onnxruntime; drop --dnn)")


def _refuse_nms_graph(w, meta):
    """A model exported with --nms gives final detections (utils/export/nms_graph.py), not the predictions val.py and
    detect.py post-process: say so in one line."""
    if str(meta.get("nms", "")).lower() == "true":
        raise ModelLoadError(f"--weights {w}: exported with --nms, so it outputs final detections (N, 7) [image, x1, "
                             "y1, x2, y2, score, class] for deployment; val.py and detect.py run the export without "
                             "--nms")


def _openvino_refusal(w, xml, e):
    """One line for an OpenVINO model its runtime cannot read (a cut .xml or .bin, a missing .bin): which file, and
    the runtime's own reason (the last line of its message; the lines before it name C++ source files)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    reason = next((ln for ln in reversed(lines) if not ln.startswith(("Exception from", "Check '"))), type(e).__name__)
    weights = xml.with_suffix(".bin")
    if not weights.is_file():
        culprit = f"{weights} is missing"
    elif "bin" in reason.lower() or "weights" in reason.lower():
        culprit = f"{weights} is damaged or incomplete"
    else:
        culprit = f"{xml} is damaged or incomplete"
    return (f"--weights {w}: OpenVINO cannot load it: {culprit} ({reason[:200]}); export it again with export.py "
            "--include openvino")


class DetectMultiBackend(nn.Module):
    def __init__(self, weights="yolov5s.pt", device=None, dnn=False, data=None, fp16=False, fuse=True,
                 build_model=build_any_model):
        """build_model: how a .pt checkpoint's stored model is rebuilt (the task's Task.build_model)."""
        super().__init__()
        w = str(weights[0] if isinstance(weights, (list, tuple)) else weights)
        flags = model_type(w)
        for k, v in flags.items():
            setattr(self, k, v)
        self.dnn = bool(dnn) and self.onnx
        self.nhwc = False  # every format run here takes (b, c, h, w)
        if device is None or isinstance(device, str):  # '', 'cpu', '0' as --device takes them
            device = select_device("cpu" if device is None else device)
        self.device = device
        cuda = is_cuda(device) and cuda_available()
        # fp16 only where it runs (CUDA); ONNX and OpenVINO take the precision the file was exported with
        self.fp16 = bool(fp16) and cuda and (self.pt or self.jit)
        self.w, self.weights, self.data, self.fuse = w, weights, data, fuse
        self.model, self.input_shape, stride, names = None, None, 32, None
        self.task = "detect"  # the runners' formats (TensorFlow, Paddle, NCNN) are exported from detection models
        if not self.pt and not flags["triton"] and not Path(w).exists():
            raise ModelLoadError(f"--weights {w}: not found; export it first (python export.py --weights <model>.pt "
                                 "--include onnx torchscript) or check the path")
        kind = next(k for k in (*FLAGS, "ncnn", "triton") if flags[k])
        self.runner = None  # the runtime of a TensorFlow, Paddle or NCNN export (utils/export/run_*.py)
        if kind not in RUN_HERE and kind not in RUNNERS:
            raise ModelLoadError(_no_runtime_here(w, kind))

        if self.pt:
            model = attempt_load(weights if isinstance(weights, (list, tuple)) else w, device=device, inplace=True,
                                 fuse=fuse, build_model=build_model)
            stride = max(int(model.stride.max()), 32)
            names = model.module.names if hasattr(model, "module") else model.names
            model.half() if self.fp16 else model.float()
            self.model = model  # a submodule, so .to(), .half() and .eval() reach it
            self.task = model_task(model)
        elif self.jit:
            stride, names = self._load_torchscript(w, device)
        elif self.dnn:
            stride, names = self._load_opencv_dnn(w)
        elif self.onnx:
            stride, names = self._load_onnxruntime(w, cuda)
        elif self.xml:
            stride, names = self._load_openvino(w)
        elif kind in RUNNERS:
            stride, names = self._load_runner(w, kind)
        # the classes the model itself says it has (an export's metadata; None: its names come from --data below)
        self.stored_nc = None if names is None else len(_names_dict(names))
        if names is None:
            names = self._names_from_data(data)
        self.stride = int(stride)
        self.names = _names_dict(names)

    # ------------------------------------------------------------------------------------------------ loaders
    def _load_torchscript(self, w, device):
        pytorch = require_pytorch(f"{w}: a TorchScript model")
        extra_files = {"config.txt": ""}
        try:
            self.model = pytorch.jit.load(w, _extra_files=extra_files, map_location=device)
        except (RuntimeError, ValueError, OSError) as e:  # a damaged or foreign file
            raise ModelLoadError(f"--weights {w}: not a TorchScript model this PyTorch loads ({_first_line(e)}); "
                                 "re-export it with export.py --include torchscript") from None
        self.model.half() if self.fp16 else self.model.float()
        stride_names = self._torchscript_meta(w, extra_files["config.txt"])
        self.task = self._torchscript_task(pytorch, device)
        return stride_names

    def _torchscript_meta(self, w, config):
        if not config:
            return 32, None
        try:
            d = json.loads(config)
        except ValueError:
            d = None
        if not isinstance(d, dict):
            raise ModelLoadError(f"--weights {w}: its config.txt is not the JSON export.py writes; re-export it.")
        self.input_shape = tuple(d["shape"]) if isinstance(d.get("shape"), list) else None
        return _stride(d.get("stride"), w), _names_dict(d.get("names"), w)

    def _torchscript_task(self, pytorch, device):
        """From the traced graph's return type: detection returns a 1-tuple, segmentation a 2-tuple (predictions,
        prototypes). A bare tensor is a classifier's logits, or the predictions of an export older than the
        1-tuple: one forward pass on zeros of the recorded input shape tells them apart by rank."""
        t = next(self.model.graph.outputs()).type()
        if t.kind() == "TupleType":
            return task_from_ranks([None] * len(t.elements()))
        if not self.input_shape:
            return "detect"
        im = pytorch.zeros(*self.input_shape, device=device, dtype=pytorch.float16 if self.fp16 else pytorch.float32)
        with pytorch.no_grad():
            return task_from_ranks([self.model(im).dim()])

    def _load_onnxruntime(self, w, cuda):
        try:
            import onnxruntime  # optional dependency: the PyTorch environment installs it
        except ImportError:
            raise ModelLoadError(f"--weights {w}: ONNX models need onnxruntime, not installed in this environment: "
                                 "pip install onnxruntime (the PyTorch environment has it), or pass --dnn to run it "
                                 "with OpenCV") from None
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
        providers = [p for p in providers if p in onnxruntime.get_available_providers()]
        try:
            self.session = onnxruntime.InferenceSession(w, providers=providers)
        except Exception as e:  # noqa: BLE001 (onnxruntime's own error types: a damaged or foreign file)
            raise ModelLoadError(f"--weights {w}: onnxruntime cannot load it ({_first_line(e)}); re-export it with "
                                 "export.py --include onnx") from None
        self.output_names = [x.name for x in self.session.get_outputs()]
        self.task = task_from_ranks(None if x.shape is None else len(x.shape) for x in self.session.get_outputs())
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.input_shape = tuple(inp.shape) if all(isinstance(d, int) for d in inp.shape) else None
        self.input_dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        meta = self.session.get_modelmeta().custom_metadata_map
        _refuse_nms_graph(w, meta)
        if "stride" in meta:
            return _stride(meta["stride"], w), _literal_names(meta.get("names"), w)
        return 32, None

    def _load_opencv_dnn(self, w):
        # silent (level 0): a graph it cannot read is reported below in one line, not in OpenCV's log as well
        log = cv2 if hasattr(cv2, "setLogLevel") else cv2.utils.logging  # OpenCV 4 / OpenCV 5
        level = log.getLogLevel()
        log.setLogLevel(0)
        try:
            self.net = cv2.dnn.readNetFromONNX(w)
        except cv2.error as e:
            raise ModelLoadError(_opencv_refusal(w, e)) from None
        finally:
            log.setLogLevel(level)
        self.input_dtype = np.float32
        stride, names, self.input_shape = onnx_file_info(w)
        try:
            outputs = read_onnx_outputs(w)  # OpenCV's forward() gives the first output only: name them all
        except ValueError as e:
            raise ModelLoadError(f"--weights {w}: {e}; re-export it with export.py --include onnx") from None
        self.output_names = [name for name, _ in outputs]
        self.task = task_from_ranks(rank for _, rank in outputs)
        return stride, names

    def _load_openvino(self, w):
        try:
            ov = import_openvino()
        except ImportError:
            raise ModelLoadError(f"--weights {w}: OpenVINO models need the openvino package, not installed in this "
                                 "environment: pip install openvino (the PyTorch environment has it)") from None
        p = Path(w)
        xml = p if p.is_file() else next(p.glob("*.xml"), None)
        if xml is None:
            raise ModelLoadError(f"--weights {w}: no .xml model in this folder; export it with export.py --include "
                                 "openvino")
        core = ov.Core()
        try:
            ov_model = core.read_model(model=str(xml), weights=str(xml.with_suffix(".bin")))
        except Exception as e:  # noqa: BLE001 (OpenVINO raises RuntimeError with its C++ check's text)
            raise ModelLoadError(_openvino_refusal(w, xml, e)) from None
        shape = ov_model.inputs[0].get_partial_shape()
        self.input_shape = tuple(d.get_length() for d in shape) if shape.is_static else None
        ranks = (o.get_partial_shape().rank for o in ov_model.outputs)
        self.task = task_from_ranks(r.get_length() if r.is_static else None for r in ranks)
        # f32 asked for: on CPUs with AMX or AVX512-BF16 (these machines) the CPU plugin otherwise runs in bf16, and
        # the boxes then move by up to a pixel against the PyTorch model's
        try:
            self.ov_compiled_model = core.compile_model(ov_model, device_name="CPU",
                                                        config={"INFERENCE_PRECISION_HINT": "f32"})
        except Exception as e:  # noqa: BLE001 (a graph that parsed but does not compile: damaged or foreign)
            raise ModelLoadError(_openvino_refusal(w, xml, e)) from None
        _OPENVINO_KEPT.append(self.ov_compiled_model)
        self.input_dtype = np.float32
        meta = xml.with_suffix(".yaml")
        if meta.exists():
            d = read_yaml(meta, what="OpenVINO metadata", error=ModelLoadError)
            _refuse_nms_graph(w, d)
            return _stride(d.get("stride"), meta), _names_dict(d.get("names"), meta)
        return 32, None

    def _load_runner(self, w, kind):
        import importlib
        module, cls = RUNNERS[kind]
        try:
            self.runner = getattr(importlib.import_module(module), cls)(w)
        except ImportError:
            raise ModelLoadError(_no_runtime_here(w, kind)) from None
        except (FileNotFoundError, OSError, ValueError) as e:  # a folder or file the runtime cannot read
            raise ModelLoadError(f"--weights {w}: {str(e).strip().splitlines()[0]}") from None
        self.input_shape = self.runner.input_shape
        self.input_dtype = np.float32
        return self.runner.stride, self.runner.names

    @staticmethod
    def _names_from_data(data):
        if data and Path(data).is_file():
            from utils.dataset_config import DatasetError, _normalize_names
            d = read_yaml(data, what="--data", error=DatasetError)
            if d.get("names") is not None:
                return _normalize_names(d, data)
        return {i: f"class{i}" for i in range(999)}

    # ------------------------------------------------------------------------------------------------ inference
    def forward(self, im, augment=False, visualize=False):
        """im (b, 3, h, w) float in [0, 1] on self.device -> the model's output: for .pt the eval-mode pair
        [decoded predictions, raw maps] (export mode: the predictions), else the decoded predictions tensor."""
        if self.fp16 and im.dtype != torch.float16:
            im = im.half()
        if self.pt:
            y = self.model(im, augment=augment, visualize=visualize) if augment or visualize else self.model(im)
        elif self.jit:
            try:
                y = self.model(im)
            except RuntimeError:  # a traced graph holds its export size; say so instead of a broadcast error
                if self.input_shape and tuple(im.shape[2:]) != tuple(self.input_shape[2:]):
                    self._shape_error(im)
                raise
        else:
            self._check_shape(im)
            x = np.ascontiguousarray(to_numpy(im), dtype=self.input_dtype)  # runtimes want NCHW, not channels_last
            if self.input_shape and self.input_shape[0] == 1 and x.shape[0] > 1:  # a batch-1 export: one at a time
                y = [np.concatenate(parts, 0) for parts in zip(*(self._run_numpy(x[j:j + 1]) for j in range(len(x))))]
            else:
                y = self._run_numpy(x)
        if isinstance(y, (list, tuple)):
            return self._from_numpy(y[0]) if len(y) == 1 else [self._from_numpy(v) for v in y]
        return self._from_numpy(y)

    def _run_numpy(self, x):
        """A numpy batch through the ONNX/OpenVINO runtime -> list of numpy outputs."""
        if self.dnn:
            self.net.setInput(x)
            try:
                return [self.net.forward()] if len(self.output_names) < 2 else \
                    list(self.net.forward(self.output_names))
            except cv2.error as e:
                raise ModelLoadError(_opencv_refusal(self.w, e)) from None
        if self.onnx:
            return self.session.run(self.output_names, {self.input_name: x})
        if self.runner is not None:
            return self.runner(x)
        return list(self.ov_compiled_model(x).values())

    def _check_shape(self, im):
        """A static exported model takes one input shape (batch 1 models take larger batches one image at a time);
        say which instead of the runtime's error."""
        b = self.input_shape[0] if self.input_shape else None
        if self.input_shape and (tuple(im.shape[1:]) != tuple(self.input_shape[1:]) or b not in (1, im.shape[0])):
            self._shape_error(im)

    def _shape_error(self, im):
        b, _, h, w = self.input_shape
        raise ModelLoadError(f"{self.w} was exported for input shape {list(self.input_shape)} and got "
                                 f"{list(im.shape)}: run it with --imgsz {h} {w} and batch size {b}, or export it "
                                 "again with --dynamic")

    def _from_numpy(self, x):
        if isinstance(x, np.ndarray):
            return from_numpy(x.astype(np.float32, copy=False)).to(self.device)
        return x

    def warmup(self, imgsz=(1, 3, 640, 640)):
        """One forward pass (two for TorchScript, whose first calls optimise the graph) on a GPU, so the first
        image is not timed with the start-up work. Nothing on the CPU, as ultralytics."""
        if (self.pt or self.jit or self.onnx) and self.device.type != "cpu":
            im = torch.empty(*imgsz, dtype=torch.half if self.fp16 else torch.float, device=self.device)
            for _ in range(2 if self.jit else 1):
                self.forward(im)

