"""Validate a trained YOLOv5 detection model on a detection dataset (same flags and output as ultralytics/yolov5).

Usage:
    python val.py --weights yolov5s.pt --data coco128.yaml --img 640
    python val.py --weights yolov5n.pt --task speed      # speed only
    python val.py --weights yolov5n.pt --task study      # mAP vs image size

From Python:
    from val import run
    (mp, mr, map50, map, *losses), maps, times = run(data='coco128.yaml', weights='yolov5n.pt')

The work is done in utils/evaluation/ (DetectionEvaluator, run_validation; training calls its validate_model) and
utils/inference/ (the model loader). run(model=..., dataloader=...) still validates an in-memory model as the
ultralytics trainer calls it.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python val.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("val")

from utils.backend import inference_mode  # noqa: E402
from utils.cli_flags import FlagParser, add_val_flags  # noqa: E402
from utils.data.loader import create_dataloader  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402
from utils.evaluation import evaluator_for_dataset, run_validation, validate_model  # noqa: E402
from utils.evaluation.runner import run_val_task  # noqa: E402
from utils.evaluation.sliced import validation_for  # noqa: E402
from utils.tiles import add_slice_flags, settings_from_flags  # noqa: E402
from utils.evaluation.from_weights import ClassCountMismatch, validate_weights  # noqa: E402,F401
from utils.evaluation import match_image, save_one_json  # noqa: E402  (ultralytics users import them from val)
from utils.log import LOGGER  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from utils.inference.label_txt import save_one_txt  # noqa: E402


__all__ = ["run", "parse_opt", "main", "save_one_txt", "save_one_json", "match_image"]


@inference_mode()
def run(data=None, weights=None, batch_size=32, imgsz=640, conf_thres=0.001, iou_thres=0.6, max_det=300, task="val",
        device="", workers=8, single_cls=False, augment=False, verbose=False, save_txt=False, save_hybrid=False,
        save_conf=False, save_json=False, project=ROOT / "runs/val", name="exp", exist_ok=False, half=False,
        dnn=False, model=None, dataloader=None, save_dir=Path(""), plots=True, callbacks=None, compute_loss=None,
        allow_download_scripts=False, slice=None, slice_overlap=0.2, slice_no_full=False, slice_merge="nmm",
        slice_match="ios", slice_match_thres=0.5, slice_agnostic=False, slice_batch=16):
    """Validate; returns ((P, R, mAP50, mAP50-95, *val losses), per-class mAP50-95 array, per-image ms (pre, inf, nms)).
    With model= and dataloader= (the ultralytics trainer's call) an in-memory model is validated into save_dir."""
    kw = dict(single_cls=single_cls, plots=plots, verbose=verbose, conf_thres=conf_thres, iou_thres=iou_thres,
              max_det=max_det, augment=augment, save_txt=save_txt, save_hybrid=save_hybrid, save_conf=save_conf,
              save_json=save_json)  # the same options from the command line and from the ultralytics trainer
    if model is not None:
        return validate_model(model, dataloader, data, half=half, compute_loss=compute_loss, save_dir=save_dir, **kw)

    sliced = settings_from_flags(slice, slice_overlap, slice_no_full, slice_merge, slice_match, slice_match_thres,
                                 slice_agnostic, slice_batch)  # checked before the model loads: one line if bad
    select_and_log_device(device, batch_size=batch_size)  # the official device line (validate_weights selects)
    # --slice: each image tile by tile; --save-json on a dataset without COCO annotations: AP by object size
    return validate_weights(weights, data, create_dataloader, evaluator_for_dataset, batch_size=batch_size,
                            imgsz=imgsz, task=task, device=device, workers=workers, project=project, name=name,
                            exist_ok=exist_ok, half=half, dnn=dnn, allow_scripts=allow_download_scripts,
                            validation=validation_for(sliced, run_validation), **kw)


def parse_opt(argv=None):
    parser = FlagParser()
    add_val_flags(parser, data=ROOT / "data/coco128.yaml", weights=ROOT / "yolov5s.pt", project=ROOT / "runs/val")
    parser.add_argument("--allow-download-scripts", action="store_true",
                        help="let the data YAML's 'download:' (a zip URL or code) run (as YOLO_ALLOW_DOWNLOAD_SCRIPTS=1)")
    add_slice_flags(parser)
    opt = parser.parse_args(argv)
    opt.save_json |= str(opt.data).endswith("coco.yaml")
    opt.save_txt |= opt.save_hybrid
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    if opt.task in ("train", "val", "test"):
        if opt.conf_thres > 0.001:
            LOGGER.info(f"WARNING: confidence threshold {opt.conf_thres} > 0.001 produces invalid results")
        if opt.save_hybrid:
            LOGGER.info("WARNING: --save-hybrid will return high mAP from hybrid labels, not from predictions alone")
    return run_val_task(opt, run)


if __name__ == "__main__":
    with exit_on_user_error("val"):
        main(parse_opt())
    leave_quickly()  # the work is done and written: skip the interpreter's teardown (utils/shutdown.py)
