"""The one validation loop, of val.py, segment/val.py, classify/val.py and the three trainers: per batch, the task's
steps (to the device, forward, loss, post-process) and its evaluator's update.

    steps = DetectionSteps(model, evaluator, compute_loss=loss)   # or SegmentationSteps, ClassificationSteps
    profiles = validation_pass(model, dataloader, steps, desc=TABLE_HEADER)

A task's steps object (utils/evaluation/detection_steps.py, utils/segment/validation.py, utils/classify/evaluate.py)
holds what differs: to_device(batch) -> the batch on the device; forward(model, batch) -> the model's output (in
chunks when memory is short: utils/evaluation/batch_memory.py); add_loss(out, batch); postprocess(out, batch) -> the
per-image results (detection: NMS); update(batch_i, batch, out, preds): the evaluator's update and the batch plots.
run_validation wraps the pass for detection and segmentation: plot helpers, figures, Speed line, COCO JSON, losses.
"""
import sys

import numpy as np
from tqdm import tqdm

from utils import signals
from utils.backend import inference_mode, to_numpy
from utils.evaluation.detection_steps import DetectionSteps
from utils.inference.profile import Profile, ms_per_image
from utils.log import LOGGER
from utils.nms import non_max_suppression
from utils.plot_jobs import PlotJobs

TQDM_BAR_FORMAT = "{l_bar}{bar:10}{r_bar}"


def validation_pass(model, dataloader, steps, desc=None, progress=True):
    """Every batch of dataloader through steps (module docstring), each stage timed. desc: the progress bar's text
    (the table header); progress=False: no bar (the classification trainer's epochs). Returns the (pre-process,
    inference, post-process) Profiles."""
    profiles = Profile(device=steps.device), Profile(device=steps.device), Profile(device=steps.device)
    bar = tqdm(dataloader, desc=desc, bar_format=TQDM_BAR_FORMAT, disable=not progress, file=sys.stdout)  # the log's
    for batch_i, batch in enumerate(bar):
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with profiles[0]:
            batch = steps.to_device(batch)
        with profiles[1]:
            out = steps.forward(model, batch)
        steps.add_loss(out, batch)
        with profiles[2]:
            preds = steps.postprocess(out, batch)
        steps.update(batch_i, batch, out, preds)
        del batch, out, preds  # the batch's tensors go before the next batch is loaded and run
    return profiles


@inference_mode()
def run_validation(model, dataloader, evaluator, compute_loss=None, half=False, augment=False, conf_thres=0.001,
                   iou_thres=0.6, max_det=300, save_hybrid=False, speed_shape=None, plot_jobs=None,
                   postprocess=non_max_suppression, n_loss_items=3, steps=DetectionSteps, **step_options):
    """Validate model (in eval mode and the precision half says) on dataloader's batches with the task's steps
    (a class made with (model, evaluator, compute_loss=..., ...); detection's by default, segmentation's:
    utils.segment.validation.SegmentationSteps). compute_loss: also average the task's losses from the raw maps an
    eval-mode model returns; speed_shape: the input shape to name in a printed Speed line (none without it).
    Returns ((the task's figures (detection: P, R, mAP50, mAP50-95), *losses), per-class maps, (pre-process,
    inference, NMS) ms per image): what val.run returns. With evaluator.plots the plot files are drawn beside the
    batches by plot_jobs (a utils.plot_jobs.PlotJobs: the trainer's; one of its own, forked before the first batch,
    when None) and all written when this returns. postprocess: detection's raw predictions -> per-image results
    (Task.postprocess: NMS); n_loss_items: how many loss items compute_loss returns (len(Task.loss_names))."""
    jobs = plot_jobs if plot_jobs is not None else PlotJobs(processes=None if evaluator.plots else False)
    draw, evaluator.draw = evaluator.draw, jobs.submit
    if evaluator.plots and plot_jobs is None:  # forked while the heap is small: each helper keeps a copy of what
        jobs.start()  # the batches write later; a caller's (the trainer's) helpers started with its run
    try:
        steps = steps(model, evaluator, compute_loss=compute_loss, half=half, augment=augment, conf_thres=conf_thres,
                      iou_thres=iou_thres, max_det=max_det, save_hybrid=save_hybrid, postprocess=postprocess,
                      n_loss_items=n_loss_items, **step_options)
        profiles = validation_pass(model, dataloader, steps, desc=evaluator.table_header)
        return _figures(dataloader, evaluator, steps, profiles, speed_shape)
    finally:
        jobs.wait() if plot_jobs is not None else jobs.close()
        evaluator.draw = draw


def _figures(dataloader, evaluator, steps, profiles, speed_shape):
    metrics = evaluator.compute()
    t = ms_per_image(profiles, evaluator.seen)
    if speed_shape is not None:
        LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {speed_shape}" % t)
    evaluator.evaluate_coco(metrics, getattr(getattr(dataloader, "dataset", None), "im_files", []))
    n_batches = max(len(dataloader), 1) if hasattr(dataloader, "__len__") else 1
    losses = (to_numpy(steps.loss) / n_batches).tolist()
    if steps.compute_loss and not np.isfinite(losses).all():  # results.csv would show nan with no word of why
        LOGGER.warning(f"WARNING ⚠️ validation losses are not finite ({', '.join(steps.loss_names)} = "
                       f"{[round(x, 4) for x in losses]}): the model's outputs on the validation images are NaN or "
                       "overflow, so this epoch's metrics mean nothing; lower --hyp lr0 or check the labels.")
    return metrics.results(losses), metrics.maps(), t
