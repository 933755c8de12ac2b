"""The training losses, read back to the host every N steps instead of every step.

Reading a loss value on the host (for the progress bar, or to stop on a non-finite loss) makes the host wait until
the device has finished every queued kernel: on a GPU the next step's launches cannot overlap the current step's
work. LossReadback keeps the epoch's running sum and the first non-finite step on the device, with no sync, and
reads them back when ``due``: every ``interval`` steps and at an epoch's last step. A non-finite loss is still
reported with the exact epoch and iteration where it first appeared, and always before the epoch ends (so before
any checkpoint of that epoch is written). With interval 1 it reads every step, before the backward pass, like the
official trainer.

Default interval: 1 on the CPU (nothing runs ahead of the host there, so a read costs nothing and the bar is exact
every step), 10 on a GPU; ``YOLO_LOSS_READBACK=N`` sets it.
"""
import os

from utils.backend import is_cuda, to_numpy, torch

__all__ = ["LossReadback", "default_interval"]


def default_interval(device):
    value = os.environ.get("YOLO_LOSS_READBACK", "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            from utils.errors import UserError
            raise UserError(f"YOLO_LOSS_READBACK={value!r}: give a whole number of steps >= 1 (1 reads every step).")
        return n
    return 10 if is_cuda(device) else 1


class LossReadback:
    """Per epoch: ``reset()``; each step ``add(i, loss_items, loss)`` (device only); when ``due(i, nb)``,
    ``read()`` returns None, or (iteration, items) of the epoch's first non-finite loss; ``mean`` is then the
    running mean of the loss items over the steps added so far (numpy float64)."""

    def __init__(self, device, interval=None):
        self.device = device
        self.interval = default_interval(device) if interval is None else int(interval)
        self.reset()

    def reset(self):
        self.steps = 0
        self.mean = None
        self._sum = None  # float64 on the device: the sum of the loss items so far
        self._bad_step = None  # first non-finite iteration of the epoch, -1 while there is none
        self._bad_items = None

    def add(self, i, loss_items, loss):
        """Record step ``i``'s loss items (3,) and total loss, without a host sync."""
        items = loss_items.detach().reshape(-1).to(torch.float64)
        finite = torch.isfinite(items).all() & torch.isfinite(loss.detach()).all()
        if self._sum is None:
            self._sum = torch.zeros_like(items)
            self._bad_step = torch.full((1,), -1, dtype=torch.int64, device=items.device)  # OneFlow: no 0-d full
            self._bad_items = torch.zeros_like(items)
        first_bad = (~finite) & (self._bad_step < 0)
        self._bad_step = torch.where(first_bad, torch.full_like(self._bad_step, i), self._bad_step)
        self._bad_items = torch.where(first_bad, items, self._bad_items)
        self._sum = self._sum + items
        self.steps += 1

    def due(self, i, nb):
        """Whether step i (of nb in the epoch) reads back: every `interval` steps and at the last one."""
        return self.steps % self.interval == 0 or i == nb - 1

    def read(self):
        """The host sync: fetch the running mean; None, or (iteration, [box, obj, cls]) of the first non-finite
        loss of the epoch."""
        if self._sum is None:
            return None
        state = to_numpy(torch.cat((self._sum, self._bad_items, self._bad_step.to(torch.float64))))  # one copy
        n = self._sum.shape[0]
        self.mean = state[:n] / self.steps
        bad_step = int(state[-1])
        if bad_step >= 0:
            return bad_step, [round(float(x), 4) for x in state[n:2 * n]]
        return None
