"""The training loop and its hooks, top to bottom: TrainLoop runs epochs of steps over the parts build_training()
made; everything around the step (safe points for signals, the progress bar, plots, validation, early stopping,
results.csv, checkpoints, the final evaluation) is a hook.

Behaviour follows the official YOLOv5 trainer: gradient accumulation up to a nominal batch of 64, the warmup and lr
schedule of utils/engine/schedule.py, gradient clipping at 10, ModelEMA, fitness = 0.1 mAP50 + 0.9 mAP50-95, early
stopping, last.pt every epoch and best.pt on improvement, stripped final checkpoints. Only the main process
validates, logs and saves; every process runs the steps and the safe points.
"""
import math
import random
import time

import numpy as np
from tqdm import tqdm

from models.experimental import attempt_load
from utils import backend, signals
from utils.backend import F
from utils.atomic_files import OutputWriteError
from utils.checkpoint import save_checkpoint
from utils.checkpoint.training import final_checkpoint, get_rng_states, log_stripped, strip_optimizer, \
    training_checkpoint
from utils.distributed.collectives import broadcast_flag
from utils.data.class_weights import resample_by_image_weights
from utils.engine.errors import NonFiniteLossError, TrainingError
from utils.engine.finite_weights import check_weights_before_save
from utils.engine.schedule import set_param_groups
from utils.evaluation import validate_model
from utils.log import LOGGER, colorstr
from utils.loss_readback import LossReadback
from utils.plots import images_as_drawn
from utils.torch_utils import EarlyStopping, de_parallel

CLIP_NORM = 10.0  # gradient norm clip, as the official trainer


class HookBase:
    """Something done at fixed points of training. TrainLoop sets ``self.loop`` before the first call; a hook reads
    the run's parts (``loop.parts``) and the loop's state (``loop.epoch``, ``loop.iter``, ``loop.ni``, ``loop.results``,
    ...) from it.

    The contract, per call, in the order the loop makes them (each hook in the order it was registered):
    * before_train(): once, before the first epoch (after a resume: before the first resumed epoch).
    * before_epoch(): at the start of each epoch, before its first batch is loaded; may change what the epoch's
      loader yields (the --image-weights resampling does).
    * before_step() / after_step(): around each run_step(); after_step sees the step's batch (``loop.imgs`` as the
      model got them, ``loop.targets``, ``loop.paths``) and ``loop.losses_read`` (the epoch's mean loss items when
      this step read the losses back, else None).
    * after_epoch(): after the epoch's last step and the epoch's lr update, with ``loop.lrs`` the group lrs the
      epoch ended with and ``loop.final_epoch`` telling whether training ends here unless told otherwise.
    * after_train(): once, after the last epoch, only when training ended normally (not on an exception).
    A hook stops training with ``loop.request_stop()``: the current epoch finishes (its after_epoch calls included),
    then after_train runs. Under DDP rank 0's request decides for every rank.
    """
    loop = None

    def before_train(self):
        pass

    def before_epoch(self):
        pass

    def before_step(self):
        pass

    def after_step(self):
        pass

    def after_epoch(self):
        pass

    def after_train(self):
        pass


