"""The training loop: TrainLoop runs the epochs of steps over the parts build_training() made and calls its hooks
(utils/engine/hooks.py) around them. What the hooks learn from each other during an epoch (the validation results,
the fitness, the best epoch, what was saved, whether this epoch is the last) lives in one EpochRecord, never in the
loop's attributes: TrainLoop has fixed slots, so a hook that tries to park state on it fails at once.

Behaviour follows the official YOLOv5 trainer: gradient accumulation up to a nominal batch of 64, the warmup and lr
schedule of utils/engine/schedule.py, gradient clipping at 10, ModelEMA. Only the main process validates, logs and
saves; every process runs the steps and the safe points.
"""
import dataclasses
import math
import random
from typing import Any

import numpy as np

from utils import backend, signals
from utils.backend import F
from utils.distributed.collectives import broadcast_flag
from utils.engine.errors import NonFiniteLossError
from utils.engine.schedule import set_param_groups
from utils.loss_readback import LossReadback

CLIP_NORM = 10.0  # gradient norm clip, as the official trainer


class HookBase:
    """Something done at fixed points of training. TrainLoop sets ``self.loop`` before the first call. A hook reads
    the run's parts (``loop.parts``), where the loop stands (``loop.epoch``, ``loop.iter``, ``loop.ni``, the step's
    batch) and ``loop.record``, the EpochRecord of the current epoch: the one place hooks publish what they found
    (validation results, fitness, best epoch, saved files) for the hooks after them. The loop takes no other
    attribute (its slots are fixed), so ``loop.fitness = ...`` raises AttributeError.

    The contract, per call, in the order the loop makes them (each hook in the order it was registered):
    * before_train(): once, before the first epoch (after a resume: before the first resumed epoch); ``loop.record``
      is then the record the first epoch starts from (the best fitness and epoch of a resumed run).
    * before_epoch(): at the start of each epoch, before its first batch is loaded, with the epoch's fresh record
      (``is_last_epoch`` and ``may_be_last`` already set); may change what the epoch's loader yields (the
      --image-weights resampling does).
    * before_step() / after_step(): around each run_step(); after_step sees the step's batch (``loop.imgs`` as the
      model got them, ``loop.targets``, ``loop.paths``, ``loop.extras``) and ``loop.losses_read`` (the epoch's mean
      loss items when this step read the losses back, else None; ``record.mloss`` holds the latest read).
    * after_epoch(): after the epoch's last step and the epoch's lr update, with ``record.lrs`` the group lrs the
      epoch ended with. Earlier hooks' findings are in the record (validation runs before early stop, the results
      row before the checkpoint).
    * after_train(): once, after the last epoch, only when training ended normally (not on an exception), with the
      last epoch's record.
    A hook stops training with ``loop.request_stop()``: ``record.is_last_epoch`` turns True at once (the hooks after
    it see that), the current epoch finishes (its after_epoch calls included), then after_train runs. Under DDP rank
    0's word decides for every rank.
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


@dataclasses.dataclass
class EpochRecord:
    """One epoch as the loop and its hooks see it. The loop fills the first group; hooks publish the rest. The run's
    running values (last validation, best fitness, saved files) carry over from one epoch's record to the next."""
    epoch: int
    # Training ends after this epoch: the run's last epoch, or a hook (early stop) asked to stop in it. Set once by
    # the loop; only loop.request_stop() changes it. Every "is this the end" question reads this one value.
    is_last_epoch: bool
    # Training may end after this epoch: it is the last, or the early stopper said at the previous epoch's end that
    # it may stop at this one's (official's final_epoch: --noval still validates it, --nosave still saves it).
    may_be_last: bool
    mloss: Any = None  # the epoch's mean loss items as last read back (the loop's)
    lrs: list = dataclasses.field(default_factory=list)  # group lrs at the end of the epoch (the loop's)
    # carried over: metrics then val losses of the last validation (detection: P, R, mAP50, mAP50-95, val box, obj,
    # cls) and its per-class mAP50-95 (--image-weights)
    results: tuple = ()
    maps: Any = None
    fitness: float = 0.0  # this epoch's (ValidationHook)
    best_fitness: float = 0.0  # carried over: the best so far and its epoch (ValidationHook)
    best_epoch: int = 0
    stop_possible_next: bool = False  # EarlyStopHook: the next epoch may end in an early stop
    saved_in_epoch: dict = dataclasses.field(default_factory=dict)  # carried: checkpoint path -> epoch last written
    written_stripped: set = dataclasses.field(default_factory=set)  # carried: written in final (stripped) form
    # the last epoch's validation, run on the model best.pt will hold (utils/engine/best_validation.py): when that
    # epoch is written to best.pt, FinishHook reports it as best.pt's instead of validating best.pt again
    held_validation: Any = None

    @classmethod
    def before_start(cls, state, n_results, n_losses, nc):
        """The record a run starts from (TrainingState: all zero, or a resumed run's best fitness, epoch and maps);
        not an epoch's yet (following() makes each epoch's), so nothing ends here."""
        maps = state.maps if state.maps is not None else np.zeros(nc)
        return cls(state.start_epoch, is_last_epoch=False, may_be_last=False,
                   mloss=np.zeros(n_losses), results=(0,) * n_results, maps=maps, best_fitness=state.best_fitness,
                   best_epoch=state.best_epoch)

    def following(self, epoch, epochs):
        """The record of `epoch`: this one's running values, the epoch's own ones reset."""
        is_last = epoch + 1 == epochs
        return dataclasses.replace(self, epoch=epoch, is_last_epoch=is_last,
                                   may_be_last=is_last or self.stop_possible_next, mloss=np.zeros_like(self.mloss),
                                   lrs=[], fitness=0.0, stop_possible_next=False)


