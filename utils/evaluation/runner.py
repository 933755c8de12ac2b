"""What val.py, segment/val.py and the trainers call around the one validation loop (utils/evaluation/loop.py):

    evaluator = evaluator_for_dataset(data, model_names(model), save_dir, plots=False)
    (mp, mr, map50, map50_95, *losses), maps, times = run_validation(model, loader, evaluator, compute_loss=loss)

validate_model() is the trainer's call (an in-memory model, a ready loader, precision handled) for detection and
segmentation; val.py and segment/val.py build the model and loader from --weights and --data and call
run_validation themselves; speed_or_study is their --task speed and --task study.
"""
from pathlib import Path

import numpy as np

from utils.backend import is_cuda, select_device
from utils.figures import plot_val_study
from utils.dataset_config import check_dataset
from utils.errors import UserError
from utils.evaluation.coco_json import CocoPredictions
from utils.evaluation.detection_steps import DetectionSteps, model_device
from utils.evaluation.evaluator import IOU_THRESHOLDS, DetectionEvaluator
from utils.evaluation.loop import run_validation
from utils.log import LOGGER
from utils.nms import non_max_suppression

__all__ = ["model_device", "model_names", "evaluator_for_dataset", "run_validation", "validate_model",
           "run_val_task", "speed_or_study", "STUDY_SIZES"]


def model_names(model):
    """{class id: name} of a model (or of the module a DDP/EMA wrapper holds); {} when it has none."""
    names = getattr(model, "names", None) or getattr(getattr(model, "module", None), "names", None)
    return dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names or {})


def evaluator_for_dataset(data, names, save_dir=Path(""), single_cls=False, plots=True, verbose=False, task="val",
                          save_txt=False, save_conf=False, save_json=False, weights=None):
    """A DetectionEvaluator for a checked dataset dict: its class count (1 with single_cls), the model's class
    names (else the dataset's), and a COCO JSON writer named after weights when save_json."""
    nc = 1 if single_cls else int(data["nc"])
    names = dict(names or data.get("names", {}))
    if single_cls:
        names = {0: names.get(0, "item")}
    coco = CocoPredictions.for_dataset(data, save_dir, weights) if save_json else None
    return DetectionEvaluator(nc, names, IOU_THRESHOLDS, single_cls=single_cls, plots=plots, save_dir=save_dir,
                              verbose=verbose, task=task, save_txt=save_txt, save_conf=save_conf, coco=coco)


def validate_model(model, dataloader, data, single_cls=False, half=False, compute_loss=None, save_dir=Path(""),
                   plots=True, verbose=False, conf_thres=0.001, iou_thres=0.6, max_det=300, augment=False,
                   save_txt=False, save_hybrid=False, save_conf=False, save_json=False, task="val", plot_jobs=None,
                   task_plugin=None, build_evaluator=None, steps=DetectionSteps, table=None, **step_options):
    """The trainer's validation of an in-memory model (the EMA each epoch, best.pt at the end) on its validation
    loader. data: a dataset dict or YAML path. half: fp16 on CUDA (ignored elsewhere); the model is back in fp32
    afterwards, so the EMA keeps averaging in fp32. task_plugin: the utils.tasks.Task whose evaluator and
    post-processing run (None: detection's, defined here); build_evaluator, steps, step_options: another task's
    evaluator and loop steps (segmentation: utils.segment.validation.validate_seg_model). task: the split, as
    val.py's --task names it. table: a list that receives the figures' whole table (header, `all` row, per-class
    rows, whether verbose printed them or not), to print later. Returns what run_validation returns."""
    if build_evaluator is None:
        build_evaluator = task_plugin.build_evaluator if task_plugin is not None else evaluator_for_dataset
    postprocess = task_plugin.postprocess if task_plugin is not None else non_max_suppression
    n_loss_items = len(task_plugin.loss_names) if task_plugin is not None else 3
    half = half and is_cuda(model_device(model))
    model.half() if half else model.float()
    if isinstance(data, (str, Path)):
        data = check_dataset(data)
    model.eval()
    evaluator = build_evaluator(data, model_names(model), save_dir, single_cls=single_cls, plots=plots,
                                verbose=verbose, task=task, save_txt=save_txt, save_conf=save_conf, save_json=save_json)
    try:
        out = run_validation(model, dataloader, evaluator, compute_loss=compute_loss, half=half, augment=augment,
                             conf_thres=conf_thres, iou_thres=iou_thres, max_det=max_det, save_hybrid=save_hybrid,
                             plot_jobs=plot_jobs, postprocess=postprocess, n_loss_items=n_loss_items, steps=steps,
                             **step_options)
    finally:
        model.float()
    if table is not None:
        table[:] = evaluator.table
    return out


def run_val_task(opt, run):
    """val.py's and segment/val.py's --task: train, val or test validates that split once (run's return), speed and
    study as speed_or_study says; any other is one line."""
    if opt.task in ("train", "val", "test"):
        return run(**vars(opt))
    if not speed_or_study(opt, run):
        raise UserError(f"--task {opt.task} is not one of train, val, test, speed, study.")


STUDY_SIZES = tuple(range(256, 1536 + 128, 128))  # the official --task study image sizes


def speed_or_study(opt, run):
    """val.py's and segment/val.py's --task speed and --task study for each of opt.weights, with the script's run:
    speed validates at the detection thresholds (0.25, 0.45) without plots or JSON; study validates at every
    STUDY_SIZES size and writes study_<data>_<weights>.txt, one row per size: the figures, the val losses and the
    three times in ms, as official. Returns False for any other task (the caller says what it takes)."""
    if opt.task not in ("speed", "study"):
        return False
    weights = opt.weights if isinstance(opt.weights, list) else [opt.weights]
    opt.half = "cuda" in str(select_device(opt.device))  # FP16 for the fastest results on a GPU
    if opt.task == "speed":
        opt.conf_thres, opt.iou_thres, opt.save_json = 0.25, 0.45, False
        for opt.weights in weights:
            run(**vars(opt), plots=False)
        return True
    for opt.weights in weights:
        f = f"study_{Path(opt.data).stem}_{Path(opt.weights).stem}.txt"
        rows = []
        for opt.imgsz in STUDY_SIZES:
            LOGGER.info(f"\nRunning {f} --imgsz {opt.imgsz}...")
            r, _, t = run(**vars(opt), plots=False)
            rows.append(tuple(r) + tuple(t))
        np.savetxt(f, rows, fmt="%10.4g")
        LOGGER.info(f"Study results saved to {f}")
    plot_val_study(file=f, x=STUDY_SIZES)  # study.png beside the files, as official: mAP50-95 against ms per image
    return True
