"""The export formats of ultralytics/yolov5: their --include names, file suffixes, and which of them this project
writes and runs. No framework import: the multi-backend loader asks it which format a weights path is."""
from pathlib import Path
from urllib.parse import urlparse


# (format, --include argument, suffix of the file or folder written beside the weights, CPU, GPU), official order
FORMATS = (
    ("PyTorch", "-", ".pt", True, True),
    ("TorchScript", "torchscript", ".torchscript", True, True),
    ("ONNX", "onnx", ".onnx", True, True),
    ("OpenVINO", "openvino", "_openvino_model", True, False),
    ("TensorRT", "engine", ".engine", False, True),
    ("CoreML", "coreml", ".mlpackage", True, False),
    ("TensorFlow SavedModel", "saved_model", "_saved_model", True, True),
    ("TensorFlow GraphDef", "pb", ".pb", True, True),
    ("TensorFlow Lite", "tflite", ".tflite", True, False),
    ("TensorFlow Edge TPU", "edgetpu", "_edgetpu.tflite", False, False),
    ("TensorFlow.js", "tfjs", "_web_model", False, False),
    ("PaddlePaddle", "paddle", "_paddle_model", True, True),
)
# NCNN is not in the official table (export_formats() keeps that table); export.py writes it with --include ncnn
NCNN_FORMAT = ("NCNN", "ncnn", "_ncnn_model", True, False)
# export.py writes these: the first three in the PyTorch environment, the others in the converters' one (make setup-tf)
WRITTEN_HERE = ("torchscript", "onnx", "openvino", "coreml", "saved_model", "pb", "tflite", "tfjs", "paddle", "ncnn")
CONVERTER_FORMATS = WRITTEN_HERE[3:]
RUN_HERE = ("pt", "jit", "onnx", "xml")  # DetectMultiBackend runs these itself
# and these through a runner class (NCHW numpy in, predictions in pixels out), each where its runtime is installed
RUNNERS = {
    "saved_model": ("utils.export.run_tensorflow", "SavedModelRunner"),
    "pb": ("utils.export.run_tensorflow", "GraphDefRunner"),
    "tflite": ("utils.export.run_tensorflow", "TFLiteRunner"),
    "paddle": ("utils.export.run_paddle", "PaddleRunner"),
    "ncnn": ("utils.export.run_ncnn", "NCNNRunner"),
}
# What each other format needs to run: (the module that would run it, how to get it). DetectMultiBackend names it in
# one line when a model of that format is given. NCNN (Tencent's runtime, `*_ncnn_model/` as ultralytics names the
# folder) is not an official yolov5 format; its folder is recognised by name all the same.
RUNTIMES = {
    "engine": ("tensorrt", "an NVIDIA GPU and pip install tensorrt"),
    "coreml": ("coremltools", "macOS and pip install coremltools"),
    "saved_model": ("tensorflow", "make setup-tf builds .venv-tf with it; or pip install tensorflow"),
    "pb": ("tensorflow", "make setup-tf builds .venv-tf with it; or pip install tensorflow"),
    "tflite": ("ai_edge_litert", "make setup-tf builds .venv-tf with it; or pip install ai-edge-litert"),
    "edgetpu": ("tflite_runtime", "an Edge TPU, its libedgetpu and pip install tflite-runtime"),
    "tfjs": ("tensorflowjs", "a JavaScript runtime: TF.js models run in the browser or Node.js, not in Python"),
    "paddle": ("paddle", "make setup-tf builds .venv-tf with it; or pip install paddlepaddle"),
    "ncnn": ("ncnn", "make setup-tf builds .venv-tf with it; or pip install ncnn"),
}
NCNN_SUFFIX = "_ncnn_model"
# DetectMultiBackend's flag names, in FORMATS order (plus triton, a server URL, last), as the official class has them
FLAGS = ("pt", "jit", "onnx", "xml", "engine", "coreml", "saved_model", "pb", "tflite", "edgetpu", "tfjs", "paddle")


def format_name(argument):
    return next(f[0] for f in (*FORMATS, NCNN_FORMAT) if f[1] == argument)


def model_type(path):
    """Which format a weights path is, by its name: a dict of FLAGS (plus 'ncnn', 'triton') to bool, one True.
    The official rule is a substring match on the file name (so '_edgetpu.tflite' is not also 'tflite'); a bare
    OpenVINO .xml file counts as OpenVINO too. A name that matches no format is read as a checkpoint (pt): the
    checkpoint reader looks at the content and names the file when it is not one."""
    p = str(path)
    name = Path(p).name
    types = [suffix in name for _, _, suffix, _, _ in FORMATS]
    types[FLAGS.index("tflite")] &= not types[FLAGS.index("edgetpu")]
    types[FLAGS.index("xml")] |= name.endswith(".xml")
    flags = dict(zip(FLAGS, types))
    flags["ncnn"] = NCNN_SUFFIX in name  # beyond the official table (see RUNTIMES)
    url = urlparse(p)
    flags["triton"] = not (any(types) or flags["ncnn"]) and url.scheme in ("http", "https", "grpc") and bool(url.netloc)
    if not any(flags.values()):
        flags["pt"] = True
    return flags
