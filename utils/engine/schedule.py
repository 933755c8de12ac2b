"""Learning rate, momentum and gradient accumulation of every iteration, as the official YOLOv5 trainer sets them.

One pure function of (iteration, epoch), so a resumed run needs no scheduler state beyond the epoch and iteration:
* warmup, for the first ``warmup_iters = max(round(warmup_epochs * batches_per_epoch), 100)`` iterations (at least
  100 even with warmup_epochs 0): lr interpolated linearly (np.interp) from warmup_bias_lr for the bias group and
  from 0 for the others up to the epoch's lr; momentum from warmup_momentum up to momentum; accumulation from 1 up
  to nominal_batch / batch_size;
* after it, lr = initial_lr * lf(epoch), lf linear from 1 to lrf over the epochs, or a cosine (--cos-lr), and
  accumulate = max(round(nominal_batch / batch_size), 1); the momentum is left where the warmup ended (momentum).
The loop writes the warmup values into the optimizer before each warmup iteration and the epoch lr after each
epoch (the official LambdaLR step); results.csv's x/lr0-2 are the group lrs at the end of each epoch.
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

    @classmethod
    def from_hyp(cls, hyp, base_lrs, epochs, batches_per_epoch, batch_size, cos_lr=False):
        return cls(base_lrs=tuple(float(x) for x in base_lrs), epochs=epochs, lrf=hyp["lrf"],
                   warmup_iters=max(round(hyp["warmup_epochs"] * batches_per_epoch), 100),
                   warmup_bias_lr=hyp["warmup_bias_lr"], warmup_momentum=hyp["warmup_momentum"],
                   momentum=hyp["momentum"], batch_size=batch_size, cos_lr=cos_lr)

    def lr_factor(self, epoch):
        return lr_lambda(self.epochs, self.lrf, self.cos_lr)(epoch)

    def epoch_lrs(self, epoch):
        """The lr of each group for `epoch` outside the warmup: initial_lr * lf(epoch)."""
        f = self.lr_factor(epoch)
        return tuple(base * f for base in self.base_lrs)

    def in_warmup(self, ni):
        return ni <= self.warmup_iters

    def at(self, ni, epoch):
        """StepSettings for integrated iteration ni (batches since the start of training) in `epoch`."""
        if not self.in_warmup(ni):
            return StepSettings(self.epoch_lrs(epoch), None, max(round(self.nominal_batch / self.batch_size), 1))
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
