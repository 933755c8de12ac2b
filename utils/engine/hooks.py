"""The hooks of a training run, in the order default_hooks() registers them: safe points for signals, the
--image-weights resampling, the progress bar, the first batches' plots, validation, early stopping, results.csv and
the loggers, checkpoints, the final evaluation. Each reads what the hooks before it published in the loop's
EpochRecord (utils/engine/loop.py) and publishes its own findings there, never on the loop.

Behaviour follows the official YOLOv5 trainer: fitness = 0.1 mAP50 + 0.9 mAP50-95 (the task's), early stopping,
last.pt every epoch and best.pt on improvement, stripped final checkpoints.
"""
import sys
import time

import numpy as np
from tqdm import tqdm

from models.experimental import attempt_load
from models.yolo import inference_copy
from utils import backend, signals
from utils.atomic_files import OutputWriteError
from utils.checkpoint import save_checkpoint
from utils.checkpoint.training import final_checkpoint, get_rng_states, log_stripped, strip_optimizer, \
    training_checkpoint
from utils.data.class_weights import resample_by_image_weights
from utils.engine.best_validation import HeldValidation, as_best_pt_holds, last_epoch_validates_best
from utils.engine.errors import TrainingError
from utils.engine.finite_weights import check_weights_before_save
from utils.engine.loop import HookBase
from utils.evaluation import validate_model
from utils.log import LOGGER, colorstr
from utils.plots import images_as_drawn
from utils.torch_utils import EarlyStopping, de_parallel


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
        resample_by_image_weights(p.dataset, p.nc, self.loop.record.maps)


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
        self.bar = tqdm(total=self.loop.nb, bar_format="{l_bar}{bar:10}{r_bar}", file=sys.stdout)  # with the log

    def after_step(self):
        loop = self.loop
        if loop.losses_read is not None:
            mem = f"{backend.memory_reserved_gb(loop.parts.device):.3g}G"
            row = (f"{loop.epoch}/{loop.epochs - 1}", mem, *loop.record.mloss, loop.targets.shape[0],
                   loop.imgs.shape[-1])
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
    """Each epoch (with --noval only one that may be the last): the EMA validated; publishes the results, the
    per-class mAPs, the fitness and the best epoch so far. The validation images of an epoch that will be validated
    load while it trains (loader workers, spare CPU). What runs is a copy of the EMA with its BatchNorms folded into
    the convolutions, as the final validation of best.pt runs it (the official trainer folds only there): the same
    figures up to float rounding, a yolov5s 640 forward on the CPU 24% faster. The run's last epoch is validated
    on the model best.pt will hold, with best.pt's plots (utils/engine/best_validation.py)."""

    def before_epoch(self):
        p = self.loop.parts
        if (not p.options.noval or self.loop.record.may_be_last) and hasattr(p.val_loader, "start"):
            p.val_loader.start()

    def after_epoch(self):
        rec, p = self.loop.record, self.loop.parts
        p.ema.update_attr(de_parallel(p.model), include=["yaml", "nc", "hyp", "names", "stride", "class_weights"])
        if last_epoch_validates_best(p, rec):  # best.pt's validation, if this epoch becomes best.pt
            model, table = as_best_pt_holds(p.ema.ema, p.device, p.task.build_model, p.run.best), []
            rec.results, rec.maps = validate(p, model, plots=not p.options.noplots, table=table)
            rec.held_validation = HeldValidation(rec.epoch, model, table)
        elif not p.options.noval or rec.may_be_last:
            # a task whose best.pt is not validated again ends with this validation's plots (classification)
            plots = not p.task.validate_best and rec.is_last_epoch and not p.options.noplots
            rec.results, rec.maps = validate(p, inference_copy(p.ema.ema), plots=plots)  # BatchNorms folded
        rec.fitness = float(p.task.fitness(np.asarray(rec.results, dtype=np.float64)))
        if rec.fitness > rec.best_fitness:
            rec.best_fitness, rec.best_epoch = rec.fitness, rec.epoch


class EarlyStopHook(HookBase):
    """Stop after `patience` epochs without a better fitness (--patience; 0 never stops); publishes whether the next
    epoch may end in a stop (that epoch is then validated and saved as if last)."""

    def __init__(self, patience):
        self.stopper = EarlyStopping(patience=patience)

    def before_train(self):
        rec = self.loop.record
        self.stopper.best_fitness, self.stopper.best_epoch = rec.best_fitness, rec.best_epoch

    def after_epoch(self):
        rec = self.loop.record
        if self.stopper(epoch=rec.epoch, fitness=rec.fitness):
            self.loop.request_stop()
        rec.stop_possible_next = self.stopper.possible_stop


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
        rec, p = self.loop.record, self.loop.parts
        next_lrs = [float(g["lr"]) for g in p.optimizer.param_groups]  # after the epoch's lr step
        self.loggers.on_fit_epoch_end(p.task.results_row(rec.mloss, rec.results, rec.lrs, next_lrs), rec.epoch,
                                      rec.best_fitness, rec.fitness)


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
    p, rec = loop.parts, loop.record
    extra = {"best_epoch": rec.best_epoch, "scaler": p.scaler.state_dict(), "last_opt_step": loop.last_opt_step,
             "maps": rec.maps, "rng": get_rng_states(), "hyp": p.hyp, "names": p.names, "nc": p.nc}
    return training_checkpoint(rec.epoch, de_parallel(p.model), p.ema, p.optimizer, p.recorded_opt,
                               rec.best_fitness, extra)


