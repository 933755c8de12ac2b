"""The segmentation validation loop, shared by segment/val.py and the trainer: batches (im, targets, paths, shapes,
masks) through the model, NMS with the mask coefficients and a SegmentationEvaluator.

    evaluator = SegmentationEvaluator(nc, names, overlap=True)
    results, maps, times = run_seg_validation(model, loader, evaluator, nm=32, compute_loss=loss)

validate_seg_model() is the trainer's call (Task.validate of utils/tasks/segment.py), with the signature and return
of utils.evaluation.validate_model.
"""
import math
from pathlib import Path

from utils import signals
from utils.backend import inference_mode, is_cuda, to_numpy, torch
from utils.dataset_config import check_dataset
from utils.evaluation.batch_memory import ForwardBudget, forward_in_chunks
from utils.evaluation.evaluator import IOU_THRESHOLDS
from utils.evaluation.runner import model_device, model_names
from utils.inference.profile import Profile, ms_per_image
from utils.inference.steps import preprocess
from utils.log import LOGGER
from utils.nms import non_max_suppression
from utils.plot_jobs import PlotJobs
from utils.segment.evaluator import TABLE_HEADER, SegmentationEvaluator

TQDM_BAR_FORMAT = "{l_bar}{bar:10}{r_bar}"


def _progress(dataloader):
    try:
        from tqdm import tqdm  # optional for segment/val.py users: without it the header is printed once
    except ImportError:
        LOGGER.info(TABLE_HEADER)
        return dataloader
    return tqdm(dataloader, desc=TABLE_HEADER, bar_format=TQDM_BAR_FORMAT)


@inference_mode()
def run_seg_validation(model, dataloader, evaluator, nm=32, compute_loss=None, half=False, augment=False,
                       conf_thres=0.001, iou_thres=0.6, max_det=300, speed_shape=None, plot_jobs=None):
    """The segmentation validation loop: ((box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, *losses),
    per-class maps, per-image ms (pre, inference, NMS)) as segment/val.run returns them. compute_loss: also average
    the (box, seg, obj, cls) losses from the raw maps an eval-mode model returns third. NMS has no time limit (the
    official one makes the figures follow the machine load)."""
    jobs = plot_jobs if plot_jobs is not None else PlotJobs(processes=None if evaluator.plots else False)
    draw, evaluator.draw = evaluator.draw, jobs.submit
    if evaluator.plots and plot_jobs is None:  # our own helpers: forked while the heap is small, as detection's
        jobs.start()  # validation does (utils/evaluation/runner.py); a caller's (the trainer's) started with the run
    try:
        device = model_device(model)
        profiles = Profile(device), Profile(device), Profile(device)
        loss = torch.zeros(4, device=device)
        budget = ForwardBudget(model)
        for batch_i, (im, targets, paths, shapes, masks) in enumerate(_progress(dataloader)):
            signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
            with profiles[0]:
                im = preprocess(im, device, half)
                targets = targets.to(device)
                nb, _, height, width = im.shape
            with profiles[1]:
                chunk = budget.chunk_size(im)  # the whole batch unless the memory headroom is small
                if chunk >= nb:
                    out = model(im, augment=augment) if augment else model(im)
                else:  # (decoded, protos) kept; the raw maps too only when the loss needs them
                    out = forward_in_chunks(model, im, chunk, augment=augment, keep=None if compute_loss else 2)
                preds, protos = out[0], out[1]
            if compute_loss:
                loss += compute_loss((out[2], protos), targets, masks.to(device).float())[1]
            with profiles[2]:
                preds = non_max_suppression(preds, conf_thres, iou_thres, multi_label=True,
                                            agnostic=evaluator.single_cls, max_det=max_det, nm=nm,
                                            time_limit=math.inf)
            evaluator.update(preds, protos, targets, masks, shapes, (height, width), paths)
            evaluator.plot_batch(batch_i, im, targets, [p[:, :6] for p in preds], paths, max_det=max_det,
                                 masks=masks)
            del im, out, preds, protos  # this batch's tensors go before the next batch is loaded
        metrics = evaluator.compute()
        t = ms_per_image(profiles, evaluator.seen)
        if speed_shape is not None:
            LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {speed_shape}"
                        % t)
        evaluator.evaluate_coco(metrics, getattr(getattr(dataloader, "dataset", None), "im_files", []))
        n_batches = max(len(dataloader), 1)
        return metrics.results((to_numpy(loss) / n_batches).tolist()), metrics.maps(), t
    finally:
        jobs.wait() if plot_jobs is not None else jobs.close()
        evaluator.draw = draw


def seg_evaluator(data, names, save_dir=Path(""), single_cls=False, plots=True, verbose=False, task="val",
                  save_txt=False, save_conf=False, save_json=False, weights=None, overlap=False):
    """A SegmentationEvaluator for a checked dataset dict (evaluator_for_dataset's arguments, plus overlap: the
    loader's masks are one overlap image per picture)."""
    from utils.segment.coco_json import CocoSegPredictions  # noqa: PLC0415 (pycocotools only when saving JSON)
    nc = 1 if single_cls else int(data["nc"])
    names = dict(names or data.get("names", {}))
    if single_cls:
        names = {0: names.get(0, "item")}
    coco = CocoSegPredictions.for_dataset(data, save_dir, weights) if save_json else None
    return SegmentationEvaluator(nc, names, overlap=overlap, native=save_json, iouv=IOU_THRESHOLDS,
                                 single_cls=single_cls, plots=plots, save_dir=save_dir, verbose=verbose, task=task,
                                 save_txt=save_txt, save_conf=save_conf, coco=coco)


def validate_seg_model(model, dataloader, data, single_cls=False, half=False, compute_loss=None, save_dir=Path(""),
                       plots=True, verbose=False, conf_thres=0.001, iou_thres=0.6, max_det=300, augment=False,
                       save_txt=False, save_hybrid=False, save_conf=False, save_json=False, task="val",
                       plot_jobs=None, task_plugin=None, overlap=False):
    """The trainer's validation of an in-memory segmentation model (the EMA each epoch, best.pt at the end) on its
    validation loader; utils.evaluation.validate_model's arguments and return, plus overlap (the loader's mask
    layout). The model is left in fp32."""
    half = half and is_cuda(model_device(model))
    model.half() if half else model.float()
    if isinstance(data, (str, Path)):
        data = check_dataset(data)
    model.eval()
    head = model.model[-1]
    evaluator = seg_evaluator(data, model_names(model), save_dir, single_cls=single_cls, plots=plots,
                              verbose=verbose, task=task, save_txt=save_txt, save_conf=save_conf, save_json=save_json,
                              overlap=overlap)
    try:
        return run_seg_validation(model, dataloader, evaluator, nm=head.nm, compute_loss=compute_loss, half=half,
                                  augment=augment, conf_thres=conf_thres, iou_thres=iou_thres, max_det=max_det,
                                  plot_jobs=plot_jobs)
    finally:
        model.float()
