"""Run YOLOv5 detection on images, folders, globs, .txt lists, videos, cameras and streams (ultralytics flags and
outputs).

Usage:
    python detect.py --weights yolov5s.pt --source img.jpg            # image
                                                   path/              # folder
                                                   'path/*.jpg'       # glob
                                                   list.txt           # list of paths
                                                   vid.mp4            # video
                                                   0                  # camera 0
                                                   list.streams       # one camera index or stream URL a line
                                                   'rtsp://example.com/media.mp4'  # RTSP, RTMP, HTTP stream
    --weights also takes yolov5s.torchscript, yolov5s.onnx, yolov5s_openvino_model (export.py writes them).
Outputs go to runs/detect/exp*: annotated images/videos, labels/*.txt (--save-txt; --save-format 0 YOLO
class x y w h, 1 Pascal-VOC class x1 y1 x2 y2, both normalized to 0-1), crops/ (--save-crop), predictions.csv
(--save-csv). Unreadable images and videos are reported and skipped; when none could be read, the run exits 1.
Names never collide: when two sources share a file name (a glob or list over cam1/0001.jpg and cam2/0001.jpg), every
output keeps its path relative to the sources' common folder (exp/cam1/0001.jpg, labels/cam1/0001.txt,
crops/<class>/cam1/0001.jpg); otherwise the layout is ultralytics' flat one. Crops take the first free name. Label
files and predictions.csv are written whole, so a rerun with --exist-ok replaces them. A file that cannot be written
(read-only or full disk) stops the run with one line naming it and exit status 1.
The work is done in utils/inference/ (loader, steps, frame loop, outputs); for a Python call that returns boxes, see
its Detector.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("detect")

from utils.backend import inference_mode  # noqa: E402
from utils.cli_flags import FlagParser, add_predict_flags  # noqa: E402
from models.from_record import build_model  # noqa: E402
from utils.checkpoint.training import strip_optimizer  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from utils.inference import check_save_format, load_model  # noqa: E402
from utils.inference.outputs import DetectionOutputs, source_names  # noqa: E402
from utils.inference.detect_writer import DetectionWriter  # noqa: E402
from utils.inference.predict import predict_and_report  # noqa: E402
from utils.inference.sources import is_stream, open_source  # noqa: E402
from utils.inference.slicing import SlicedPredictor  # noqa: E402
from utils.inference.sliced_writer import SlicedWriter, open_sliced_source  # noqa: E402
from utils.tiles import add_slice_flags, settings_from_flags  # noqa: E402


@inference_mode()
def run(weights=ROOT / "yolov5s.pt", source=ROOT / "data/images", data=None, imgsz=(640, 640), conf_thres=0.25,
        iou_thres=0.45, max_det=1000, device="", view_img=False, save_txt=False, save_format=0, save_csv=False,
        save_conf=False, save_crop=False, nosave=False, classes=None, agnostic_nms=False, augment=False,
        visualize=False, update=False, project=ROOT / "runs/detect", name="exp", exist_ok=False, line_thickness=3,
        hide_labels=False, hide_conf=False, half=False, dnn=False, vid_stride=1, slice=None, slice_overlap=0.2,
        slice_no_full=False, slice_merge="nmm", slice_match="ios", slice_match_thres=0.5, slice_agnostic=False,
        slice_batch=16):
    """Returns the run folder (Path). Its layout: see the module docstring and utils.inference.outputs.OutputNames
    (flat names, or paths relative to the sources' common folder when two sources share a file name)."""
    source = str(source)
    check_save_format(save_format)
    stream = is_stream(source)
    save_img = not nosave and not source.endswith(".txt")  # ultralytics: .txt sources save labels only

    imgsz = list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz]
    sliced = settings_from_flags(slice, slice_overlap, slice_no_full, slice_merge, slice_match, slice_match_thres,
                                 slice_agnostic, slice_batch)  # checked before the model loads: one line if bad
    device = select_and_log_device(device)  # the official 'YOLOv5 🚀 ...' line, before the model loads
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz)
    if sliced is None:
        dataset = open_source(source, stream, imgsz, stride=model.stride, auto=model.pt, vid_stride=vid_stride)
    else:  # --slice: each frame at its own size, cut into tiles (docs/sliced-inference.md)
        dataset = open_sliced_source(source, stream, vid_stride)
    # after the source opened: no empty folders; claiming it gives one line if unwritable
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    outputs = DetectionOutputs(save_dir, model.names, save_img, save_txt, save_format, save_conf, save_crop, save_csv,
                               view_img, line_thickness, hide_labels, hide_conf,
                               n_sources=len(dataset) if stream else 1, sources=source_names(dataset, stream),
                               stream=stream)
    writer = DetectionWriter(outputs, conf_thres, iou_thres, classes, agnostic_nms, max_det, augment,
                             visualize=visualize and model.pt)
    if sliced is not None:
        writer = SlicedWriter(writer, SlicedPredictor(model, imgsz, sliced, conf_thres, iou_thres, classes,
                                                      agnostic_nms, max_det, augment))
    predict_and_report(model, dataset, writer, source, stream, imgsz, save_txt)
    if update:  # as ultralytics: the weights file rewritten stripped (EMA as the model in fp16, no optimizer)
        _strip_weights(weights[0] if isinstance(weights, (list, tuple)) else weights, model.pt)
    return save_dir


def _strip_weights(w, is_checkpoint):
    if not is_checkpoint:
        LOGGER.warning(f"WARNING ⚠️ --update strips .pt checkpoints only; {w} is left as it is")
        return
    strip_optimizer(w, build_model=build_model)


def parse_opt(argv=None):
    parser = FlagParser()
    add_predict_flags(parser, weights=ROOT / "yolov5s.pt", data=None, imgsz=640, project=ROOT / "runs/detect",
                      box_files=True, feature_maps=True, opencv_dnn=True)
    add_slice_flags(parser)
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1  # expand
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("detect"):
        main(parse_opt())
    leave_quickly()  # the work is done and written: skip the interpreter's teardown (utils/shutdown.py)
