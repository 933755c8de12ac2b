"""Export a trained YOLOv5 model to deployment formats (ultralytics/yolov5 flags, defaults and file names).

Usage:
    python export.py --weights yolov5n.pt --include torchscript onnx openvino

Format                | --include    | written beside the weights
TorchScript           | torchscript  | yolov5n.torchscript
ONNX                  | onnx         | yolov5n.onnx            (--dynamic, --simplify, --opset)
OpenVINO              | openvino     | yolov5n_openvino_model/
CoreML                | coreml       | yolov5n.mlpackage       (yolov5n.mlmodel with --mlmodel)
TensorFlow SavedModel | saved_model  | yolov5n_saved_model/
TensorFlow GraphDef   | pb           | yolov5n.pb
TensorFlow Lite       | tflite       | yolov5n-fp16.tflite, yolov5n-fp32.tflite (+ yolov5n-int8.tflite with --int8,
                      |              | calibrated on --data)
TensorFlow.js         | tfjs         | yolov5n_web_model/
PaddlePaddle          | paddle       | yolov5n_paddle_model/
NCNN                  | ncnn         | yolov5n_ncnn_model/     (beyond the official formats)

TensorRT (engine) needs an NVIDIA GPU and Edge TPU (edgetpu) Google's compiler: each gets one line saying so and the
rest still export. TorchScript, ONNX and OpenVINO export in the PyTorch environment; the others in the converters'
environment, which has PyTorch too (`make setup-tf` builds .venv-tf: TensorFlow + onnx2tf, tensorflowjs, x2paddle +
paddlepaddle, pnnx + ncnn, coremltools). A checkpoint trained under OneFlow is the same file, so export it there:
    YOLO_BACKEND=torch .venv-torch/bin/python export.py --weights runs/train/exp/weights/best.pt --include onnx
    YOLO_BACKEND=torch .venv-tf/bin/python export.py --weights best.pt --include saved_model tflite paddle ncnn
Then: python detect.py --weights yolov5n.onnx, python val.py --weights yolov5n-fp16.tflite (DetectMultiBackend;
TensorFlow, Paddle and NCNN models run in .venv-tf).

Nothing written before is lost: every file is written under a temporary name and renamed over the earlier export
only when complete, and a model folder is built in a temporary folder whose files are then renamed into it (files a
user keeps in that folder stay). A format that fails, or whose options are refused (refused before anything is
written), says so in one line, leaves its earlier export byte for byte, and makes the exit status 1.

Segmentation and classification checkpoints (*-seg.pt, *-cls.pt) export to TorchScript, ONNX and OpenVINO, as
official: a segmentation ONNX model has the outputs 'output0' (1, anchors, 5 + nc + 32) and 'output1', the prototypes
(1, 32, h/4, w/4); a classifier's, 'output0' (1, nc). segment/val.py, segment/predict.py, classify/val.py and
classify/predict.py run them.
"""
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils.atomic_files import remove_stale_temp_files  # noqa: E402
from utils.backend import require_pytorch  # noqa: E402
from utils.cli_flags import FlagParser, image_size, positive_int  # noqa: E402
from utils.errors import UserError  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.export.formats import FORMATS, WRITTEN_HERE, format_name  # noqa: E402
from utils.export.prepare import prepare  # noqa: E402
from utils.export.task_outputs import TASK_FORMATS, scripts_for, task_name  # noqa: E402
from utils.export.to_onnx import export_onnx  # noqa: E402
from utils.export.to_openvino import export_openvino  # noqa: E402
from utils.export.to_torchscript import export_torchscript  # noqa: E402
from utils.log import LOGGER, colorstr  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402


class ExportIncompleteError(UserError):
    pass


def export_formats():
    """The format table as a pandas DataFrame with the official columns (Format, Argument, Suffix, CPU, GPU)."""
    return pd.DataFrame(FORMATS, columns=["Format", "Argument", "Suffix", "CPU", "GPU"])


def _size_mb(path):
    p = Path(path)
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6
    return p.stat().st_size / 1e6 if p.exists() else 0.0