class TrainLoop:
    """Runs the epochs of a run over TrainingParts and calls its hooks. run_step() is one iteration: forward, loss,
    loss read-back, backward, and every `accumulate` iterations an optimizer step and an EMA update."""
    # fixed: hooks publish into self.record, never onto the loop
    __slots__ = ("parts", "epochs", "start_epoch", "iter", "nb", "last_opt_step", "readback", "record", "losses_read",
                 "imgs", "targets", "paths", "extras", "_hooks")

    def __init__(self, parts, hooks=()):
        self.parts = parts
        state, task = parts.state, parts.task
        self.epochs, self.start_epoch = parts.epochs, state.start_epoch
        self.iter = 0  # the batch index within the epoch
        self.nb = len(parts.train_loader)  # batches per epoch
        self.last_opt_step = state.last_opt_step
        self.readback = LossReadback(parts.device, n_items=len(task.loss_names))
        self.record = EpochRecord.before_start(state, len(task.metric_names) + len(task.loss_names),
                                               len(task.loss_names), parts.nc)
        self.losses_read = None  # record.mloss when this step read the losses back, else None
        self.imgs = self.targets = self.paths = None  # the current step's batch, for after_step hooks
        self.extras = ()  # the batch's items after shapes (segmentation: masks), as the loader gave them
        self._hooks = []
        self.register_hooks(hooks)

    @property
    def epoch(self):
        return self.record.epoch

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
        """End training after this epoch (see HookBase)."""
        self.record.is_last_epoch = True

    def _call(self, name):
        for h in self._hooks:
            getattr(h, name)()

    # ------------------------------------------------------------------------------------------------ the loop
    def train(self):
        """Train from start_epoch to epochs (or an earlier stop); returns the final results tuple."""
        self._call("before_train")
        for epoch in range(self.start_epoch, self.epochs):
            self.record = self.record.following(epoch, self.epochs)
            self._call("before_epoch")
            self.run_epoch()
            self.record.lrs = [float(g["lr"]) for g in self.parts.optimizer.param_groups]
            set_param_groups(self.parts.optimizer, self.parts.schedule.lrs_after_epoch(epoch))  # the lr step
            self._call("after_epoch")
            # rank 0's word, everywhere (the run's last epoch ends the range anyway)
            if broadcast_flag(self.parts.dist, self.record.is_last_epoch, self.parts.device):
                self.record.is_last_epoch = True
                break
        self._call("after_train")
        return self.record.results

    def run_epoch(self):
        p = self.parts
        p.model.train()
        sampler = getattr(p.train_loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.epoch)  # a fresh, epoch-seeded shuffle: the same order after a resume
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
            self.record.mloss = self.losses_read = self.readback.mean
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
