"""The command-line flags the entry scripts share, added to a script's parser with that script's defaults.

val.py and segment/val.py share their whole flag table, detect.py, segment/predict.py and classify/predict.py theirs
but for the box flags; each function here adds one such group in the order official ultralytics/yolov5 lists it, and
takes as arguments what differs between the scripts (data YAML, weights, image size, project folder, which flags a
script only accepts for compatibility). A script's post-processing of its options (--save-hybrid implying
--save-txt, one --imgsz doubled) stays in its parse_opt.

argparse only: an entry script's --help must not wait for a framework import.

Numbers are checked where they are parsed (image_size, positive_int, nonnegative_int, train_batch_size), and the
scripts' parsers are FlagParser: a bad value is one line naming the flag and what it takes, exit status 2, before
anything runs (official argparse types let --img 0 or --workers -1 through to a traceback deep in the run).
"""
import argparse

from utils.paths import ROOT

MAX_IMAGE_SIZE = 16384  # pixels per side: one 16384 x 16384 RGB image is 805 MB before any batch is made
CACHE_CHOICES = ("ram", "disk")  # --cache alone means ram; official compares the exact words
ACCEPTED_ONLY = "accepted for compatibility; ignored"  # official flags a script takes but does not act on
_TO_FOLDER = "save to project/name"
_RESULTS_TO_FOLDER = "save results to project/name"


