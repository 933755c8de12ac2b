"""ONNX through PyTorch's TorchScript-based exporter (what ultralytics uses; the newer torch.export-based one needs
onnxscript), input 'images', outputs 'output0' (segmentation: and the prototypes 'output1'), metadata props 'stride'
and 'names' as Python literals. Written whole under a temporary name and renamed over <stem>.onnx only when the
exporter, the checker and the metadata are done: a failed export (an opset the exporter lacks) leaves the earlier
file as it was."""
import inspect
import warnings

from utils.atomic_files import output_path
from utils.backend import require_pytorch
from utils.export.task_outputs import ONNX_OUTPUTS
from utils.log import LOGGER


def opset_refusal(opset):
    """The one line for an --opset this PyTorch's exporter does not write, or None. Checked before exporting: the
    exporter itself fails late, after printing the whole traced graph."""
    torch = require_pytorch("ONNX export")
    limits = getattr(torch.onnx, "_constants", None)  # the exporter's own range (a private module: may be absent)
    low, high = getattr(limits, "ONNX_MIN_OPSET", None), getattr(limits, "ONNX_MAX_OPSET", None)
    if low is not None and high is not None and not low <= int(opset) <= high:
        return (f"--opset {opset}: PyTorch {torch.__version__.split('+')[0]}'s ONNX exporter writes opsets {low} to "
                f"{high}; choose one of them (the default is 17)")
    return None


def export_onnx(prepared, file, opset=17, dynamic=False, simplify=False, prefix="ONNX:", nms=None):
    """file.with_suffix('.onnx'). nms: None, or the keyword arguments of utils/export/nms_graph.nms_wrapped (--nms:
    NMS inside the graph)."""
    torch = require_pytorch("ONNX export")
    import onnx  # optional dependency: the PyTorch environment installs it
    f = file.with_suffix(".onnx")
    model, im = prepared.model, prepared.im
    axes, output_names = None, ONNX_OUTPUTS[prepared.task]
    if dynamic:  # the official axes; a classifier's output is not named (the exporter still makes its batch symbolic)
        axes = {"images": {0: "batch", 2: "height", 3: "width"}}
        if prepared.task in ("detect", "segment"):
            axes["output0"] = {0: "batch", 1: "anchors"}
        if prepared.task == "segment":
            axes["output1"] = {0: "batch", 2: "mask_height", 3: "mask_width"}
        model, im = model.cpu(), im.cpu()  # as ultralytics: dynamic axes are exported from the CPU
    metadata = prepared.metadata
    if nms is not None:
        from utils.export.nms_graph import nms_wrapped
        model = nms_wrapped(model, **nms)
        axes = {**(axes or {}), "output0": {0: "detections"}}
        metadata = {**metadata, "nms": True}
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with output_path(f) as tmp:
        with warnings.catch_warnings():  # the legacy exporter warns on each call that a newer one exists: chosen here
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.onnx.export(model, im, str(tmp), opset_version=opset, input_names=["images"],
                              output_names=output_names, dynamic_axes=axes, do_constant_folding=True, **kwargs)
        model_onnx = onnx.load(str(tmp))
        onnx.checker.check_model(model_onnx)
        for k, v in metadata.items():
            meta = model_onnx.metadata_props.add()
            meta.key, meta.value = k, str(v)
        onnx.save(model_onnx, str(tmp))
        if simplify:
            try:
                import onnxslim  # optional dependency (--simplify)
                LOGGER.info(f"{prefix} slimming with onnxslim {onnxslim.__version__}...")
                onnx.save(onnxslim.slim(model_onnx), str(tmp))
            except Exception as e:  # the unsimplified file stays; official behaviour
                LOGGER.info(f"{prefix} simplifier failure: {e}")
                onnx.save(model_onnx, str(tmp))  # a slimmer that failed half way through its save leaves no half file
    return f