class TrainLoop:
    """Runs the epochs of a run over TrainingParts and calls its hooks. run_step() is one iteration: forward, loss,
    loss read-back, backward, and every `accumulate` iterations an optimizer step and an EMA update."""

    def __init__(self, parts, hooks=()):
        self.parts = parts
        state = parts.state
        self.epochs, self.start_epoch = parts.epochs, state.start_epoch
        self.epoch, self.iter = state.start_epoch, 0  # the current epoch, and the batch index within it
        self.nb = len(parts.train_loader)  # batches per epoch
        self.last_opt_step = state.last_opt_step
        self.readback = LossReadback(parts.device, n_items=len(parts.task.loss_names))
        self.mloss = np.zeros(len(parts.task.loss_names))  # the epoch's mean loss items as last read back
        self.losses_read = None  # mloss when this step read the losses back, else None
        self.imgs = self.targets = self.paths = None  # the current step's batch, for after_step hooks
        self.extras = ()  # the batch's items after shapes (segmentation: masks), as the loader gave them
        self.lrs = []  # group lrs at the end of the epoch (results.csv x/lr0..2)
        # metrics then val losses (detection: P, R, mAP50, mAP50-95, val box, obj, cls)
        self.results = (0,) * (len(parts.task.metric_names) + len(parts.task.loss_names))
        self.maps = state.maps if state.maps is not None else np.zeros(parts.nc)  # per-class mAP50-95
        self.fitness = 0.0  # this epoch's
        self.best_fitness, self.best_epoch = state.best_fitness, state.best_epoch
        self.final_epoch = False
        self.saved_in_epoch = {}  # checkpoint path -> the epoch this run last wrote it in
        self.written_stripped = set()  # checkpoints the final epoch wrote in their final (stripped) form
        self.stop_possible = False  # an early stop may come after the next epoch (it is then validated)
        self._stop_requested = False
        self._hooks = []
        self.register_hooks(hooks)

    @property
    def ni(self):
        """Integrated iteration: batches since the start of training."""
        return self.iter + self.nb * self.epoch

    def register_hooks(self, hooks):
        for h in hooks:
            if h is not None:
                h.loop = self
                self._hooks.append(h)

    def request_stop(self):
        self._stop_requested = True

    @property
    def ends_here(self):
        """Training ends after this epoch unless a signal stops it sooner: the last epoch, or an early stop
        (requested by the main process's hooks, which run before the checkpoint hook)."""
        return self.epoch + 1 == self.epochs or self._stop_requested

    def _call(self, name):
        for h in self._hooks:
            getattr(h, name)()

    # ------------------------------------------------------------------------------------------------ the loop
    def train(self):
        """Train from start_epoch to epochs (or an earlier stop); returns the final results tuple."""
        self._call("before_train")
        for self.epoch in range(self.start_epoch, self.epochs):
            self._call("before_epoch")
            self.run_epoch()
            self.lrs = [float(g["lr"]) for g in self.parts.optimizer.param_groups]
            set_param_groups(self.parts.optimizer, self.parts.schedule.epoch_lrs(self.epoch + 1))  # the lr step
            self.final_epoch = self.epoch + 1 == self.epochs or self.stop_possible
            self._call("after_epoch")
            if broadcast_flag(self.parts.dist, self._stop_requested, self.parts.device):  # rank 0's decision, everywhere
                break
        self._call("after_train")
        return self.results

    def run_epoch(self):
        p = self.parts
        p.model.train()
        sampler = getattr(p.train_loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.epoch)  # a fresh, epoch-seeded shuffle: the same order after a resume
        self.mloss = np.zeros(len(self.parts.task.loss_names))
        self.readback.reset()
        p.optimizer.zero_grad()
        for self.iter, batch in enumerate(p.train_loader):
            self._call("before_step")
            self.run_step(batch)
            self._call("after_step")

    def run_step(self, batch):
        """One iteration on batch (uint8 images, targets, paths, shapes, *extras) at (self.epoch, self.iter); the
        extras (segmentation's masks) go to the loss after the targets."""
        p, ni = self.parts, self.ni
        imgs, targets, paths, _, *extras = batch
        imgs = backend.to_device(imgs, p.device)
        if p.precision.channels_last:  # reordered as 1-byte pixels; the conversions below keep the layout
            imgs = backend.to_channels_last(imgs)
        imgs = imgs.float() / 255
        settings = p.schedule.at(ni, self.epoch)
        if p.schedule.in_warmup(ni):
            set_param_groups(p.optimizer, settings.lrs, settings.momentum)
        if p.multi_scale:
            imgs = random_rescale(imgs, p.imgsz, p.gs)
        with backend.autocast(p.device, enabled=p.precision.autocast, dtype=p.precision.dtype):
            pred = p.model(imgs if p.task.prepare_images is None else p.task.prepare_images(imgs))
            loss, loss_items = p.compute_loss(pred, backend.to_device(targets, p.device),
                                              *(backend.to_device(x, p.device) for x in extras))
        if p.dist.distributed:
            loss = loss * p.dist.world_size  # DDP averages gradients over ranks; the loss is a per-rank sum
        if p.quad:
            loss = loss * 4.0
        self.losses_read = None
        self.readback.add(self.iter, loss_items, loss)  # on the device
        if self.readback.due(self.iter, self.nb):  # SYNC: the host waits for the device, every `interval` steps only
            bad = self.readback.read()
            if bad is not None:  # the first non-finite step, exactly, even if it was a few steps ago
                on_disk = signals.checkpoint_status(p.run.last) if p.run is not None else "nothing was saved"
                raise NonFiniteLossError(self.epoch, *bad, on_disk=on_disk)
            self.mloss = self.losses_read = self.readback.mean
        p.scaler.scale(loss).backward()
        if ni - self.last_opt_step >= settings.accumulate:
            self.optimizer_step()
            self.last_opt_step = ni
        self.imgs, self.targets, self.paths, self.extras = imgs, targets, paths, tuple(extras)

    def optimizer_step(self):
        p = self.parts
        p.scaler.unscale_(p.optimizer)
        backend.clip_grad_norm_(p.model.parameters(), CLIP_NORM, fused=p.fast.multi_tensor)
        p.scaler.step(p.optimizer)
        p.scaler.update()
        p.optimizer.zero_grad()
        if p.ema is not None:
            p.ema.update(p.model)