class CheckpointHook(HookBase):
    """last.pt each epoch, best.pt when the fitness is the best so far, epochN.pt every --save-period epochs
    (--nosave: an epoch that may be the last only); publishes what it wrote."""

    def after_epoch(self):
        loop, rec, p = self.loop, self.loop.record, self.loop.parts
        opt, run = p.options, p.run
        if opt.nosave and not (rec.may_be_last and not opt.evolve):
            return
        check_weights_before_save(p, rec.epoch)  # a NaN weight never replaces the last good checkpoint
        paths = [run.last]
        if rec.best_fitness == rec.fitness:
            paths.append(run.best)
        periodic = [run.weights / f"epoch{rec.epoch}.pt"] if opt.save_period > 0 and \
            rec.epoch % opt.save_period == 0 else []
        if rec.is_last_epoch:
            # the official trainer saves this epoch whole, then reads last.pt and best.pt back to strip them: here
            # the same files are written once, from memory (FinishHook strips only a best.pt of an earlier epoch)
            if periodic:  # epochN.pt stays whole, as official
                save_ckpt(checkpoint_contents(loop), *periodic)
            save_ckpt(final_checkpoint(p.ema.ema, p.recorded_opt), *paths)
            rec.written_stripped.update(paths)
        else:
            save_ckpt(checkpoint_contents(loop), *paths, *periodic)  # encoded once
        rec.saved_in_epoch.update({path: rec.epoch for path in paths + periodic})
        if p.loggers is not None:  # --save-period: the cloud loggers that keep models get last.pt
            p.loggers.on_model_save(run.last, rec.epoch, rec.may_be_last, rec.best_fitness, rec.fitness)


class FinishHook(HookBase):
    """Once training ends: results.png, last.pt and best.pt stripped as the official trainer does it, best.pt
    validated with plots and per-class figures (these become the run's results; not for a task without
    validate_best), the closing line once every plot file is written. When best.pt holds the last epoch, that
    epoch's validation already ran on best.pt's model with its plots (utils/engine/best_validation.py): its figures
    are reported as best.pt's instead of a second pass."""

    def after_train(self):
        rec, p = self.loop.record, self.loop.parts
        opt, run = p.options, p.run
        if p.loggers is not None:  # results.csv is complete: results.png is drawn while best.pt is validated
            p.loggers.on_train_end(plots=not opt.noplots and p.task.results_plot, draw=p.plots.submit)
        validate_best = p.task.validate_best and not opt.evolve
        held = rec.held_validation  # the last epoch's, on best.pt's model: best.pt's validation if it wrote best.pt
        if held is not None and not (held.epoch == rec.epoch == rec.saved_in_epoch.get(run.best)):
            held = None
        validate_best = validate_best and held is None
        if run.best.exists() and validate_best and hasattr(p.val_loader, "start"):
            p.val_loader.start()  # its images load while the checkpoints are stripped
        # best.pt written in the same epoch as last.pt holds the same checkpoint: stripped once, written to both
        same = run.last.exists() and run.best.exists() and \
            rec.saved_in_epoch.get(run.best, -1) == rec.saved_in_epoch.get(run.last)
        for f in (run.last, run.best):
            signals.check()
            if not f.exists():
                continue
            if f in rec.written_stripped:
                log_stripped(f)
            elif f == run.last:
                strip_optimizer(f, save=save_ckpt, also=(run.best,) if same else (), build_model=p.task.build_model)
            elif not same:
                strip_optimizer(f, save=save_ckpt, build_model=p.task.build_model)
            if f == run.best and held is not None:
                held.report(f)
            elif f == run.best and validate_best:
                LOGGER.info(f"\nValidating {f}...")
                model = attempt_load(f, p.device, fuse=True, build_model=p.task.build_model)
                rec.results, _ = validate(p, model, plots=not opt.noplots, verbose=True,
                                           iou_thres=0.65 if p.is_coco else 0.60, save_json=p.is_coco)
        p.plots.wait()  # every plot file written before the closing line
        if p.loggers is not None:  # the images and the final model to the loggers, now that every plot is on disk
            p.loggers.on_run_end(run.last, run.best, rec.epoch, rec.results)
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