class FlagParser(argparse.ArgumentParser):
    """argparse's parser with a one-line error: 'train.py: error: argument --img: ... (--help lists the flags)' and
    exit status 2, instead of the usage block (dozens of lines for train.py) followed by the error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _whole_number(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _at_least(low, what, name):
    def parse(text):
        n = _whole_number(text)
        if n < low:
            raise argparse.ArgumentTypeError(f"{n} is not {what}: give a whole number >= {low}")
        return n
    parse.__name__ = parse.__qualname__ = name
    return parse


positive_int = _at_least(1, "a positive count", "positive_int")  # --epochs, --vid-stride, an inference --batch-size
nonnegative_int = _at_least(0, "a count", "nonnegative_int")  # --workers: 0 loads in the main process


def image_size(text):
    """--imgsz: whole pixels from 1 (rounded up to a multiple of the model's stride, as official) to MAX_IMAGE_SIZE."""
    n = _whole_number(text)
    if not 1 <= n <= MAX_IMAGE_SIZE:
        raise argparse.ArgumentTypeError(f"{n} is not an image size: give pixels from 1 to {MAX_IMAGE_SIZE} (rounded "
                                         "up to a multiple of the model's stride)")
    return n


def train_batch_size(text):
    """train.py's --batch-size: the total batch, >= 1, or -1 for AutoBatch (official)."""
    n = _whole_number(text)
    if n < 1 and n != -1:
        raise argparse.ArgumentTypeError(f"{n} is not a batch size: give a whole number >= 1, or -1 for AutoBatch")
    return n


def add_cache_flag(parser, help_text):
    """--cache, --cache ram, --cache disk: only these (a typo such as 'Disk' used to cache in RAM unchecked)."""
    parser.add_argument("--cache", type=str, nargs="?", const="ram", choices=CACHE_CHOICES, help=help_text)


def add_val_flags(parser, data, weights, project, project_help=_TO_FOLDER):
    """val.py's and segment/val.py's flags (val.py adds --allow-download-scripts after them)."""
    parser.add_argument("--data", type=str, default=data, help="dataset.yaml path")
    parser.add_argument("--weights", nargs="+", type=str, default=weights, help="model path(s)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="batch size")
    parser.add_argument("--imgsz", "--img", "--img-size", type=image_size, default=640, help="inference size (pixels)")
    _add_nms_flags(parser, conf_thres=0.001, iou_thres=0.6, max_det=300)
    parser.add_argument("--task", default="val", help="train, val, test, speed or study")
    add_device_flag(parser)
    add_workers_flag(parser)
    _add_switches(parser, ("--single-cls", "treat as single-class dataset"), ("--augment", "augmented inference"),
                  ("--verbose", "report mAP by class"), ("--save-txt", "save results to *.txt"),
                  ("--save-hybrid", "save label+prediction hybrid results to *.txt"),
                  ("--save-conf", "save confidences in --save-txt labels"),
                  ("--save-json", "save a COCO-JSON results file"))
    add_run_folder_flags(parser, project, project_help=project_help)
    _add_precision_flags(parser, dnn_help=ACCEPTED_ONLY)


def add_predict_flags(parser, weights, data, imgsz, project, boxes=True, box_files=False, tta=True,
                      feature_maps=False, opencv_dnn=False):
    """The prediction scripts' flags; imgsz is the one default size (parse_opt doubles a single size). boxes: the
    script draws boxes (detection, segmentation): NMS thresholds, class filter, --save-conf/--save-crop and the
    drawing flags. box_files: detect.py's --save-format and --save-csv. tta, feature_maps, opencv_dnn: whether the
    script acts on --augment, --visualize and --dnn, or only accepts them."""
    parser.add_argument("--weights", nargs="+", type=str, default=weights, help="model path(s)")
    parser.add_argument("--source", type=str, default=ROOT / "data/images",
                        help="file/dir/glob/.txt list/video/URL/.streams/0 (camera)")
    parser.add_argument("--data", type=str, default=data, help="(optional) dataset.yaml path")
    parser.add_argument("--imgsz", "--img", "--img-size", nargs="+", type=image_size, default=[imgsz],
                        help="inference size h,w")
    if boxes:
        _add_nms_flags(parser, conf_thres=0.25, iou_thres=0.45, max_det=1000)
    add_device_flag(parser)
    parser.add_argument("--view-img", action="store_true", help="accepted for compatibility; results are saved")
    parser.add_argument("--save-txt", action="store_true", help="save results to *.txt")
    if box_files:
        parser.add_argument("--save-format", type=int, default=0,
                            help="--save-txt box format: 0 YOLO (class x y w h), 1 Pascal-VOC (class x1 y1 x2 y2), "
                                 "both normalized to 0-1")
        parser.add_argument("--save-csv", action="store_true", help="save results in CSV format")
    if boxes:
        parser.add_argument("--save-conf", action="store_true", help="save confidences in --save-txt labels")
        parser.add_argument("--save-crop", action="store_true", help="save cropped prediction boxes")
    parser.add_argument("--nosave", action="store_true", help="do not save images/videos")
    if boxes:
        parser.add_argument("--classes", nargs="+", type=int, help="filter by class: --classes 0, or --classes 0 2 3")
        parser.add_argument("--agnostic-nms", action="store_true", help="class-agnostic NMS")
    parser.add_argument("--augment", action="store_true", help="augmented inference" if tta else ACCEPTED_ONLY)
    parser.add_argument("--visualize", action="store_true",
                        help="save each layer's feature maps (PNG + .npy)" if feature_maps else ACCEPTED_ONLY)
    parser.add_argument("--update", action="store_true", help="strip the optimizer from the weights file")
    add_run_folder_flags(parser, project, project_help=_RESULTS_TO_FOLDER, name_help=_RESULTS_TO_FOLDER)
    if boxes:
        parser.add_argument("--line-thickness", default=3, type=int, help="bounding box thickness (pixels)")
        parser.add_argument("--hide-labels", default=False, action="store_true", help="hide labels")
        parser.add_argument("--hide-conf", default=False, action="store_true", help="hide confidences")
    _add_precision_flags(parser, dnn_help="use OpenCV DNN for ONNX inference" if opencv_dnn else ACCEPTED_ONLY)
    parser.add_argument("--vid-stride", type=positive_int, default=1, help="video frame-rate stride")


def add_amp_flags(parser):
    """--amp / --no-amp of the training scripts: opt.amp None (the default: utils/amp_check.py decides), True, False."""
    parser.add_argument("--amp", action="store_true", default=None, help="mixed precision, the default where it is "
                        "native: fp16 on CUDA, bf16 on CPUs with AVX512-BF16 or AMX")
    parser.add_argument("--no-amp", dest="amp", action="store_false", help="train in fp32, also on CUDA")


def add_device_flag(parser):
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")


def add_workers_flag(parser):
    parser.add_argument("--workers", type=nonnegative_int, default=8,
                        help="max dataloader workers (per RANK in DDP mode)")


def add_run_folder_flags(parser, project, project_help=_TO_FOLDER, name_help=_TO_FOLDER):
    """--project, --name, --exist-ok: where a run's folder (project/name, numbered unless --exist-ok) goes."""
    parser.add_argument("--project", default=project, help=project_help)
    parser.add_argument("--name", default="exp", help=name_help)
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")


def _add_switches(parser, *names_and_helps):
    """store_true flags, in the order given as (name, help) pairs."""
    for name, help_text in names_and_helps:
        parser.add_argument(name, action="store_true", help=help_text)


def _add_nms_flags(parser, conf_thres, iou_thres, max_det):
    parser.add_argument("--conf-thres", type=float, default=conf_thres, help="confidence threshold")
    parser.add_argument("--iou-thres", type=float, default=iou_thres, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=max_det, help="maximum detections per image")


def _add_precision_flags(parser, dnn_help):
    parser.add_argument("--half", action="store_true", help="use FP16 half-precision inference")
    parser.add_argument("--dnn", action="store_true", help=dnn_help)


def run_from_defaults(main, parse_opt, overrides):
    """A training script's Python entry point run(**kwargs): its defaults, never the caller's sys.argv (pytest's, a
    notebook's), with the keywords set on them as given (as official, names parse_opt does not know included);
    main(opt)'s result becomes opt.results. Returns opt."""
    opt = parse_opt(True, args=[])
    for k, v in overrides.items():
        setattr(opt, k, v)
    opt.results = main(opt)
    return opt