def random_rescale(imgs, imgsz, gs):
    """--multi-scale: resize the batch to a random size in [0.5, 1.5] x imgsz (a multiple of the grid size)."""
    sz = random.randrange(int(imgsz * 0.5), int(imgsz * 1.5) + gs) // gs * gs
    sf = sz / max(imgs.shape[2:])
    if sf != 1:
        ns = [math.ceil(x * sf / gs) * gs for x in imgs.shape[2:]]
        imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)
    return imgs


# ----------------------------------------------------------------------------------------------------------------
# Hooks, in the order default_hooks() registers them
class SafePointHook(HookBase):
    """Ctrl-C / SIGTERM stop training here (utils/signals.py): between steps and before each epoch, never in the
    middle of a step or a checkpoint save."""

    def before_epoch(self):
        signals.check()  # a stop during set-up or after the last save lands here

    def after_step(self):
        signals.check()


class ImageWeightsHook(HookBase):
    """--image-weights: each epoch draws its images favouring classes with a low validation mAP."""

    def before_epoch(self):
        p = self.loop.parts
        resample_by_image_weights(p.dataset, p.nc, self.loop.maps)


class ProgressHook(HookBase):
    """The start-up lines, one progress bar per epoch with the running mean losses, the closing line."""

    def __init__(self):
        self.bar, self.t0 = None, 0.0

    def before_train(self):
        p = self.loop.parts
        self.t0 = time.time()
        LOGGER.info(f"Image sizes {p.imgsz} train, {p.imgsz} val\n"
                    f"Using {getattr(p.train_loader, 'num_workers', p.options.workers)} dataloader workers\n"
                    f"Logging results to {colorstr('bold', p.run.save_dir)}\nStarting training for "
                    f"{self.loop.epochs} epochs...")

    def before_epoch(self):
        names = self.loop.parts.task.loss_names
        LOGGER.info(("\n" + "%11s" * (4 + len(names))) % ("Epoch", "GPU_mem", *names, "Instances", "Size"))
        self.bar = tqdm(total=self.loop.nb, bar_format="{l_bar}{bar:10}{r_bar}")

    def after_step(self):
        loop = self.loop
        if loop.losses_read is not None:
            mem = f"{backend.memory_reserved_gb(loop.parts.device):.3g}G"
            row = (f"{loop.epoch}/{loop.epochs - 1}", mem, *loop.mloss, loop.targets.shape[0], loop.imgs.shape[-1])
            self.bar.set_description(("%11s" * 2 + "%11.4g" * (len(row) - 2)) % row)
        self.bar.update(1)

    def after_epoch(self):
        self.bar.close()

    def after_train(self):
        hours = (time.time() - self.t0) / 3600
        LOGGER.info(f"\n{self.loop.epoch - self.loop.start_epoch + 1} epochs completed in {hours:.3f} hours.")


class TrainBatchPlotHook(HookBase):
    """train_batch0-2.jpg (the task's batch_plots): the first batches as the model saw them."""

    def after_step(self):
        loop = self.loop
        names = loop.parts.task.batch_plots
        if loop.ni < len(names):
            f = loop.parts.run.save_dir / names[loop.ni]
            loop.parts.plots.submit(f.name, loop.parts.task.plot_batch, images_as_drawn(loop.imgs),
                                    backend.to_numpy(loop.targets), loop.paths, f,
                                    *(backend.to_numpy(x) for x in loop.extras))


def validate(parts, model, plots=False, **kw):
    """The task's metrics then val losses (detection: P, R, mAP50, mAP50-95, val box, obj, cls) as floats and the
    per-class mAPs of model on the validation set."""
    half = parts.precision.autocast and backend.is_cuda(parts.device)  # CPU bf16 autocast keeps fp32 weights
    results, maps, _ = (parts.task.validate or validate_model)(
        model, parts.val_loader, parts.data, single_cls=parts.options.single_cls, half=half,
        compute_loss=parts.compute_loss, save_dir=parts.run.save_dir, plots=plots, plot_jobs=parts.plots,
        task_plugin=parts.task, **kw)  # leaves the model in fp32, where the EMA averages
    return tuple(float(x) for x in results), np.asarray(maps, dtype=np.float64)