def _attempt(prefix, fn, t=None):
    """Run one format's writer: one line with the time (since t, default now) and size on success; on failure one
    line with the reason and None (the other formats still export, as in ultralytics). The writers write through
    utils/atomic_files.py, so a failure leaves that format's earlier export as it was: nothing is removed here."""
    t = time.time() if t is None else t
    try:
        f = fn()
        LOGGER.info(f"{prefix} export success ✅ {time.time() - t:.1f}s, saved as {f} ({_size_mb(f):.1f} MB)")
        return f
    except Exception as e:
        _report_failure(prefix, t, e)
        return None


def _report_failure(prefix, t, e):
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    LOGGER.info(f"{prefix} export failure ❌ {time.time() - t:.1f}s: {reason}")


def refused_options(include, int8=False, half=False, mlmodel=False, opset=17):
    """{format: reason} for the requested formats whose options cannot be honoured here: refused, each in one line,
    before anything is written (an export that cannot succeed must not start)."""
    from utils.export.to_coreml import INT8_MLMODEL_REFUSAL
    from utils.export.to_ncnn import HALF_REFUSAL as NCNN_HALF
    from utils.export.to_onnx import opset_refusal
    from utils.export.to_openvino import INT8_REFUSAL
    from utils.export.to_tensorflow import HALF_REFUSAL as TF_HALF
    bad_opset = opset_refusal(opset) if "onnx" in include or "openvino" in include else None
    rules = {"onnx": bad_opset, "openvino": (int8 and INT8_REFUSAL) or bad_opset,
             "coreml": int8 and mlmodel and INT8_MLMODEL_REFUSAL, "ncnn": half and NCNN_HALF,
             **{x: half and TF_HALF for x in ("saved_model", "pb", "tflite", "tfjs")}}
    return {x: rules[x] for x in include if rules.get(x)}


def run(data=ROOT / "data/coco128.yaml", weights=ROOT / "yolov5s.pt", imgsz=(640, 640), batch_size=1, device="cpu",
        include=("torchscript", "onnx"), half=False, inplace=False, keras=False, optimize=False, int8=False,
        per_tensor=False, dynamic=False, cache="", simplify=False, mlmodel=False, opset=12, verbose=False,
        workspace=4, nms=False, agnostic_nms=False, topk_per_class=100, topk_all=100, iou_thres=0.45,
        conf_thres=0.25):
    """Export one checkpoint; returns the list of files/folders written (str), as ultralytics' run() does. A format
    that failed, or is not available here, is left out of the list (see export_checkpoint). data: the images TFLite
    --int8 calibrates on; nms/agnostic_nms with conf_thres, iou_thres, topk_per_class: NMS inside the ONNX and
    OpenVINO graphs (utils/export/nms_graph.py). Flags of formats not written here (keras, per_tensor, cache,
    verbose, workspace, topk_all) are accepted as ultralytics accepts them."""
    return export_checkpoint(weights, imgsz, batch_size, device, include, half, inplace, optimize, int8, dynamic,
                             simplify, opset, data=data, mlmodel=mlmodel,
                             nms=dict(conf_thres=conf_thres, iou_thres=iou_thres, topk_per_class=topk_per_class,
                                      agnostic=agnostic_nms) if nms or agnostic_nms else None)[0]


