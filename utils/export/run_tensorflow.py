"""Running TensorFlow exports (SavedModel, GraphDef .pb, TFLite) for DetectMultiBackend: NCHW float32 numpy in,
[predictions (batch, anchors, 5 + nc) with xywh in pixels] out. The graphs take NHWC images and give xywh normalised
by the image size, as the official TensorFlow exports do (utils/export/to_tensorflow.py), so official files run too.
TFLite runs on LiteRT (ai-edge-litert), tflite-runtime or TensorFlow, whichever is installed."""
import os
from pathlib import Path

import numpy as np

from utils.export.folder_meta import read_folder_meta, stride_and_names
from utils.export.tflite_meta import read_tflite_metadata


def _to_pixels(y, h, w):
    y = np.array(y, dtype=np.float32)  # a writable copy
    y[..., :4] *= np.array([w, h, w, h], dtype=np.float32)
    return y


def _import_tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    return tf


class SavedModelRunner:
    def __init__(self, w):
        tf = _import_tensorflow()
        self.tf = tf
        self.model = tf.saved_model.load(str(w))
        self.fn = self.model.signatures["serving_default"]
        (self.input_name, spec), = self.fn.structured_input_signature[1].items()
        b, h, wd, c = spec.shape
        self.input_shape = (b, c, h, wd) if None not in (b, h, wd, c) else None
        self.stride, self.names = stride_and_names(read_folder_meta(Path(w) / "metadata.yaml"))

    def __call__(self, x):
        h, w = x.shape[2:]
        out = self.fn(**{self.input_name: self.tf.constant(x.transpose(0, 2, 3, 1))})
        return [_to_pixels(v.numpy(), h, w) for v in out.values()][:1]


class GraphDefRunner:
    """A frozen GraphDef with input x:0 (the official name and this project's); its outputs are the nodes nothing
    else reads."""

    def __init__(self, w):
        tf = _import_tensorflow()
        self.tf = tf
        gd = tf.compat.v1.GraphDef()
        with open(w, "rb") as f:
            gd.ParseFromString(f.read())
        consumed = {i.split(":")[0].lstrip("^") for n in gd.node for i in n.input}
        outputs = [f"{n.name}:0" for n in gd.node if n.name not in consumed and n.op not in ("NoOp", "Const")]
        wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(gd, name=""), [])
        ge = wrapped.graph.as_graph_element
        self.fn = wrapped.prune(ge("x:0"), [ge(o) for o in outputs])
        shape = ge("x:0").shape
        self.input_shape = None
        if shape.rank == 4 and None not in shape.as_list():
            b, h, wd, c = shape.as_list()
            self.input_shape = (b, c, h, wd)
        p = Path(w)  # no metadata in a .pb: export.py leaves it in the SavedModel folder beside it
        self.stride, self.names = stride_and_names(read_folder_meta(p.with_name(f"{p.stem}_saved_model") /
                                                                   "metadata.yaml"))

    def __call__(self, x):
        h, w = x.shape[2:]
        y = self.fn(self.tf.constant(x.transpose(0, 2, 3, 1)))
        return [_to_pixels(y[0].numpy(), h, w)]


def _tflite_interpreter():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            from tflite_runtime.interpreter import Interpreter
        except ImportError:
            Interpreter = _import_tensorflow().lite.Interpreter
    return Interpreter


class TFLiteRunner:
    def __init__(self, w):
        self.interpreter = _tflite_interpreter()(model_path=str(w))
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.outputs = self.interpreter.get_output_details()
        b, h, wd, c = self.input["shape"]
        self.input_shape = (int(b), int(c), int(h), int(wd))
        meta = read_tflite_metadata(w)
        self.stride, self.names = (int(meta["stride"]), meta["names"]) if meta else (32, None)

    def __call__(self, x):
        h, w = x.shape[2:]
        im = x.transpose(0, 2, 3, 1)
        dtype = self.input["dtype"]
        if dtype in (np.int8, np.uint8):  # a fully quantised model (official --int8 files take uint8)
            scale, zero = self.input["quantization"]
            im = np.clip(np.round(im / scale + zero), np.iinfo(dtype).min, np.iinfo(dtype).max)
        self.interpreter.set_tensor(self.input["index"], np.ascontiguousarray(im, dtype=dtype))
        self.interpreter.invoke()
        y = []
        for o in self.outputs:
            v = self.interpreter.get_tensor(o["index"])
            if o["dtype"] in (np.int8, np.uint8):
                scale, zero = o["quantization"]
                v = (v.astype(np.float32) - zero) * scale
            y.append(v)
        y = sorted(y, key=lambda v: v.ndim)  # predictions (3-d) first, as for segmentation models' (pred, proto)
        return [_to_pixels(y[0], h, w)]
