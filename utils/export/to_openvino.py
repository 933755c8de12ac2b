"""OpenVINO IR (<stem>_openvino_model/<stem>.xml + .bin + <stem>.yaml metadata), converted from an ONNX file, as
ultralytics does. The IR is built in a temporary folder and its files renamed into the model folder on success
(utils/atomic_files.output_folder): a failed conversion leaves the earlier folder as it was, and files a user put
in the folder stay."""
import sys

import yaml

from utils.atomic_files import output_folder, write_text
from utils.export.prepare import ExportError

INT8_REFUSAL = "--int8 OpenVINO export needs nncf and a calibration dataset, not available here; export without --int8"


def import_openvino():
    """The OpenVINO runtime without its conversion tools: importing openvino.tools.ovc sends a usage event over the
    network unless a consent file says no, and this project sends and downloads nothing. The runtime reads ONNX
    itself, so those tools are not needed."""
    if "openvino" not in sys.modules:
        blocked = "openvino.tools.ovc" not in sys.modules
        if blocked:
            sys.modules["openvino.tools.ovc"] = None  # makes openvino's own optional import of it fail quietly
        try:
            import openvino  # noqa: F401  (optional dependency)
        finally:
            if blocked:
                del sys.modules["openvino.tools.ovc"]
    import openvino  # optional dependency: the PyTorch environment installs it
    return openvino


def export_openvino(file, metadata, half=False, int8=False, onnx_file=None):
    """-> <stem>_openvino_model/ beside file, converted from onnx_file (default: <stem>.onnx beside file)."""
    if int8:  # export.py refuses it before writing anything; kept for direct callers
        raise ExportError(INT8_REFUSAL)
    try:
        ov = import_openvino()
    except ImportError as e:
        raise ExportError(f"OpenVINO export needs the openvino package ({e}): pip install openvino") from None
    d = file.with_name(f"{file.stem}_openvino_model")
    ov_model = ov.Core().read_model(str(onnx_file or file.with_suffix(".onnx")))
    with output_folder(d) as tmp:
        ov.save_model(ov_model, str(tmp / f"{file.stem}.xml"), compress_to_fp16=half)
        write_text(tmp / f"{file.stem}.yaml", yaml.safe_dump(metadata, sort_keys=False))
    return d