def export_checkpoint(weights, imgsz=(640, 640), batch_size=1, device="cpu", include=("torchscript", "onnx"),
                      half=False, inplace=False, optimize=False, int8=False, dynamic=False, simplify=False, opset=12,
                      data=ROOT / "data/coco128.yaml", mlmodel=False, nms=None):
    """Returns (written, failed, unavailable): paths written, formats whose writer failed (each reported in one
    line), and requested formats that this project does not write."""
    torch = require_pytorch("export.py")
    t = time.time()
    file, include = _checked_request(weights, include)
    # an export killed mid-write left its temporary file or folder beside the weights (yolov5n.onnx.<host>.<pid>.
    # yolo-partial.onnx); each killed run would add one, so this run removes those whose writer is gone
    remove_stale_temp_files(file.parent, file.stem)
    select_and_log_device(device)  # the official 'YOLOv5 🚀 ...' line, once the request is checked (prepare selects)
    written, failed = [], []
    refused = refused_options(include, int8=int8, half=half, mlmodel=mlmodel, opset=opset)  # before any work
    for x, reason in refused.items():
        LOGGER.info(f"{colorstr(format_name(x) + ':')} export failure ❌ {reason}")
        failed.append(x)
    include = [x for x in include if x not in failed]
    if not any(x in WRITTEN_HERE for x in include):  # nothing left to write here: the model need not even load
        return [], failed, [x for x in include if x not in WRITTEN_HERE]
    prepared = prepare(file, device=device, imgsz=imgsz, batch_size=batch_size, half=half, inplace=inplace,
                       dynamic=dynamic, optimize=optimize)
    LOGGER.info(f"\n{colorstr('PyTorch:')} starting from {file} with output shape {prepared.output_shape} "
                f"({_size_mb(file):.1f} MB)")

    unavailable = [x for x in include if x not in WRITTEN_HERE]
    if prepared.task != "detect":  # segmentation and classification: the formats below only, each other one line
        include = _task_formats_only(prepared, file, include, nms, failed)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # shape-dependent Python branches are fixed
    if "torchscript" in include:
        f = _attempt(colorstr("TorchScript:"), lambda: export_torchscript(prepared, file, optimize))
        written.append(f) if f else failed.append("torchscript")
    onnx_file = None
    if "onnx" in include:
        onnx_file = _attempt(colorstr("ONNX:"), lambda: export_onnx(prepared, file, opset, dynamic, simplify, nms=nms))
        written.append(onnx_file) if onnx_file else failed.append("onnx")
    if "openvino" in include:
        f = _export_openvino(prepared, file, onnx_file, half, opset, dynamic, simplify, nms)
        written.append(f) if f else failed.append("openvino")
    _export_with_converters(prepared, file, include, written, failed, int8=int8, data=data, mlmodel=mlmodel,
                            half=half, opset=opset)

    written = [str(x) for x in written]
    if written:
        _log_complete(prepared, file, written, half, t)
    return written, failed, unavailable


def _checked_request(weights, include):
    """(the checkpoint's Path, the --include arguments in lower case), or a UserError naming a format that is none
    or a file that is missing."""
    include = [x.lower() for x in (include if isinstance(include, (list, tuple)) else [include])]
    valid = tuple(f[1] for f in FORMATS[1:]) + ("ncnn",)
    bad = [x for x in include if x not in valid]
    if bad:
        raise UserError(f"--include {' '.join(bad)}: not an export format; valid --include arguments are "
                        f"{', '.join(valid)}")
    file = Path(weights[0] if isinstance(weights, (list, tuple)) else weights)
    if not file.is_file():
        raise UserError(f"--weights {file}: file not found; pass the path of a .pt checkpoint")
    return file, include


def _task_formats_only(prepared, file, include, nms, failed):
    """A segmentation or classification model: include less the formats its converters do not take, each named in
    one line and added to failed; --nms refused."""
    if nms:
        raise UserError(f"--nms: {file} is a {task_name(prepared.task)} model; NMS inside the graph is for "
                        "detection models, export it without --nms")
    for x in [x for x in include if x in WRITTEN_HERE and x not in TASK_FORMATS]:
        LOGGER.info(f"{colorstr(format_name(x) + ':')} export failure ❌ {task_name(prepared.task)} models export "
                    f"to {', '.join(TASK_FORMATS)} here (the {format_name(x)} converter takes detection models)")
        failed.append(x)
    return [x for x in include if x not in failed]


def _log_complete(prepared, file, written, half, t):
    """The official closing lines: where the files are and the commands that run the last one."""
    h = "--half" if half else ""
    folder, predict = scripts_for(prepared.task)  # each task's own scripts, as official prints them
    hub = "" if prepared.task == "detect" else \
        f"  # {task_name(prepared.task)} models are not AutoShape compatible: hub returns the model itself"
    LOGGER.info(f"\nExport complete ({time.time() - t:.1f}s)"
                f"\nResults saved to {colorstr('bold', file.parent.resolve())}"
                f"\nDetect:          python {folder}{predict} --weights {written[-1]} {h}"
                f"\nValidate:        python {folder}val.py --weights {written[-1]} {h}"
                f"\nPyTorch Hub:     model = torch.hub.load('.', 'custom', '{written[-1]}', source='local'){hub}"
                f"\nVisualize:       https://netron.app")


