"""build_training(): every part of a run, built from its options in the one order that works, for every task.

The task answers what differs (its TrainerSteps, utils/tasks/task.py: hyperparameters, the run folder's settings
files, data, model, input size, loaders, loss, nominal batch; the YOLO detector's steps, utils/engine/yolo_steps.py,
where it names none); everything else, and the order, is here. The order matters in three places, each marked below:
the model exists before the optimizer; the EMA copies the model after AutoAnchor and before DDP wrapping; a resumed
run's RNG streams are restored last.
"""
import dataclasses

import numpy as np

from utils import backend
from utils.autobatch import check_train_batch_size
from utils.checkpoint.run_options import RecordedFlags, typed_options
from utils.distributed import DistContext, ddp, probe
from utils.engine.errors import TrainingError
from utils.engine.parts import FastPaths, Precision, RunOptions, TrainingParts, TrainingState
from utils.engine.resume import read_resume_checkpoint, restore_rng, restore_training_state
from utils.engine.run_folder import prepare_run_folder
from utils.engine.schedule import Schedule, set_param_groups
from utils.engine.seeding import process_seed
from utils.engine.yolo_steps import steps_of
from utils.log import LOGGER
from utils.plot_jobs import PlotJobs
from utils.precision import training_precision
from utils.tasks.detect import DETECT
from utils.torch_utils import ModelEMA, round_to_half, set_seed, smart_optimizer


def build_training(opt, hyp, device, dist=None, task_plugin=DETECT, options=None):
    """The TrainingParts of one run. opt: the training script's options (save_dir claimed, weights the last.pt to
    resume when resume), read here once and frozen (RecordedFlags, and the task steps' typed inputs record); hyp: a
    dict or a --hyp path (the task's hyperparameters step reads it); dist: this process's DistContext (single process
    when None); task_plugin: the utils.tasks.Task trained; options: the RunOptions of the script's flags (None: made
    from the flags, as train.py's)."""
    dist = dist or DistContext()
    flags = RecordedFlags.of(opt)  # the engine's door: below it, records made from these frozen flags
    steps = steps_of(task_plugin)
    inputs = typed_options(steps.inputs, flags)  # the flags this build and the task's steps read, typed
    fast = FastPaths.of(flags)  # one reading of the speed flags for the optimizer, the EMA, the clip, the loss
    hyp = steps.hyperparameters(inputs, hyp)
    opt_hyp = dict(hyp)  # as loaded: what opt.yaml and checkpoints record (official resume reads it)
    set_seed(process_seed(inputs.seed, dist), deterministic=True)  # official: seed + 1 + RANK, RANK -1 alone
    task = task_plugin.for_options(inputs)
    settings = steps.settings_files(flags, opt_hyp)
    run, loggers = prepare_run_folder(flags, hyp, dist, task.results_keys(), settings_files=settings)
    options = options or typed_options(RunOptions, flags)
    data = steps.read_data(inputs, dist)

    ckpt = read_resume_checkpoint(inputs.weights, task.build_model) if inputs.resume else None
    model = steps.start_model(task, inputs, hyp, data, device, ckpt, dist)
    imgsz, gs = steps.input_size(model, inputs.imgsz)
    batch_size = _batch_size(inputs.batch_size, model, imgsz, device, dist)
    optimizer = _optimizer(model, inputs.optimizer, hyp, batch_size, steps.nominal_batch, fast)  # ORDER: after model
    amp_dtype, channels_last, scaler = training_precision(device, inputs.amp, model)

    train_loader, dataset, val_loader = steps.loaders(task, inputs, options, hyp, data, imgsz, gs, batch_size, dist)
    _start_loaders(train_loader, val_loader, first_epoch_settled=ckpt is None and not options.image_weights and
                   not dist.distributed)
    # drawn beside training (main process only); matplotlib warmed ahead for a run that draws results.png
    plots = PlotJobs(processes=None if dist.is_main else False, warm_matplotlib=task.results_plot)
    if dist.is_main and not inputs.resume:
        _before_first_run(task, options, dataset, model, hyp, imgsz, data.names, run.save_dir, plots)
    if not inputs.resume and task.check_head is not None:  # every rank: the same rounding as rank 0's broadcast
        round_to_half(model)  # official detect/segment: model.half().float() after AutoAnchor (a new run only)

    # ORDER: the EMA starts from the model as AutoAnchor left it (so it never averages stale anchors in), and is made
    # before DDP wrapping: OneFlow's DDP puts collective hooks on the module itself, so a copy made after it would
    # broadcast buffers in every forward of rank 0's validation, which the other ranks never join (a hang).
    ema = ModelEMA(model, fused=fast.multi_tensor) if dist.is_main else None
    state = TrainingState()
    if ckpt is not None:
        state = restore_training_state(ckpt, optimizer, scaler, ema, device, inputs.epochs, name=inputs.weights)
    schedule = _schedule(hyp, optimizer, inputs.epochs, len(train_loader), batch_size, steps.nominal_batch, options,
                         dist, steps.lagging_lr_step)
    if ckpt is None or ckpt.get("optimizer") is None:  # a resumed optimizer state holds its epoch's lrs already
        set_param_groups(optimizer, schedule.lrs_of_epoch(state.start_epoch))
    compute_loss, hyp = steps.loss(task, inputs, model, hyp, data, dataset, imgsz, device, fast, dist)
    model = _distributed(model, train_loader, dist, device, options.sync_bn)
    if ckpt is not None:
        restore_rng(ckpt, name=inputs.weights)  # ORDER: last, see restore_rng
    return TrainingParts(
        task=task, model=model, optimizer=optimizer, compute_loss=compute_loss, train_loader=train_loader,
        schedule=schedule, device=device, epochs=inputs.epochs, ema=ema, scaler=scaler,
        precision=Precision(dtype=amp_dtype, channels_last=channels_last), dist=dist, imgsz=imgsz, gs=gs,
        multi_scale=options.multi_scale, quad=options.quad, fast=fast, state=state, options=options,
        recorded_opt=settings["opt.yaml"], hyp=hyp, opt_hyp=opt_hyp, data=data.data, nc=data.nc, names=data.names,
        is_coco=str(data.data.get("val", "")).endswith("coco/val2017.txt"), dataset=dataset, val_loader=val_loader,
        run=run, loggers=loggers, plots=plots)