class ValidationHook(HookBase):
    """Each epoch (only the final one with --noval): the EMA validated, fitness and the best epoch so far. The
    validation images of an epoch that will be validated load while it trains (loader workers, spare CPU)."""

    def before_epoch(self):
        loop, p = self.loop, self.loop.parts
        final = loop.epoch + 1 == loop.epochs or loop.stop_possible  # what after_epoch will call final_epoch
        if (not p.options.noval or final) and hasattr(p.val_loader, "start"):
            p.val_loader.start()

    def after_epoch(self):
        loop, p = self.loop, self.loop.parts
        p.ema.update_attr(de_parallel(p.model), include=["yaml", "nc", "hyp", "names", "stride", "class_weights"])
        if not p.options.noval or loop.final_epoch:
            # a task whose best.pt is not validated again ends with this validation's plots (classification)
            plots = not p.task.validate_best and loop.epoch + 1 == loop.epochs and not p.options.noplots
            loop.results, loop.maps = validate(p, p.ema.ema, plots=plots)
        loop.fitness = float(p.task.fitness(np.asarray(loop.results, dtype=np.float64)))
        if loop.fitness > loop.best_fitness:
            loop.best_fitness, loop.best_epoch = loop.fitness, loop.epoch


class EarlyStopHook(HookBase):
    """Stop after `patience` epochs without a better fitness (--patience; 0 never stops)."""

    def __init__(self, patience):
        self.stopper = EarlyStopping(patience=patience)

    def before_train(self):
        self.stopper.best_fitness, self.stopper.best_epoch = self.loop.best_fitness, self.loop.best_epoch

    def after_epoch(self):
        loop = self.loop
        if self.stopper(epoch=loop.epoch, fitness=loop.fitness):
            loop.request_stop()
        loop.stop_possible = self.stopper.possible_stop


class ResultsLogHook(HookBase):
    """One results.csv row per epoch, and the same values to the loggers (utils/loggers/: TensorBoard, NDJSON, the
    cloud ones), which also get the run's start (dataset, model graph) and the steps whose losses were read back.
    A resumed run first drops the rows of epochs its checkpoint does not hold (killed between the row and the save)."""

    def __init__(self, loggers):
        self.loggers = loggers

    def before_train(self):
        p = self.loop.parts
        if p.state.resumed:
            self.loggers.truncate_csv(self.loop.start_epoch)
        self.loggers.on_pretrain_routine_end(p.data)
        if p.task.log_graph:
            self.loggers.on_train_start(p.model, p.imgsz, plots=not p.options.noplots)

    def after_step(self):
        if self.loop.losses_read is not None:  # no extra host sync: only steps that read the losses back anyway
            self.loggers.on_train_batch_end(self.loop.ni, self.loop.losses_read)

    def after_epoch(self):
        loop = self.loop
        next_lrs = [float(g["lr"]) for g in loop.parts.optimizer.param_groups]  # after the epoch's lr step
        self.loggers.on_fit_epoch_end(loop.parts.task.results_row(loop.mloss, loop.results, loop.lrs, next_lrs),
                                      loop.epoch, loop.best_fitness, loop.fitness)


def save_ckpt(ckpt, path, *also):
    """Atomic save (to path and the paths in also, encoded once) with a clear message for a full disk or an
    unwritable folder."""
    try:
        save_checkpoint(ckpt, path, *also)
    except OutputWriteError as e:  # already names the file and the cause
        raise TrainingError(f"{e}; the previous checkpoint is unchanged") from e
    except OSError as e:
        raise TrainingError(f"Could not write checkpoint {path}: {e.strerror or e} "
                            "(disk full or folder not writable?); the previous checkpoint is unchanged.") from e


def checkpoint_contents(loop):
    """The ultralytics checkpoint of the epoch that just ended, with this project's exact-resume state
    (utils/checkpoint/training.py). RNG states are taken now, after the epoch's validation."""
    p = loop.parts
    extra = {"best_epoch": loop.best_epoch, "scaler": p.scaler.state_dict(), "last_opt_step": loop.last_opt_step,
             "maps": loop.maps, "rng": get_rng_states(), "hyp": p.hyp, "names": p.names, "nc": p.nc}
    return training_checkpoint(loop.epoch, de_parallel(p.model), p.ema, p.optimizer, p.recorded_opt,
                               loop.best_fitness, extra)


