"""Every entry script keeps its command line: flag names and aliases, order (as --help lists them), types, nargs,
actions, consts, choices, defaults and help texts, and the values its parse_opt returns with no arguments (after its
own post-processing).

The tables below are literal expectations, recorded once by running these scripts as they stood at commit 5d47de0,
before their shared flags moved to utils/cli_flags.py. Their defaults are the official ultralytics/yolov5 defaults
(5081342f: val.py, segment/val.py, detect.py, segment/predict.py, classify/predict.py, classify/val.py, train.py,
segment/train.py, classify/train.py; the train scripts hold their paths as str), with this project's documented
differences kept as they were: detect.py --data None, the --allow-download-scripts consent flag, the speed-up flags,
--amp/--no-amp, classify/train.py's --resume and --local-rank alias, and the help texts of flags accepted for
compatibility only. A table that repeats another's says so and lists what differs.

Since then, the counts and sizes take checked types (utils/cli_flags.py: image_size, positive_int, nonnegative_int)
where the recording had int: the same values for every valid input, one line for 0, negative or absurd ones
(tests/test_scripts/test_one_line_errors.py).
"""
import argparse
import copy
import importlib
from pathlib import Path

import pytest

from utils.cli_flags import image_size, nonnegative_int, positive_int

ROOT = Path(__file__).resolve().parents[2]


def flag(*names, **kwargs):
    return names, kwargs


def edited(table, drop=(), **changes):
    """table with the flags whose first name is in drop left out, and changes[dest] merged into that flag's kwargs."""
    out = []
    for names, kwargs in table:
        if names[0] in drop:
            continue
        dest = names[0].lstrip("-").replace("-", "_")
        out.append((names, {**kwargs, **changes.get(dest, {})}))
    return out


