"""TensorFlow SavedModel and TensorFlow Lite (fp32, fp16, int8), converted from ONNX by onnx2tf.

ultralytics rebuilds the network layer by layer in Keras 2, which ties it to tensorflow<=2.15 and numpy<2. onnx2tf
converts the ONNX graph that export.py already writes, and works with current TensorFlow and LiteRT; it runs in the
TensorFlow environment (`make setup-tf` builds .venv-tf, which also has PyTorch and this project's requirements).

The graphs follow the official TensorFlow exports, so either kind of file runs in either project: input NHWC float32
in [0, 1], output (batch, anchors, 5 + nc) with xywh normalised by the image width and height (an int8 tensor holding
pixels and probabilities in one scale would lose the probabilities). Written beside the weights:
    <stem>_saved_model/      SavedModel (+ metadata.yaml with stride and names)
    <stem>-fp16.tflite       the official TFLite file: fp16 weights, fp32 arithmetic
    <stem>-fp32.tflite       fp32 throughout
    <stem>-int8.tflite       with --int8: int8 weights and activations calibrated on --data images, float input/output
Each .tflite carries the metadata as ultralytics does (utils/export/tflite_meta.py). The conversion runs in a work
folder; export.py then installs the formats asked for (utils/export/install.py), so an export that fails, or that
asks for one of these formats only, leaves the others' earlier files as they were."""
import contextlib
import io
import os
import shutil
from copy import deepcopy
from pathlib import Path

import numpy as np

from utils.atomic_files import output_path
from utils.export.folder_meta import write_folder_meta
from utils.export.prepare import ExportError, Prepared
from utils.export.tflite_meta import append_tflite_metadata


def require_onnx2tf():
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up banner is not this tool's output
        import onnx2tf  # noqa: F401
        import tensorflow  # noqa: F401
    except ImportError as e:
        raise ExportError(f"TensorFlow exports need tensorflow and onnx2tf ({e}): build their environment with "
                          "`make setup-tf` and export with .venv-tf/bin/python export.py") from None
    return onnx2tf


def normalised_copy(prepared):
    """A copy of the export-mode model whose Detect layers output xywh divided by the input's (w, h), as the official
    TensorFlow models do. The grids were built for the export size by prepare()'s dry runs; dividing the per-level
    stride (made (w, h)-shaped) and the anchor grid scales both terms of xy = (2 sigmoid - 0.5 + cell) * stride and
    wh = (2 sigmoid)^2 * anchor_grid."""
    from models.yolo import Detect
    from utils.backend import torch
    model = deepcopy(prepared.model)
    h, w = prepared.im.shape[2:]
    for m in model.modules():
        if isinstance(m, Detect):
            scale = torch.tensor([w, h], dtype=m.stride.dtype, device=m.stride.device)
            m.stride = m.stride.view(-1, 1) / scale
            m.anchor_grid = [a / scale.to(a.dtype) for a in m.anchor_grid]
    return Prepared(model, prepared.im, prepared.output_shape, prepared.metadata)


def _onnx_for_tf(prepared, work, opset):
    from utils.export.to_onnx import export_onnx
    with contextlib.redirect_stdout(io.StringIO()):
        return export_onnx(normalised_copy(prepared), work / "model.pt", opset=min(opset, 17), simplify=True)


def sample_images(data, size, n):
    """n images (RGB, [0, 1], NHWC float32) from --data, else from the pictures in data/images."""
    from utils.export.calibration import calibration_images
    try:
        ims = calibration_images(data, size, n)
    except ExportError:
        ims = calibration_images(Path(__file__).resolve().parents[2] / "data" / "images", size, n)
    return np.concatenate([ims] * -(-n // len(ims)))[:n]  # repeated up to n when the set is smaller


HALF_REFUSAL = "TensorFlow exports are written in fp32 (TFLite's fp16 file is always written): drop --half"


def convert_tensorflow(prepared, work, int8=False, data=None, opset=17):
    """One onnx2tf conversion into the folder `work` (nothing beside the weights is touched; export.py installs
    what was asked for with utils/export/install.py) -> {'saved_model': folder (with metadata.yaml), 'fp16': file,
    'fp32': file, 'int8': file (with int8 only)}, each .tflite carrying the metadata."""
    onnx2tf = require_onnx2tf()
    if prepared.im.dtype != np.float32 and str(prepared.im.dtype) != "torch.float32":
        raise ExportError(HALF_REFUSAL)
    work = Path(work)
    onnx_file = _onnx_for_tf(prepared, work, opset)
    kwargs = {}
    if int8:
        from utils.export.calibration import calibration_images
        calib = calibration_images(data, tuple(prepared.im.shape[2:]))
        np.save(work / "calib.npy", calib)  # a work file of this conversion
        # mean 0, std 1: the images are already the model's input ([0, 1] RGB)
        kwargs = dict(output_integer_quantized_tflite=True, quant_type="per-channel",
                      custom_input_op_name_np_data_path=[["images", str(work / "calib.npy"), [[[[0, 0, 0]]]],
                                                          [[[[1, 1, 1]]]]]])
    # onnx2tf checks its layout choices on 20 sample images it downloads unless the working folder has them: give
    # it pictures from --data (else the project's own), as that file's shape
    samples = sample_images(data, (128, 128), 20)
    np.save(work / "calibration_image_sample_data_20x128x128x3_float32.npy", samples)
    with contextlib.chdir(work):
        onnx2tf.convert(input_onnx_file_path=str(onnx_file), output_folder_path=str(work / "tf"),
                        not_use_onnxsim=True, output_signaturedefs=True, verbosity="error", **kwargs)
    out = work / "tf"
    converted = {}
    for key, name in (("fp32", "model_float32.tflite"), ("fp16", "model_float16.tflite"),
                      ("int8", "model_integer_quant.tflite")):
        src = out / name
        if src.exists() and (key != "int8" or int8):
            dst = work / f"{key}.tflite"
            shutil.move(str(src), dst)
            append_tflite_metadata(dst, prepared.metadata)
            converted[key] = dst
    for f in out.glob("*.tflite"):  # the other quantised variants onnx2tf writes alongside (work files)
        f.unlink()
    write_folder_meta(out, prepared.metadata)
    converted["saved_model"] = out
    return converted


def export_graphdef(saved_model, file):
    """<stem>.pb: the SavedModel's serving function with its variables frozen to constants, input 'x:0' as the
    official GraphDef (ultralytics' loader feeds x:0)."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    model = tf.saved_model.load(str(saved_model))
    fn = model.signatures["serving_default"]
    spec = fn.structured_input_signature[1]
    (name, s), = spec.items()

    @tf.function(input_signature=[tf.TensorSpec(s.shape, s.dtype, name="x")])
    def serve(x):
        return list(fn(**{name: x}).values())[0]

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    f = file.with_suffix(".pb")
    with output_path(f) as tmp:
        tf.io.write_graph(frozen.graph.as_graph_def(), str(tmp.parent), tmp.name, as_text=False)
    return f