def _batch_size(batch_size, model, imgsz, device, dist):
    """The total batch size over the ranks: --batch-size, or AutoBatch's for -1 (refused under DDP by the launch
    checks, and by classify/train.py, as the official trainers do)."""
    if batch_size == -1:
        batch_size = check_train_batch_size(model, imgsz, amp=backend.has_amp(device))
    if dist.distributed and batch_size % dist.world_size:
        raise TrainingError(f"--batch-size {batch_size} must be a multiple of the world size {dist.world_size}: "
                            "it is the total over all processes.")
    return batch_size


def _optimizer(model, name, hyp, batch_size, nominal_batch, fast):
    """--optimizer over the model's three parameter groups, each group's initial_lr recorded (as a LambdaLR does; the
    schedule scales it). With a nominal batch the weight decay is per nominal batch, not per optimizer step."""
    if nominal_batch is not None:
        accumulate = max(round(nominal_batch / batch_size), 1)
        hyp["weight_decay"] *= batch_size * accumulate / nominal_batch
    optimizer = smart_optimizer(model, name, hyp["lr0"], hyp["momentum"], hyp["weight_decay"], fused=fast.multi_tensor)
    for g in optimizer.param_groups:
        g["initial_lr"] = g["lr"]
    return optimizer


def _start_loaders(train_loader, val_loader, first_epoch_settled):
    """Loader workers are forked now, while this process is small: a worker forked from a trainer holding gigabytes
    of activations makes the trainer copy every page it writes afterwards (1-2 s of stall at yolov5n 320 when the
    validation workers were forked at the final epoch). Their first batches load during the rest of the set-up."""
    if first_epoch_settled:
        # the order of epoch 0 is settled (a new run, no --image-weights, one process); the iterator draws its base
        # seed from the framework's RNG, which nothing below uses first
        train_loader.sampler.set_epoch(0)
        train_loader.start()
    if val_loader is not None:
        val_loader.start()  # kept for the first validation (the official trainer's loader starts the same way)


def _before_first_run(task, options, dataset, model, hyp, imgsz, names, save_dir, plots):
    """A new run's head check (AutoAnchor) and labels.jpg, for the tasks that have them (main process)."""
    if not options.noautoanchor and task.check_head is not None:
        task.check_head(dataset, model, hyp, imgsz)
    if not options.noplots and task.plot_labels is not None:
        labels = np.concatenate([np.asarray(l).reshape(-1, 5) for l in dataset.labels], 0)
        LOGGER.info(f"Plotting labels to {save_dir / 'labels.jpg'}... ")
        plots.submit("labels.jpg", task.plot_labels, labels, names, save_dir)


def _schedule(hyp, optimizer, epochs, batches_per_epoch, batch_size, nominal_batch, options, dist, lagging_lr_step):
    """The lr, momentum and accumulation of every iteration (schedule.py), from each group's initial_lr."""
    base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
    if nominal_batch is None:  # no warmup (warmup_iters -1), one optimizer step per batch (the nominal batch)
        bs = batch_size // dist.world_size
        return Schedule(base_lrs=tuple(base_lrs), epochs=epochs, lrf=hyp["lrf"], warmup_iters=-1,
                        warmup_bias_lr=0.0, warmup_momentum=hyp["momentum"], momentum=hyp["momentum"],
                        batch_size=bs, nominal_batch=bs)
    schedule = Schedule.from_hyp(hyp, base_lrs, epochs, batches_per_epoch, batch_size, cos_lr=options.cos_lr,
                                 lagging_lr_step=lagging_lr_step)
    return dataclasses.replace(schedule, nominal_batch=nominal_batch)


def _distributed(model, train_loader, dist, device, sync_bn):
    """SyncBatchNorm (CUDA only; --sync-bn on CPU was refused before any work) and DDP when distributed, then the
    outside observer YOLO_DDP_PROBE names, if any (the DDP tests' recorder)."""
    model = ddp.wrap_model(model, dist, device, sync_bn=sync_bn)
    if dist.distributed:  # single-process runs never look for a probe
        probe.attach(model, train_loader, dist)
    return model