TRUE = dict(action="store_true")
PATH_HELP = "save results to project/name"
IGNORED = "accepted for compatibility; ignored"
SHARED_FOLDER = [  # --name/--exist-ok after --project in every script
    flag("--name", default="exp", help="save to project/name"),
    flag("--exist-ok", **TRUE, help="existing project/name ok, do not increment"),
]
SHARED_DEVICE = flag("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
SHARED_WORKERS = flag("--workers", type=nonnegative_int, default=8, help="max dataloader workers (per RANK in DDP mode)")
SHARED_HALF = flag("--half", **TRUE, help="use FP16 half-precision inference")

VAL = [
    flag("--data", type=str, default=ROOT / "data/coco128.yaml", help="dataset.yaml path"),
    flag("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model path(s)"),
    flag("--batch-size", type=positive_int, default=32, help="batch size"),
    flag("--imgsz", "--img", "--img-size", type=image_size, default=640, help="inference size (pixels)"),
    flag("--conf-thres", type=float, default=0.001, help="confidence threshold"),
    flag("--iou-thres", type=float, default=0.6, help="NMS IoU threshold"),
    flag("--max-det", type=int, default=300, help="maximum detections per image"),
    flag("--task", default="val", help="train, val, test, speed or study"),
    SHARED_DEVICE, SHARED_WORKERS,
    flag("--single-cls", **TRUE, help="treat as single-class dataset"),
    flag("--augment", **TRUE, help="augmented inference"),
    flag("--verbose", **TRUE, help="report mAP by class"),
    flag("--save-txt", **TRUE, help="save results to *.txt"),
    flag("--save-hybrid", **TRUE, help="save label+prediction hybrid results to *.txt"),
    flag("--save-conf", **TRUE, help="save confidences in --save-txt labels"),
    flag("--save-json", **TRUE, help="save a COCO-JSON results file"),
    flag("--project", default=ROOT / "runs/val", help="save to project/name"),
    *SHARED_FOLDER, SHARED_HALF,
    flag("--dnn", **TRUE, help=IGNORED),
    flag("--allow-download-scripts", **TRUE,
         help="let the data YAML's 'download:' (a zip URL or code) run (as YOLO_ALLOW_DOWNLOAD_SCRIPTS=1)"),
]
# segment/val.py: val.py's flags but for three defaults and --project's help; no --allow-download-scripts
SEGMENT_VAL = edited(VAL, drop=("--allow-download-scripts",), data=dict(default=ROOT / "data/coco128-seg.yaml"),
                     weights=dict(default=ROOT / "yolov5s-seg.pt"),
                     project=dict(default=ROOT / "runs/val-seg", help=PATH_HELP))
CLASSIFY_VAL = [
    flag("--data", type=str, default=ROOT / "../datasets/mnist", help="dataset path"),
    flag("--weights", nargs="+", type=str, default=ROOT / "yolov5s-cls.pt", help="model.pt path(s)"),
    flag("--batch-size", type=positive_int, default=128, help="batch size"),
    flag("--imgsz", "--img", "--img-size", type=image_size, default=224, help="inference size (pixels)"),
    SHARED_DEVICE, SHARED_WORKERS,
    flag("--verbose", nargs="?", const=True, default=True, help="verbose output"),
    flag("--project", default=ROOT / "runs/val-cls", help="save to project/name"),
    *SHARED_FOLDER, SHARED_HALF,
    flag("--dnn", **TRUE, help=IGNORED),
]

DETECT = [
    flag("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model path(s)"),
    flag("--source", type=str, default=ROOT / "data/images",
         help="file/dir/glob/.txt list/video/URL/.streams/0 (camera)"),
    flag("--data", type=str, default=None, help="(optional) dataset.yaml path"),
    flag("--imgsz", "--img", "--img-size", nargs="+", type=image_size, default=[640], help="inference size h,w"),
    flag("--conf-thres", type=float, default=0.25, help="confidence threshold"),
    flag("--iou-thres", type=float, default=0.45, help="NMS IoU threshold"),
    flag("--max-det", type=int, default=1000, help="maximum detections per image"),
    SHARED_DEVICE,
    flag("--view-img", **TRUE, help="accepted for compatibility; results are saved"),
    flag("--save-txt", **TRUE, help="save results to *.txt"),
    flag("--save-format", type=int, default=0, help="--save-txt box format: 0 YOLO (class x y w h), 1 Pascal-VOC "
                                                     "(class x1 y1 x2 y2), both normalized to 0-1"),
    flag("--save-csv", **TRUE, help="save results in CSV format"),
    flag("--save-conf", **TRUE, help="save confidences in --save-txt labels"),
    flag("--save-crop", **TRUE, help="save cropped prediction boxes"),
    flag("--nosave", **TRUE, help="do not save images/videos"),
    flag("--classes", nargs="+", type=int, help="filter by class: --classes 0, or --classes 0 2 3"),
    flag("--agnostic-nms", **TRUE, help="class-agnostic NMS"),
    flag("--augment", **TRUE, help="augmented inference"),
    flag("--visualize", **TRUE, help="save each layer's feature maps (PNG + .npy)"),
    flag("--update", **TRUE, help="strip the optimizer from the weights file"),
    flag("--project", default=ROOT / "runs/detect", help=PATH_HELP),
    flag("--name", default="exp", help=PATH_HELP),
    SHARED_FOLDER[1],
    flag("--line-thickness", default=3, type=int, help="bounding box thickness (pixels)"),
    flag("--hide-labels", default=False, **TRUE, help="hide labels"),
    flag("--hide-conf", default=False, **TRUE, help="hide confidences"),
    SHARED_HALF,
    flag("--dnn", **TRUE, help="use OpenCV DNN for ONNX inference"),
    flag("--vid-stride", type=positive_int, default=1, help="video frame-rate stride"),
]
# segment/predict.py: detect.py's flags without --save-format/--save-csv, --visualize and --dnn only accepted, and
# --retina-masks last
SEGMENT_PREDICT = edited(DETECT, drop=("--save-format", "--save-csv"), weights=dict(default=ROOT / "yolov5s-seg.pt"),
                         data=dict(default=ROOT / "data/coco128.yaml"), visualize=dict(help=IGNORED),
                         dnn=dict(help=IGNORED), project=dict(default=ROOT / "runs/predict-seg"))
SEGMENT_PREDICT.append(flag("--retina-masks", **TRUE, help="whether to plot masks in native resolution"))
# classify/predict.py: detect.py's flags without the box ones, --augment, --visualize and --dnn only accepted
CLASSIFY_PREDICT = edited(
    DETECT, drop=("--conf-thres", "--iou-thres", "--max-det", "--save-format", "--save-csv", "--save-conf",
                  "--save-crop", "--classes", "--agnostic-nms", "--line-thickness", "--hide-labels", "--hide-conf"),
    weights=dict(default=ROOT / "yolov5s-cls.pt"), data=dict(default=ROOT / "data/coco128.yaml"),
    imgsz=dict(default=[224]), augment=dict(help=IGNORED), visualize=dict(help=IGNORED), dnn=dict(help=IGNORED),
    project=dict(default=ROOT / "runs/predict-cls"))

# --slice and its settings (utils/tiles.py: add_slice_flags), after a script's own flags in detect.py,
# segment/predict.py and val.py (docs/sliced-inference.md)
SLICE = [
    flag("--slice", nargs="+", type=int, default=None, metavar="SIZE",
         help="sliced inference: tiles of SIZE (or H W) image pixels (SAHI slice_height/width); off without it"),
    flag("--slice-overlap", nargs="+", type=float, default=[0.2], metavar="RATIO",
         help="overlap of neighbouring tiles as a ratio of the slice, in [0, 1) (or H W ratios; SAHI "
              "overlap_height/width_ratio)"),
    flag("--slice-no-full", **TRUE, help="no full-image pass besides the tiles (SAHI perform_standard_pred=False)"),
    flag("--slice-merge", default="nmm", choices=("nmm", "nms"),
         help="merge of the tiles' boxes: greedy merging or suppression (SAHI postprocess_type GREEDYNMM, NMS)"),
    flag("--slice-match", default="ios", choices=("ios", "iou"),
         help="box overlap for the merge (SAHI postprocess_match_metric IOS, IOU)"),
    flag("--slice-match-thres", type=float, default=0.5,
         help="overlap at which boxes merge (SAHI postprocess_match_threshold)"),
    flag("--slice-agnostic", **TRUE, help="merge boxes of different classes too (SAHI postprocess_class_agnostic)"),
    flag("--slice-batch", type=int, default=16, help="tiles per model call"),
]

# module: (its expected table, what its parse_opt itself changes in the defaults)
TABLES = {
    "val": (VAL + SLICE, {}),
    "segment.val": (SEGMENT_VAL, {}),
    "classify.val": (CLASSIFY_VAL, {}),
    "detect": (DETECT + SLICE, dict(imgsz=[640, 640])),
    "segment.predict": (SEGMENT_PREDICT + SLICE, dict(imgsz=[640, 640])),
    "classify.predict": (CLASSIFY_PREDICT, dict(imgsz=[224, 224])),
}


def describe(action):
    return (tuple(action.option_strings), action.dest, type(action).__name__, action.type, action.nargs,
            action.const, copy.deepcopy(action.default), action.choices, action.help, action.required, action.metavar)


def parse_and_parser(module, argv, monkeypatch):
    """(opt, the parser's actions described as they were before parsing) of module.parse_opt(argv)."""
    seen = []
    real = argparse.ArgumentParser.parse_known_args

    def spy(self, *args, **kwargs):
        seen.append([describe(a) for a in self._actions if not isinstance(a, argparse._HelpAction)])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", spy)
    opt = importlib.import_module(module).parse_opt(argv)
    return opt, seen[-1]


def expected_actions(table):
    parser = argparse.ArgumentParser()
    for names, kwargs in table:
        parser.add_argument(*names, **kwargs)
    return [describe(a) for a in parser._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("module", list(TABLES))
def test_script_keeps_its_flags_and_defaults(module, monkeypatch):
    table, post = TABLES[module]
    opt, actions = parse_and_parser(module, [], monkeypatch)
    want = expected_actions(table)
    assert [a[0] for a in actions] == [a[0] for a in want]  # names, aliases and --help order
    for got, exp in zip(actions, want):
        assert got == exp, f"{module} {got[0]}"
    assert {s for a in actions for s in a[0]} == {s for names, _ in table for s in names}
    assert vars(opt) == {**{a[1]: a[6] for a in want}, **post}


def test_val_scripts_post_process_their_options(monkeypatch):
    val, seg_val = importlib.import_module("val"), importlib.import_module("segment.val")
    assert val.parse_opt(["--save-hybrid"]).save_txt is True and seg_val.parse_opt(["--save-hybrid"]).save_txt is True
    assert val.parse_opt(["--data", "data/coco.yaml"]).save_json is True  # official: COCO gets its JSON
    assert val.parse_opt(["--data", "data/coco128.yaml"]).save_json is False
    assert seg_val.parse_opt(["--data", "data/coco.yaml"]).save_json is False  # as official segment/val.py


@pytest.mark.parametrize("module", ["detect", "segment.predict", "classify.predict"])
def test_predict_scripts_expand_one_image_size(module):
    parse = importlib.import_module(module).parse_opt
    assert parse(["--img", "320"]).imgsz == [320, 320]
    assert parse(["--imgsz", "320", "256"]).imgsz == [320, 256]


TRAIN_VARS = {
    "weights": str(ROOT / "yolov5s.pt"), "cfg": "", "data": str(ROOT / "data/coco128.yaml"),
    "hyp": str(ROOT / "data/hyps/hyp.scratch-low.yaml"), "epochs": 100, "batch_size": 16, "imgsz": 640, "rect": False,
    "resume": False, "nosave": False, "noval": False, "noautoanchor": False, "noplots": False, "evolve": None,
    "evolve_population": str(ROOT / "data/hyps"), "resume_evolve": None, "bucket": "", "cache": None,
    "image_weights": False, "device": "", "multi_scale": False, "single_cls": False, "optimizer": "SGD",
    "sync_bn": False, "workers": 8, "project": str(ROOT / "runs/train"), "name": "exp", "exist_ok": False,
    "quad": False, "cos_lr": False, "label_smoothing": 0.0, "patience": 100, "freeze": [0], "save_period": -1,
    "seed": 0, "local_rank": -1, "entity": None, "upload_dataset": False, "bbox_interval": -1,
    "artifact_alias": "latest", "ndjson_console": False, "ndjson_file": False, "bbox_iou_optim": False,
    "multi_tensor_optimizer": False, "amp": None, "allow_download_scripts": False,
}
TRAIN_OPTIONS = {  # each dest's flag, dashes as given, plus the aliases
    "--weights", "--cfg", "--data", "--hyp", "--epochs", "--batch-size", "--imgsz", "--img", "--img-size", "--rect",
    "--resume", "--nosave", "--noval", "--noautoanchor", "--noplots", "--evolve", "--evolve_population",
    "--resume_evolve", "--bucket", "--cache", "--image-weights", "--device", "--multi-scale", "--single-cls",
    "--optimizer", "--sync-bn", "--workers", "--project", "--name", "--exist-ok", "--quad", "--cos-lr",
    "--label-smoothing", "--patience", "--freeze", "--save-period", "--seed", "--local_rank", "--local-rank",
    "--entity", "--upload_dataset", "--bbox_interval", "--artifact_alias", "--ndjson-console", "--ndjson-file",
    "--bbox_iou_optim", "--multi_tensor_optimizer", "--amp", "--no-amp", "--allow-download-scripts",
}
# segment/train.py: train.py's flags with three other defaults, and two of its own
SEGMENT_TRAIN_VARS = {**TRAIN_VARS, "weights": str(ROOT / "yolov5s-seg.pt"),
                      "data": str(ROOT / "data/coco128-seg.yaml"), "project": str(ROOT / "runs/train-seg"),
                      "mask_ratio": 4, "no_overlap": False}
CLASSIFY_TRAIN_VARS = {
    "model": "yolov5s-cls.pt", "data": "imagenette160", "epochs": 10, "batch_size": 64, "imgsz": 224, "nosave": False,
    "cache": None, "device": "", "workers": 8, "project": str(ROOT / "runs/train-cls"), "name": "exp",
    "exist_ok": False, "pretrained": True, "optimizer": "Adam", "lr0": 0.001, "decay": 5e-05, "label_smoothing": 0.1,
    "cutoff": None, "dropout": None, "verbose": False, "seed": 0, "local_rank": -1, "resume": False,
    "multi_tensor_optimizer": False, "amp": None,  # --amp/--no-amp as train.py's (added after the recording)
}
CLASSIFY_TRAIN_OPTIONS = {
    "--model", "--data", "--epochs", "--batch-size", "--imgsz", "--img", "--img-size", "--nosave", "--cache",
    "--device", "--workers", "--project", "--name", "--exist-ok", "--pretrained", "--optimizer", "--lr0", "--decay",
    "--label-smoothing", "--cutoff", "--dropout", "--verbose", "--seed", "--local_rank", "--local-rank", "--resume",
    "--multi_tensor_optimizer", "--amp", "--no-amp",
}
TRAIN_TABLES = {
    "train": (TRAIN_VARS, TRAIN_OPTIONS),
    "segment.train": (SEGMENT_TRAIN_VARS, TRAIN_OPTIONS | {"--mask-ratio", "--no-overlap"}),
    "classify.train": (CLASSIFY_TRAIN_VARS, CLASSIFY_TRAIN_OPTIONS),
}


@pytest.mark.parametrize("module", list(TRAIN_TABLES))
def test_train_scripts_keep_their_flags_and_defaults(module, monkeypatch):
    want_vars, want_options = TRAIN_TABLES[module]
    seen = []
    real = argparse.ArgumentParser.parse_known_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args",
                        lambda self, *a, **k: seen.append(self) or real(self, *a, **k))
    opt = importlib.import_module(module).parse_opt(args=[])
    assert vars(opt) == want_vars
    assert {s for a in seen[-1]._actions for s in a.option_strings} - {"-h", "--help"} == want_options


@pytest.mark.parametrize("module", list(TRAIN_TABLES))
def test_train_scripts_run_takes_defaults_and_keywords(module, monkeypatch):
    """run(**kwargs): the script's defaults (never sys.argv), the keywords set on them, main's result as opt.results."""
    script = importlib.import_module(module)
    monkeypatch.setattr("sys.argv", [module, "--epochs", "7"])
    monkeypatch.setattr(script, "main", lambda opt: ("ran", opt.epochs, opt.name))
    opt = script.run(name="mine", extra=1)
    assert opt.results == ("ran", TRAIN_TABLES[module][0]["epochs"], "mine") and opt.extra == 1
    assert opt.device == ""  # a default, untouched