def _export_openvino(prepared, file, onnx_file, half, opset, dynamic, simplify, nms):
    """OpenVINO is converted from ONNX: from onnx_file, the <stem>.onnx this export just wrote, else from one written
    into a temporary folder (an --include openvino export leaves a user's <stem>.onnx alone)."""
    meta = {**prepared.metadata, "nms": True} if nms else prepared.metadata
    if onnx_file:
        return _attempt(colorstr("OpenVINO:"), lambda: export_openvino(file, meta, half, onnx_file=onnx_file))
    with tempfile.TemporaryDirectory(prefix="yolo-openvino-") as work:
        t = time.time()
        try:
            onnx_file = export_onnx(prepared, Path(work) / file.name, opset, dynamic, simplify, nms=nms)
        except Exception as e:
            _report_failure(colorstr("OpenVINO:"), t, e)
            return None
        return _attempt(colorstr("OpenVINO:"), lambda: export_openvino(file, meta, half, onnx_file=onnx_file))


def _export_with_converters(prepared, file, include, written, failed, int8, data, mlmodel, half, opset):
    """The formats of the converters' environment (make setup-tf): each one line, as the formats above."""
    # Paddle first: it segfaults when it loads into a process that has TensorFlow (which coremltools imports too)
    if "paddle" in include:
        from utils.export.to_paddle import export_paddle
        f = _attempt(colorstr("PaddlePaddle:"), lambda: export_paddle(prepared, file))
        written.append(f) if f else failed.append("paddle")
    if "ncnn" in include:
        from utils.export.to_ncnn import export_ncnn
        f = _attempt(colorstr("NCNN:"), lambda: export_ncnn(prepared, file))
        written.append(f) if f else failed.append("ncnn")
    if "coreml" in include:
        from utils.export.to_coreml import export_coreml
        f = _attempt(colorstr("CoreML:"), lambda: export_coreml(prepared, file, mlmodel, int8, half))
        written.append(f) if f else failed.append("coreml")
    tf_formats = [x for x in ("saved_model", "pb", "tflite", "tfjs") if x in include]
    if tf_formats:  # one onnx2tf conversion (in a work folder) gives the SavedModel and the TFLite files; pb and tfjs
        # are made from its SavedModel; only the formats asked for are installed beside the weights
        with tempfile.TemporaryDirectory(prefix="yolo-tf-") as work:
            _install_tensorflow(prepared, file, tf_formats, Path(work), written, failed, int8, data, opset)


def _install_tensorflow(prepared, file, tf_formats, work, written, failed, int8, data, opset):
    from utils.export.install import install_file, install_folder
    from utils.export.to_tensorflow import convert_tensorflow, export_graphdef
    t = time.time()
    try:
        converted = convert_tensorflow(prepared, work, int8="tflite" in tf_formats and int8, data=data, opset=opset)
    except Exception as e:  # the SavedModel conversion every TensorFlow format needs: one line, each one failed
        _report_failure(colorstr("TensorFlow SavedModel:"), t, e)
        failed.extend(tf_formats)
        return
    if "saved_model" in tf_formats:
        f = _attempt(colorstr("TensorFlow SavedModel:"),
                     lambda: install_folder(converted["saved_model"], file.with_name(f"{file.stem}_saved_model")),
                     t=t)  # the conversion's time counted
        written.append(f) if f else failed.append("saved_model")
    if "pb" in tf_formats:
        f = _attempt(colorstr("TensorFlow GraphDef:"), lambda: export_graphdef(converted["saved_model"], file))
        written.append(f) if f else failed.append("pb")
    if "tflite" in tf_formats:
        tflite_ok = True
        for k in ("fp16", "fp32", "int8"):
            if k in converted:
                f = _attempt(colorstr("TensorFlow Lite:"),
                             lambda k=k: install_file(converted[k], file.with_name(f"{file.stem}-{k}.tflite")))
                written.append(f) if f else None
                tflite_ok &= f is not None
        if not tflite_ok:
            failed.append("tflite")
    if "tfjs" in tf_formats:
        from utils.export.to_tfjs import export_tfjs
        f = _attempt(colorstr("TensorFlow.js:"), lambda: export_tfjs(converted["saved_model"], file, prepared.metadata))
        written.append(f) if f else failed.append("tfjs")


