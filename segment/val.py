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

import models.tasks  # noqa: E402,F401  (registers Segment for the model YAMLs)
from utils.backend import inference_mode, select_device  # noqa: E402
from utils.cli_flags import FlagParser, add_val_flags  # noqa: E402
from utils.errors import UserError  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.evaluation.runner import model_names, speed_or_study  # noqa: E402
from utils.log import LOGGER, colorstr  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from utils.inference import load_model  # noqa: E402
from utils.inference.loading import model_class_count  # noqa: E402
from utils.segment.dataset import create_seg_dataloader  # noqa: E402
from utils.segment.validation import run_seg_validation, seg_evaluator  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


class ClassCountMismatch(UserError, AssertionError):
    pass


def mask_count(model):
    """Mask coefficients per detection: the Segment head's nm for a model built here (training's, or a .pt file's
    behind DetectMultiBackend), else the official default 32 (exported models)."""
    if hasattr(model, "pt"):  # DetectMultiBackend
        if not model.pt:
            return 32
        model = model.model
    try:
        return int(model.model[-1].nm)
    except (AttributeError, IndexError, TypeError):
        return 32


@inference_mode()
def run(data=None, weights=None, batch_size=32, imgsz=640, conf_thres=0.001, iou_thres=0.6, max_det=300, task="val",
        device="", workers=8, single_cls=False, augment=False, verbose=False, save_txt=False, save_hybrid=False,
        save_conf=False, save_json=False, project=ROOT / "runs/val-seg", name="exp", exist_ok=False, half=True,
        dnn=False, model=None, dataloader=None, save_dir=Path(""), plots=True, overlap=False,
        mask_downsample_ratio=1, compute_loss=None, callbacks=None):
    """Validate; returns ((box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, *losses), per-class maps,
    per-image ms (pre, inference, NMS))."""
    from utils.dataset_config import check_dataset
    if save_hybrid:
        LOGGER.warning("WARNING ⚠️ --save-hybrid is not supported for segmentation here; ignored")
    training = model is not None
    if training:
        device = next(model.parameters()).device
        half = False
        nm = model.model[-1].nm
        model.float()
        if isinstance(data, (str, Path)):
            data = check_dataset(data)
    else:
        device = select_device(device, batch_size=batch_size)
        save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
        (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
        model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz,
                                  task="segment")
        pt, half = model.pt, model.fp16
        nm = mask_count(model)
        if not (pt or model.jit):
            batch_size = 1
            LOGGER.info(f"Forcing --batch-size 1 square inference (1,3,{imgsz},{imgsz}) for non-PyTorch models")
        data = check_dataset(data)
    model.eval()
    nc = 1 if single_cls else int(data["nc"])
    if not training:
        ncm = None if single_cls else model_class_count(model)  # a .pt's own count, an export's stored names
        if ncm is not None and ncm != nc:
            raise ClassCountMismatch(f"{weights} ({ncm} classes) trained on different --data than what you "
                                     f"passed ({nc} classes). Pass correct combination of --weights and --data.")
        model.warmup(imgsz=(1 if pt else batch_size, 3, imgsz, imgsz))
        pad, rect = (0.0, False) if task == "speed" else (0.5, pt)
        task = task if task in ("train", "val", "test") else "val"
        dataloader = create_seg_dataloader(data[task], imgsz, batch_size, model.stride, single_cls, pad=pad,
                                           rect=rect, workers=workers, prefix=colorstr(f"{task}: "), nc=nc,
                                           overlap_mask=overlap, mask_downsample_ratio=mask_downsample_ratio)[0]
    evaluator = seg_evaluator(data, model_names(model), save_dir, single_cls=single_cls, plots=plots,
                              verbose=verbose or (nc < 50 and not training), task=task, save_txt=save_txt,
                              save_conf=save_conf, save_json=save_json, weights=weights, overlap=overlap)
    results = run_seg_validation(model, dataloader, evaluator, nm=nm, compute_loss=compute_loss, half=half,
                                 augment=augment, conf_thres=conf_thres, iou_thres=iou_thres, max_det=max_det,
                                 speed_shape=None if training else (batch_size, 3, imgsz, imgsz))
    model.float()
    if not training:
        s = f"\n{len(list(save_dir.glob('labels/*.txt')))} labels saved to {save_dir / 'labels'}" if save_txt else ""
        LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    return results


def parse_opt(argv=None):
    parser = FlagParser()
    add_val_flags(parser, data=ROOT / "data/coco128-seg.yaml", weights=ROOT / "yolov5s-seg.pt",
                  project=ROOT / "runs/val-seg", project_help="save results to project/name")
    opt = parser.parse_args(argv)
    opt.save_txt |= opt.save_hybrid
    return opt


def main(opt):
    if opt.task in ("train", "val", "test"):
        if opt.conf_thres > 0.001:
            LOGGER.warning(f"WARNING ⚠️ confidence threshold {opt.conf_thres} > 0.001 produces invalid results")
        return run(**vars(opt))
    if not speed_or_study(opt, run):
        raise UserError(f"--task {opt.task} is not one of train, val, test, speed, study.")


if __name__ == "__main__":
    with exit_on_user_error("val"):
        main(parse_opt())
    leave_quickly()
