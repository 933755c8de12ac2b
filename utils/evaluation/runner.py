"""The validation loop, shared by val.py and the trainer: batches through the model, NMS and a DetectionEvaluator.

    evaluator = evaluator_for_dataset(data, model_names(model), save_dir, plots=False)
    (mp, mr, map50, map50_95, *losses), maps, times = run_validation(model, loader, evaluator, compute_loss=loss)

validate_model() is the trainer's call (an in-memory model, a ready loader, precision handled); val.py builds the
model and loader from --weights and --data and calls run_validation itself.
"""
from pathlib import Path

import numpy as np
from tqdm import tqdm

from utils import signals
from utils.backend import inference_mode, is_cuda, select_device, to_numpy, torch
from utils.dataset_config import check_dataset
from utils.evaluation.batch_memory import ForwardBudget, forward_in_chunks
from utils.evaluation.coco_json import CocoPredictions
from utils.evaluation.evaluator import IOU_THRESHOLDS, TABLE_HEADER, DetectionEvaluator
from utils.inference.profile import Profile, ms_per_image
from utils.inference.steps import preprocess
from utils.log import LOGGER
from utils.nms import non_max_suppression
from utils.plot_jobs import PlotJobs

TQDM_BAR_FORMAT = "{l_bar}{bar:10}{r_bar}"


def model_device(model):
    """DetectMultiBackend knows its device (an ONNX model has no parameters); a plain module has parameters."""
    device = getattr(model, "device", None)
    return device if device is not None else next(model.parameters()).device


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


def _progress(dataloader):
    return tqdm(dataloader, desc=TABLE_HEADER, bar_format=TQDM_BAR_FORMAT)


def _hybrid_labels(targets, nb, width, height):
    """--save-hybrid: each image's labels [cls, xywh] in input pixels, which NMS adds as confidence-1 boxes."""
    gain = torch.tensor([1.0, width, height, width, height], device=targets.device, dtype=targets.dtype)
    return [targets[targets[:, 0] == i, 1:] * gain for i in range(nb)]


@inference_mode()
def run_validation(model, dataloader, evaluator, compute_loss=None, half=False, augment=False, conf_thres=0.001,
                   iou_thres=0.6, max_det=300, save_hybrid=False, speed_shape=None, plot_jobs=None,
                   postprocess=non_max_suppression, n_loss_items=3):
    """Validate model (in eval mode and the precision half says) on dataloader's (im, targets, paths, shapes)
    batches. compute_loss: also average the (box, obj, cls) losses, from the raw maps an eval-mode model returns;
    speed_shape: the input shape to name in a printed Speed line (none is printed without it).
    Returns ((P, R, mAP50, mAP50-95, box, obj, cls losses), per-class mAP50-95 (nc,), (pre-process, inference, NMS)
    ms per image): what val.run returns. With evaluator.plots the plot files are drawn beside the batches by
    plot_jobs (a utils.plot_jobs.PlotJobs: the trainer's; one of its own when None) and all written when this
    returns. postprocess: the task's raw predictions -> per-image results (Task.postprocess; detection: NMS);
    n_loss_items: how many loss items compute_loss returns (len(Task.loss_names); detection: box, obj, cls)."""
    jobs = plot_jobs if plot_jobs is not None else PlotJobs(processes=None if evaluator.plots else False)
    draw, evaluator.draw = evaluator.draw, jobs.submit
    if evaluator.plots:  # forked while the heap is small: each helper keeps a copy of what the batches write later
        jobs.start()
    try:
        return _validation_pass(model, dataloader, evaluator, compute_loss, half, augment, conf_thres, iou_thres,
                                max_det, save_hybrid, speed_shape, postprocess, n_loss_items)
    finally:
        jobs.wait() if plot_jobs is not None else jobs.close()
        evaluator.draw = draw


def _validation_pass(model, dataloader, evaluator, compute_loss, half, augment, conf_thres, iou_thres, max_det,
                     save_hybrid, speed_shape, postprocess, n_loss_items):
    device = model_device(model)
    profiles = Profile(device), Profile(device), Profile(device)
    loss = torch.zeros(n_loss_items, device=device)
    budget = ForwardBudget(model)
    for batch_i, (im, targets, paths, shapes) in enumerate(_progress(dataloader)):
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with profiles[0]:
            im = preprocess(im, device, half)
            targets = targets.to(device)
            nb, _, height, width = im.shape
        with profiles[1]:
            chunk = budget.chunk_size(im)  # the whole batch unless the memory headroom is small
            if compute_loss:  # eval mode: (decoded, raw maps); the loss needs the raw maps
                preds, train_out = model(im) if chunk >= nb else forward_in_chunks(model, im, chunk)
            elif chunk >= nb:
                preds, train_out = (model(im, augment=True) if augment else model(im)), None
            else:  # NMS reads the decoded output only: the raw maps go chunk by chunk
                preds, train_out = forward_in_chunks(model, im, chunk, augment=augment, keep=1), None
        if compute_loss:
            loss += compute_loss(train_out, targets)[1]  # box, obj, cls
        lb = _hybrid_labels(targets, nb, width, height) if save_hybrid else []
        with profiles[2]:
            preds = postprocess(preds, conf_thres, iou_thres, labels=lb, multi_label=True,
                                agnostic=evaluator.single_cls, max_det=max_det)
        evaluator.update(preds, targets, shapes, (height, width), paths)
        evaluator.plot_batch(batch_i, im, targets, preds, paths, max_det=max_det)
        del im, preds, train_out  # the batch's tensors go before the next batch is loaded and run

    metrics = evaluator.compute()
    t = ms_per_image(profiles, metrics.seen)
    if speed_shape is not None:
        LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {speed_shape}" % t)
    evaluator.evaluate_coco(metrics, getattr(getattr(dataloader, "dataset", None), "im_files", []))
    n_batches = max(len(dataloader), 1) if hasattr(dataloader, "__len__") else 1
    losses = (to_numpy(loss) / n_batches).tolist()
    if compute_loss and not np.isfinite(losses).all():  # results.csv would show nan with no word of why
        LOGGER.warning(f"WARNING ⚠️ validation losses are not finite (box, obj, cls = {[round(x, 4) for x in losses]}):"
                       " the model's outputs on the validation images are NaN or overflow, so this epoch's metrics "
                       "mean nothing; lower --hyp lr0 or check the labels.")
    return metrics.results(losses), metrics.maps(), t


def validate_model(model, dataloader, data, single_cls=False, half=False, compute_loss=None, save_dir=Path(""),
                   plots=True, verbose=False, conf_thres=0.001, iou_thres=0.6, max_det=300, augment=False,
                   save_txt=False, save_hybrid=False, save_conf=False, save_json=False, task="val", plot_jobs=None,
                   task_plugin=None):
    """The trainer's validation of an in-memory model (the EMA each epoch, best.pt at the end) on its validation
    loader. data: a dataset dict or YAML path. half: fp16 on CUDA (ignored elsewhere); the model is back in fp32
    afterwards, so the EMA keeps averaging in fp32. task_plugin: the utils.tasks.Task whose evaluator and
    post-processing run (None: detection's, defined here). task: the split, as val.py's --task names it.
    Returns what run_validation returns."""
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
        return run_validation(model, dataloader, evaluator, compute_loss=compute_loss, half=half, augment=augment,
                              conf_thres=conf_thres, iou_thres=iou_thres, max_det=max_det, save_hybrid=save_hybrid,
                              plot_jobs=plot_jobs, postprocess=postprocess, n_loss_items=n_loss_items)
    finally:
        model.float()


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
    return True
