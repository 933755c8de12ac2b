"""Validate a trained YOLOv5 segmentation model on a polygon-label dataset (the flags and output of
ultralytics/yolov5's segment/val.py).

Usage:
    python segment/val.py --weights yolov5s-seg.pt --data coco128-seg.yaml --img 640

From Python:
    from segment.val import run
    (box_p, box_r, box_map50, box_map, mask_p, mask_r, mask_map50, mask_map, *losses), maps, times = run(...)

Differences from the official script: NMS has no time limit here (the official 0.5 + 0.05 x batch seconds cuts
batches of a weak model on a busy CPU, so its figures follow the machine load); --save-json reads the COCO
annotations from the data YAML's path (<path>/annotations/instances_val2017.json; official: ../datasets/coco/...).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python segment/val.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("val")

import functools  # noqa: E402

import models.tasks  # noqa: E402,F401  (registers Segment for the model YAMLs)
from utils.backend import inference_mode  # noqa: E402
from utils.cli_flags import FlagParser, add_val_flags  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.evaluation.from_weights import ClassCountMismatch, validate_weights  # noqa: E402,F401
from utils.evaluation.runner import run_val_task  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from utils.segment.dataset import create_seg_dataloader  # noqa: E402
from utils.segment.validation import SegmentationSteps, mask_count, seg_evaluator, validate_seg_model  # noqa: E402,F401
from utils.shutdown import leave_quickly  # noqa: E402


@inference_mode()
def run(data=None, weights=None, batch_size=32, imgsz=640, conf_thres=0.001, iou_thres=0.6, max_det=300, task="val",
        device="", workers=8, single_cls=False, augment=False, verbose=False, save_txt=False, save_hybrid=False,
        save_conf=False, save_json=False, project=ROOT / "runs/val-seg", name="exp", exist_ok=False, half=True,
        dnn=False, model=None, dataloader=None, save_dir=Path(""), plots=True, overlap=False,
        mask_downsample_ratio=1, compute_loss=None, callbacks=None):
    """Validate; returns ((box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, *losses), per-class maps,
    per-image ms (pre, inference, NMS)). With model= and dataloader= (the ultralytics trainer's call) an in-memory
    model is validated into save_dir."""
    if save_hybrid:
        LOGGER.warning("WARNING ⚠️ --save-hybrid is not supported for segmentation here; ignored")
    kw = dict(single_cls=single_cls, plots=plots, verbose=verbose, conf_thres=conf_thres, iou_thres=iou_thres,
              max_det=max_det, augment=augment, save_txt=save_txt, save_conf=save_conf, save_json=save_json)
    if model is not None:
        return validate_seg_model(model, dataloader, data, compute_loss=compute_loss, save_dir=save_dir,
                                  overlap=overlap, **kw)
    select_and_log_device(device, batch_size=batch_size)  # the official device line (validate_weights selects)
    loader = functools.partial(create_seg_dataloader, overlap_mask=overlap, mask_downsample_ratio=mask_downsample_ratio)
    return validate_weights(weights, data, loader, functools.partial(seg_evaluator, overlap=overlap),
                            steps=SegmentationSteps, model_task="segment", batch_size=batch_size, imgsz=imgsz,
                            task=task, device=device, workers=workers, project=project, name=name, exist_ok=exist_ok,
                            half=half, dnn=dnn, **kw)


def parse_opt(argv=None):
    parser = FlagParser()
    add_val_flags(parser, data=ROOT / "data/coco128-seg.yaml", weights=ROOT / "yolov5s-seg.pt",
                  project=ROOT / "runs/val-seg", project_help="save results to project/name")
    opt = parser.parse_args(argv)
    opt.save_txt |= opt.save_hybrid
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    if opt.task in ("train", "val", "test"):
        if opt.conf_thres > 0.001:
            LOGGER.warning(f"WARNING ⚠️ confidence threshold {opt.conf_thres} > 0.001 produces invalid results")
    return run_val_task(opt, run)


if __name__ == "__main__":
    with exit_on_user_error("val"):
        main(parse_opt())
    leave_quickly()
