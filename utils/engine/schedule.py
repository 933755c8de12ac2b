"""Learning rate, momentum and gradient accumulation of every iteration, as the official YOLOv5 trainer sets them.

One pure function of (iteration, epoch), so a resumed run needs no scheduler state beyond the epoch and iteration:
* warmup, for the first ``warmup_iters = max(round(warmup_epochs * batches_per_epoch), 100)`` iterations (at least
  100 even with warmup_epochs 0): lr interpolated linearly (np.interp) from warmup_bias_lr for the bias group and
  from 0 for the others up to the epoch's lr; momentum from warmup_momentum up to momentum; accumulation from 1 up
  to nominal_batch / batch_size;
* after it, the lr the loop set at the end of the previous epoch (lrs_after_epoch, the official LambdaLR step):
  initial_lr * lf(epoch - 1) in the detection and segmentation trainers, whose `scheduler.last_epoch =
  start_epoch - 1` makes the step one epoch late, initial_lr * lf(epoch) in classification; lf linear from 1 to lrf
  over the epochs, or a cosine (--cos-lr); accumulate = max(round(nominal_batch / batch_size), 1); the momentum is
  left where the warmup ended (momentum).
The loop writes the warmup values into the optimizer before each warmup iteration and lrs_after_epoch after each
epoch; results.csv's x/lr0-2 are the group lrs at the end of each epoch.
"""
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

import numpy as np

NBS = 64  # nominal batch size: gradients are accumulated up to it, weight decay is scaled to it
BIAS_GROUP = 0  # the optimizer's parameter group of biases (utils.torch_utils.smart_optimizer's order)


def one_cycle(y1=0.0, y2=1.0, steps=100):
    """Cosine ramp from y1 to y2 over `steps` (https://arxiv.org/pdf/1812.01187.pdf)."""
    return lambda x: ((1 - math.cos(x * math.pi / steps)) / 2) * (y2 - y1) + y1


def lr_lambda(epochs, lrf, cos_lr=False):
    """Learning-rate multiplier per epoch: linear from 1 to lrf, or cosine (--cos-lr)."""
    if cos_lr:
        return one_cycle(1, lrf, epochs)
    return lambda x: (1 - x / epochs) * (1.0 - lrf) + lrf


class StepSettings(NamedTuple):
    lrs: Tuple[float, ...]  # one per parameter group
    momentum: Optional[float]  # None after the warmup: the optimizer keeps what the warmup's last step set
    accumulate: int  # an optimizer step once this many iterations have passed since the last one


@dataclass(frozen=True)
class Schedule:
    base_lrs: Tuple[float, ...]  # each group's initial_lr (lr0, or what a resumed optimizer state holds)
    epochs: int
    lrf: float
    warmup_iters: int
    warmup_bias_lr: float
    warmup_momentum: float
    momentum: float
    batch_size: int
    cos_lr: bool = False
    nominal_batch: int = NBS
    # the official detection/segmentation schedule: LambdaLR's last_epoch reset to start_epoch - 1 after it was made,
    # so its step at the end of epoch e sets lf(e), not lf(e + 1) (trains each epoch after the warmup at the
    # previous epoch's lr, and the last at lf(epochs - 2))
    lagging_lr_step: bool = False
    warmup_end_epoch: int = 0  # the epoch of the last warmup iteration: it ends at the lr the warmup reached

    @classmethod
    def from_hyp(cls, hyp, base_lrs, epochs, batches_per_epoch, batch_size, cos_lr=False, lagging_lr_step=False):
        warmup_iters = max(round(hyp["warmup_epochs"] * batches_per_epoch), 100)
        return cls(base_lrs=tuple(float(x) for x in base_lrs), epochs=epochs, lrf=hyp["lrf"], warmup_iters=warmup_iters,
                   warmup_bias_lr=hyp["warmup_bias_lr"], warmup_momentum=hyp["warmup_momentum"],
                   momentum=hyp["momentum"], batch_size=batch_size, cos_lr=cos_lr, lagging_lr_step=lagging_lr_step,
                   warmup_end_epoch=warmup_iters // batches_per_epoch)

    def lr_factor(self, epoch):
        return lr_lambda(self.epochs, self.lrf, self.cos_lr)(epoch)

    def epoch_lrs(self, epoch):
        """The lr of each group for `epoch` outside the warmup: initial_lr * lf(epoch)."""
        f = self.lr_factor(epoch)
        return tuple(base * f for base in self.base_lrs)

    def lrs_of_epoch(self, epoch):
        """The lrs `epoch` trains with after the warmup: lf(epoch), or with the lagging step lf(epoch - 1) once an
        epoch starts after the warmup (the epoch the warmup ends in keeps the lr the warmup reached, lf(epoch))."""
        lags = self.lagging_lr_step and epoch > self.warmup_end_epoch
        return self.epoch_lrs(epoch - 1 if lags else epoch)

    def lrs_after_epoch(self, epoch):
        """The lrs set when `epoch` ends, for the next one (the official scheduler.step(); the warmup overwrites them
        while it lasts)."""
        return self.epoch_lrs(epoch if self.lagging_lr_step else epoch + 1)

    def in_warmup(self, ni):
        return ni <= self.warmup_iters

    def at(self, ni, epoch):
        """StepSettings for integrated iteration ni (batches since the start of training) in `epoch`."""
        if not self.in_warmup(ni):
            return StepSettings(self.lrs_of_epoch(epoch), None, max(round(self.nominal_batch / self.batch_size), 1))
        xi = [0, self.warmup_iters]
        accumulate = max(1, int(np.interp(ni, xi, [1, self.nominal_batch / self.batch_size]).round()))
        lrs = tuple(float(np.interp(ni, xi, [self.warmup_bias_lr if j == BIAS_GROUP else 0.0, target]))
                    for j, target in enumerate(self.epoch_lrs(epoch)))
        return StepSettings(lrs, float(np.interp(ni, xi, [self.warmup_momentum, self.momentum])), accumulate)


def set_param_groups(optimizer, lrs, momentum=None):
    """Write lrs (one per group) and, when given, the momentum into the optimizer's groups (Adam's groups have
    betas instead: left alone, as the official trainer does)."""
    for g, lr in zip(optimizer.param_groups, lrs):
        g["lr"] = lr
        if momentum is not None and "momentum" in g:
            g["momentum"] = momentum
