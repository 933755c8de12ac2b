"""PaddlePaddle inference model (<stem>_paddle_model/), converted from the ONNX file by x2paddle, as ultralytics does
(it converts from PyTorch through x2paddle's tracer; the ONNX route is x2paddle's maintained one). Runs in the
TensorFlow/converters environment (`make setup-tf`), which has paddlepaddle and x2paddle.

x2paddle 1.6 (its latest) reads two names that onnx 1.19 removed: onnx.version.version and onnx.mapping's
TENSOR_TYPE_TO_NP_TYPE; both are supplied from their current equivalents while it runs.

x2paddle works in a temporary folder; its inference model is installed into <stem>_paddle_model/ only when complete
(utils/atomic_files.output_folder), so a failed conversion leaves the earlier folder as it was."""
import contextlib
import io
import shutil
import sys
import tempfile
import types
from pathlib import Path

from utils.atomic_files import output_folder
from utils.export.folder_meta import write_folder_meta
from utils.export.prepare import ExportError


@contextlib.contextmanager
def _onnx_names_x2paddle_reads():
    import onnx
    saved = {k: getattr(onnx, k, None) for k in ("version", "mapping")}
    saved_module = sys.modules.get("onnx.mapping")
    if saved["version"] is None:
        onnx.version = types.SimpleNamespace(version=onnx.__version__)
    if saved_module is None and saved["mapping"] is None:
        table = {0: onnx.helper.tensor_dtype_to_np_dtype(onnx.TensorProto.FLOAT)}  # UNDEFINED: value infos that
        # the exporter left untyped; x2paddle only sizes them
        for code in onnx.TensorProto.DataType.values():
            with contextlib.suppress(Exception):
                table[code] = onnx.helper.tensor_dtype_to_np_dtype(code)
        mapping = types.ModuleType("onnx.mapping")
        mapping.TENSOR_TYPE_TO_NP_TYPE = table
        sys.modules["onnx.mapping"] = onnx.mapping = mapping
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None and hasattr(onnx, k):
                delattr(onnx, k)
        if saved_module is None:
            sys.modules.pop("onnx.mapping", None)


def _strip_unit_dilations(onnx_file):
    """x2paddle refuses any MaxPool with a dilations attribute; PyTorch's exporter writes dilations=[1, 1] (the
    default, so dropping it changes nothing)."""
    import onnx
    model = onnx.load(str(onnx_file))
    for node in model.graph.node:
        if node.op_type == "MaxPool":
            keep = [a for a in node.attribute if not (a.name == "dilations" and all(v == 1 for v in a.ints))]
            del node.attribute[:]
            node.attribute.extend(keep)
    onnx.save(model, str(onnx_file))


def export_paddle(prepared, file):
    """-> <stem>_paddle_model/ (inference_model files + metadata.yaml)."""
    try:
        from x2paddle.convert import onnx2paddle
    except ImportError as e:
        raise ExportError(f"PaddlePaddle export needs x2paddle and paddlepaddle ({e}): build their environment with "
                          "`make setup-tf` and export with .venv-tf/bin/python export.py") from None
    if "tensorflow" in sys.modules:
        raise ExportError("PaddlePaddle crashes in a process that has loaded TensorFlow: export paddle on its own or "
                          "first (export.py does)")
    from utils.export.to_onnx import export_onnx
    d = file.with_name(f"{file.stem}_paddle_model")
    with tempfile.TemporaryDirectory(prefix="yolo-x2paddle-") as tmp:
        work = Path(tmp)
        with _onnx_names_x2paddle_reads(), contextlib.redirect_stdout(io.StringIO()):
            onnx_file = export_onnx(prepared, work / "model.pt", opset=12, simplify=True)  # x2paddle maps opsets <= 15
            _strip_unit_dilations(onnx_file)
            onnx2paddle(str(onnx_file), str(work), convert_to_lite=False, disable_feedback=True)  # feedback: a web call
        inference = work / "inference_model"
        if not inference.is_dir():
            raise ExportError("x2paddle wrote no inference model (its log above says why)")
        with output_folder(d) as out:
            shutil.copytree(inference, out, dirs_exist_ok=True)
            write_folder_meta(out, prepared.metadata, prepared.im)  # x2paddle's graph reshapes to the export batch
    return d
