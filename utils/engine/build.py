"""build_training(): every part of a run, built from its options in the one order that works.

The order matters in three places, each marked below: the model exists before the optimizer; the EMA copies the
model after AutoAnchor and before DDP wrapping; a resumed run's RNG streams are restored last.
"""
import numpy as np

from utils import backend
from utils.autobatch import check_train_batch_size
from utils.checkpoint.run_options import official_opt
from utils.data import EarlyStartLoader
from utils.dataset_config import check_dataset
from utils.distributed import DistContext, ddp, probe
from utils.distributed.collectives import main_process_first
from utils.engine.errors import TrainingError
from utils.engine.hyp import load_hyp, scale_hyp
from utils.engine.initial_model import initial_model
from utils.engine.parts import FastPaths, Precision, RunOptions, TrainingParts, TrainingState
from utils.engine.resume import check_resumed_classes, read_resume_checkpoint, restore_rng, restore_training_state
from utils.engine.run_folder import prepare_run_folder
from utils.engine.schedule import NBS, Schedule, set_param_groups
from utils.engine.seeding import process_seed
from utils.img_size import check_img_size
from utils.log import LOGGER, colorstr
from utils.plot_jobs import PlotJobs
from utils.precision import training_precision
from utils.tasks.detect import DETECT
from utils.torch_utils import ModelEMA, de_parallel, set_seed, smart_optimizer


def build_training(opt, hyp, device, dist=None, task_plugin=DETECT):
    """The TrainingParts of one run. opt: train.py's options (opt.save_dir claimed, opt.weights the last.pt to
    resume when opt.resume); hyp: a dict or a --hyp path; dist: this process's DistContext (single process when
    None); task_plugin: the utils.tasks.Task whose dataset, head check, loss, class weights, label plots and results
    columns the run uses."""
    dist = dist or DistContext()
    task = task_plugin
    fast = FastPaths.from_opt(opt)  # one reading of the speed flags for the optimizer, the EMA, the clip, the loss
    hyp = load_hyp(hyp)
    opt_hyp = dict(hyp)  # as loaded: what opt.yaml and checkpoints record (official resume reads it)
    set_seed(process_seed(opt.seed, dist), deterministic=True)  # official: seed + 1 + RANK, RANK -1 alone
    run, loggers = prepare_run_folder(opt, hyp, dist, task.results_keys())
    with main_process_first(dist):
        data = check_dataset(opt.data, allow_scripts=getattr(opt, "allow_download_scripts", False))
    nc = 1 if opt.single_cls else int(data["nc"])
    names = {0: "item"} if opt.single_cls and len(data["names"]) != 1 else data["names"]

    ckpt = read_resume_checkpoint(opt.weights, task.build_model) if opt.resume else None
    if ckpt is not None:  # the same classes as the run being resumed, or one line before anything is trained
        check_resumed_classes(ckpt, nc, names, opt.data, name=opt.weights)
    model = initial_model(opt, hyp, nc, device, ckpt, task.model_class, task.check_pretrained)
    gs = max(int(model.stride.max()), 32)  # grid size (max stride)
    imgsz = check_img_size(opt.imgsz, gs, floor=gs * 2)

    batch_size = opt.batch_size
    if batch_size == -1:  # AutoBatch; train.py refuses -1 under DDP, as the official trainer does
        batch_size = check_train_batch_size(model, imgsz, amp=backend.has_amp(device))
    accumulate = max(round(NBS / batch_size), 1)
    hyp["weight_decay"] *= batch_size * accumulate / NBS  # decay per nominal batch, not per optimizer step
    optimizer = smart_optimizer(model, opt.optimizer, hyp["lr0"], hyp["momentum"], hyp["weight_decay"],
                                fused=fast.multi_tensor)
    for g in optimizer.param_groups:  # what a LambdaLR records; the schedule scales it
        g["initial_lr"] = g["lr"]
    amp_dtype, channels_last, scaler = training_precision(device, getattr(opt, "amp", None), model)

    train_loader, dataset, val_loader = _loaders(task, opt, hyp, data, imgsz, gs, nc, batch_size, dist)
    # Loader workers are forked now, while this process is small: a worker forked from a trainer holding gigabytes
    # of activations makes the trainer copy every page it writes afterwards (1-2 s of stall at yolov5n 320 when the
    # validation workers were forked at the final epoch). Their first batches load during the rest of the set-up.
    if ckpt is None and not opt.image_weights and not dist.distributed:
        # the order of epoch 0 is settled; the iterator draws its base seed from the framework's RNG, which nothing
        # below uses first
        train_loader.sampler.set_epoch(0)
        train_loader.start()
    if val_loader is not None:
        val_loader.start()  # kept for the first validation (the official trainer's loader starts the same way)
    plots = PlotJobs(processes=None if dist.is_main else False)  # drawn beside training (main process only)
    if dist.is_main and not opt.resume:
        if not opt.noautoanchor and task.check_head is not None:
            task.check_head(dataset, model, hyp, imgsz)
        if not opt.noplots:
            _plot_labels(task, dataset, names, run.save_dir, plots)

    # ORDER: the EMA starts from the model as AutoAnchor left it (so it never averages stale anchors in), and is made
    # before DDP wrapping: OneFlow's DDP puts collective hooks on the module itself, so a copy made after it would
    # broadcast buffers in every forward of rank 0's validation, which the other ranks never join (a hang).
    ema = ModelEMA(model, fused=fast.multi_tensor) if dist.is_main else None
    state = TrainingState()
    if ckpt is not None:
        state = restore_training_state(ckpt, optimizer, scaler, ema, device, opt.epochs, name=opt.weights)
    schedule = Schedule.from_hyp(hyp, [g["initial_lr"] for g in optimizer.param_groups], opt.epochs,
                                 len(train_loader), batch_size, cos_lr=opt.cos_lr)
    if ckpt is None or ckpt.get("optimizer") is None:  # a resumed optimizer state holds its epoch's lrs already
        set_param_groups(optimizer, schedule.epoch_lrs(state.start_epoch))

    nl = de_parallel(model).model[-1].nl
    hyp = scale_hyp(hyp, nl, nc, imgsz, opt.label_smoothing)
    # attached for the EMA and the checkpoints, whose models carry them as official ones do; the loss gets its own
    model.nc, model.hyp, model.names = nc, hyp, names
    model.class_weights = backend.from_numpy(task.class_weights(dataset.labels, nc)).float().to(device) * nc
    compute_loss = task.build_loss(model, hyp, fast.fused_iou)
    # SyncBatchNorm (CUDA only; --sync-bn on CPU was refused before any work) and DDP when distributed, then the
    # outside observer YOLO_DDP_PROBE names, if any (the DDP tests' recorder)
    model = ddp.wrap_model(model, dist, device, sync_bn=opt.sync_bn)
    if dist.distributed:  # an observer of DDP ranks, named by YOLO_DDP_PROBE; single-process runs never look for one
        probe.attach(model, train_loader, dist)

    if ckpt is not None:
        restore_rng(ckpt, name=opt.weights)  # ORDER: last, see restore_rng
    return TrainingParts(
        task=task, model=model, optimizer=optimizer, compute_loss=compute_loss, train_loader=train_loader,
        schedule=schedule, device=device, epochs=opt.epochs, ema=ema, scaler=scaler,
        precision=Precision(dtype=amp_dtype, channels_last=channels_last), dist=dist, imgsz=imgsz, gs=gs,
        multi_scale=opt.multi_scale, quad=opt.quad, fast=fast, state=state, options=RunOptions.from_opt(opt),
        recorded_opt=official_opt(opt, opt_hyp), hyp=hyp, opt_hyp=opt_hyp, data=data, nc=nc, names=names,
        is_coco=str(data.get("val", "")).endswith("coco/val2017.txt"), dataset=dataset, val_loader=val_loader,
        run=run, loggers=loggers, plots=plots)


