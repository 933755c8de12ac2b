"""OpenVINO IR (<stem>_openvino_model/<stem>.xml + .bin + <stem>.yaml metadata), converted from the ONNX file
written just before, as ultralytics does."""
import sys

import yaml

from utils.export.prepare import ExportError


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


def export_openvino(file, metadata, half=False, int8=False):
    try:
        ov = import_openvino()
    except ImportError as e:
        raise ExportError(f"OpenVINO export needs the openvino package ({e}): pip install openvino") from None
    if int8:
        raise ExportError("--int8 OpenVINO export needs nncf and a calibration dataset, not available here; "
                          "export without --int8")
    d = file.with_name(f"{file.stem}_openvino_model")
    d.mkdir(parents=True, exist_ok=True)
    ov_model = ov.Core().read_model(str(file.with_suffix(".onnx")))
    ov.save_model(ov_model, str(d / f"{file.stem}.xml"), compress_to_fp16=half)
    with open(d / f"{file.stem}.yaml", "w") as f:
        yaml.safe_dump(metadata, f, sort_keys=False)
    return d