class CheckpointHook(HookBase):
    """last.pt each epoch, best.pt when the fitness is the best so far, epochN.pt every --save-period epochs
    (--nosave: the final epoch only)."""

    def after_epoch(self):
        loop, p = self.loop, self.loop.parts
        opt, run = p.options, p.run
        if opt.nosave and not (loop.final_epoch and not opt.evolve):
            return
        check_weights_before_save(p, loop.epoch)  # a NaN weight never replaces the last good checkpoint
        paths = [run.last]
        if loop.best_fitness == loop.fitness:
            paths.append(run.best)
        periodic = [run.weights / f"epoch{loop.epoch}.pt"] if opt.save_period > 0 and \
            loop.epoch % opt.save_period == 0 else []
        if loop.ends_here:
            # the official trainer saves this epoch whole, then reads last.pt and best.pt back to strip them: here
            # the same files are written once, from memory (FinishHook strips only a best.pt of an earlier epoch)
            if periodic:  # epochN.pt stays whole, as official
                save_ckpt(checkpoint_contents(loop), *periodic)
            save_ckpt(final_checkpoint(p.ema.ema, p.recorded_opt), *paths)
            loop.written_stripped.update(paths)
        else:
            save_ckpt(checkpoint_contents(loop), *paths, *periodic)  # encoded once
        loop.saved_in_epoch.update({path: loop.epoch for path in paths + periodic})
        if p.loggers is not None:  # --save-period: the cloud loggers that keep models get last.pt
            p.loggers.on_model_save(run.last, loop.epoch, loop.final_epoch, loop.best_fitness, loop.fitness)


class FinishHook(HookBase):
    """Once training ends: results.png, last.pt and best.pt stripped as the official trainer does it, best.pt
    validated with plots and per-class figures (these become the run's results; not for a task without
    validate_best), the closing line once every plot file is written."""

    def after_train(self):
        loop, p = self.loop, self.loop.parts
        opt, run = p.options, p.run
        if p.loggers is not None:  # results.csv is complete: results.png is drawn while best.pt is validated
            p.loggers.on_train_end(plots=not opt.noplots and p.task.results_plot, draw=p.plots.submit)
        validate_best = p.task.validate_best and not opt.evolve
        if run.best.exists() and validate_best and hasattr(p.val_loader, "start"):
            p.val_loader.start()  # its images load while the checkpoints are stripped
        # best.pt written in the same epoch as last.pt holds the same checkpoint: stripped once, written to both
        same = run.last.exists() and run.best.exists() and \
            loop.saved_in_epoch.get(run.best, -1) == loop.saved_in_epoch.get(run.last)
        for f in (run.last, run.best):
            signals.check()
            if not f.exists():
                continue
            if f in loop.written_stripped:
                log_stripped(f)
            elif f == run.last:
                strip_optimizer(f, save=save_ckpt, also=(run.best,) if same else (), build_model=p.task.build_model)
            elif not same:
                strip_optimizer(f, save=save_ckpt, build_model=p.task.build_model)
            if f == run.best and validate_best:
                LOGGER.info(f"\nValidating {f}...")
                model = attempt_load(f, p.device, fuse=True, build_model=p.task.build_model)
                loop.results, _ = validate(p, model, plots=not opt.noplots, verbose=True,
                                           iou_thres=0.65 if p.is_coco else 0.60, save_json=p.is_coco)
        p.plots.wait()  # every plot file written before the closing line
        if p.loggers is not None:  # the images and the final model to the loggers, now that every plot is on disk
            p.loggers.on_run_end(run.last, run.best, loop.epoch, loop.results)
        LOGGER.info(f"Results saved to {colorstr('bold', run.save_dir)}")


def default_hooks(parts):
    """The hooks of a train.py run. Every process stops at the safe points; the main process alone validates, logs
    and saves. Order matters: validation before early stop, the results.csv row before the checkpoint (a resume
    trims rows its checkpoint lacks, never the reverse), checkpoints before the final evaluation strips them."""
    opt = parts.options
    hooks = [SafePointHook(), ImageWeightsHook() if opt.image_weights else None]
    if not parts.dist.is_main:
        return [h for h in hooks if h is not None]
    hooks += [ProgressHook(), None if opt.noplots else TrainBatchPlotHook(), ValidationHook(),
              EarlyStopHook(opt.patience), ResultsLogHook(parts.loggers) if parts.loggers is not None else None,
              CheckpointHook(), FinishHook()]
    return [h for h in hooks if h is not None]