def _loaders(task, opt, hyp, data, imgsz, gs, nc, batch_size, dist):
    """(train loader, train dataset, val loader or None on other ranks). batch_size is the total over ranks."""
    if dist.distributed and batch_size % dist.world_size:
        raise TrainingError(f"--batch-size {batch_size} must be a multiple of the world size {dist.world_size}: "
                            "it is the total over all processes.")
    bs = batch_size // dist.world_size
    with main_process_first(dist):  # DDP: local rank 0 scans labels and writes the .cache first; the others read it
        train_loader, dataset = task.build_dataloader(
            data["train"], imgsz, bs, gs, opt.single_cls, hyp=hyp, augment=True,
            cache=None if opt.cache == "val" else opt.cache, rect=opt.rect, dist=dist,
            workers=opt.workers, image_weights=opt.image_weights, quad=opt.quad, prefix=colorstr("train: "),
            shuffle=True, seed=opt.seed, nc=nc)  # nc: a class id >= nc stops naming the file and line
    val_loader = None
    if dist.is_main:
        val_loader = EarlyStartLoader(task.build_dataloader(
            data["val"], imgsz, bs * 2, gs, opt.single_cls, hyp=hyp, cache=None if opt.noval else opt.cache,
            rect=True, rank=-1, workers=opt.workers * 2, pad=0.5, prefix=colorstr("val: "), nc=nc)[0])
    return EarlyStartLoader(train_loader), dataset, val_loader


def _plot_labels(task, dataset, names, save_dir, plots):
    labels = np.concatenate([np.asarray(l).reshape(-1, 5) for l in dataset.labels], 0)
    LOGGER.info(f"Plotting labels to {save_dir / 'labels.jpg'}... ")
    plots.submit("labels.jpg", task.plot_labels, labels, names, save_dir)