def parse_opt(argv=None):
    parser = FlagParser()
    parser.add_argument("--data", type=str, default=ROOT / "data/coco128.yaml", help="dataset.yaml path")
    parser.add_argument("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model.pt path(s)")
    parser.add_argument("--imgsz", "--img", "--img-size", nargs="+", type=image_size, default=[640, 640],
                        help="image (h, w)")
    parser.add_argument("--batch-size", type=positive_int, default=1, help="batch size")
    parser.add_argument("--device", default="cpu", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--half", action="store_true", help="FP16 half-precision export")
    parser.add_argument("--inplace", action="store_true", help="set YOLOv5 Detect() inplace=True")
    parser.add_argument("--keras", action="store_true", help="TF: use Keras (accepted; onnx2tf writes the SavedModel)")
    parser.add_argument("--optimize", action="store_true", help="TorchScript: optimize for mobile")
    parser.add_argument("--int8", action="store_true", help="CoreML/TF INT8 quantization")
    parser.add_argument("--per-tensor", action="store_true", help="TF per-tensor quantization")
    parser.add_argument("--dynamic", action="store_true", help="ONNX/TF/TensorRT: dynamic axes")
    parser.add_argument("--cache", type=str, default="", help="TensorRT: timing cache file path")
    parser.add_argument("--simplify", action="store_true", help="ONNX: simplify model (onnxslim)")
    parser.add_argument("--mlmodel", action="store_true", help="CoreML: Export in *.mlmodel format")
    parser.add_argument("--opset", type=int, default=17, help="ONNX: opset version")
    parser.add_argument("--verbose", action="store_true", help="TensorRT: verbose log")
    parser.add_argument("--workspace", type=int, default=4, help="TensorRT: workspace size (GB)")
    parser.add_argument("--nms", action="store_true", help="ONNX/OpenVINO: add NMS to model (see nms_graph.py)")
    parser.add_argument("--agnostic-nms", action="store_true", help="ONNX/OpenVINO: add agnostic NMS to model")
    parser.add_argument("--topk-per-class", type=int, default=100, help="NMS: topk per class to keep")
    parser.add_argument("--topk-all", type=int, default=100, help="TF.js NMS: topk for all classes to keep")
    parser.add_argument("--iou-thres", type=float, default=0.45, help="NMS: IoU threshold")
    parser.add_argument("--conf-thres", type=float, default=0.25, help="NMS: confidence threshold")
    parser.add_argument("--include", nargs="+", default=["torchscript"],
                        help="torchscript, onnx, openvino, coreml, saved_model, pb, tflite, tfjs, paddle, ncnn "
                             "(engine, edgetpu are not available here)")
    opt = parser.parse_args(argv)
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    """Export each --weights file. Exit status 1 when a requested format was not written: the formats that failed
    were each reported in one line as they failed; the ones not available here are named in the last line."""
    weights = opt.weights if isinstance(opt.weights, list) else [opt.weights]
    args = {k: getattr(opt, k) for k in ("imgsz", "batch_size", "device", "include", "half", "inplace", "optimize",
                                         "int8", "dynamic", "simplify", "opset", "data", "mlmodel")}
    if opt.nms or opt.agnostic_nms:
        args["nms"] = dict(conf_thres=opt.conf_thres, iou_thres=opt.iou_thres, topk_per_class=opt.topk_per_class,
                           agnostic=opt.agnostic_nms)
    failed, unavailable = [], []
    for w in weights:
        _, f, u = export_checkpoint(w, **args)
        failed += f
        unavailable += u
    if unavailable:
        names = ", ".join(f"{x} ({format_name(x)})" for x in dict.fromkeys(unavailable))
        raise ExportIncompleteError(f"--include {names}: not available here (needs a toolchain this project does not "
                                    f"install); formats exported here: {', '.join(WRITTEN_HERE)}"
                                    + (f"; also failed: {', '.join(dict.fromkeys(failed))}" if failed else ""))
    if failed:
        raise ExportIncompleteError(f"not written: {', '.join(dict.fromkeys(failed))} (each reason is above)")


if __name__ == "__main__":
    with exit_on_user_error("export"):
        main(parse_opt())
