"""The training losses, read back to the host every N steps instead of every step.

Reading a loss value on the host (for the progress bar, or to stop on a non-finite loss) makes the host wait until
the device has finished every queued kernel: on a GPU the next step's launches cannot overlap the current step's
work. LossReadback copies each step's losses into a small buffer on the device, with no sync, and reads the buffer
back when ``due``: every ``interval`` steps and at an epoch's last step. A non-finite loss is still
reported with the exact epoch and iteration where it first appeared, and always before the epoch ends (so before
any checkpoint of that epoch is written). With interval 1 it reads every step, before the backward pass, like the
official trainer.

Default interval: 1 on the CPU (nothing runs ahead of the host there, so a read costs nothing and the bar is exact
every step), 10 on a GPU; ``YOLO_LOSS_READBACK=N`` sets it.
"""
import numpy as np

from utils.backend import is_cuda, to_numpy, torch
from utils.settings import LOSS_READBACK

__all__ = ["LossReadback", "default_interval"]


def default_interval(device):
    n = LOSS_READBACK.get()  # a bad value raises a UserError naming the variable
    return n if n is not None else 10 if is_cuda(device) else 1


class LossReadback:
    """Per epoch: ``reset()``; each step ``add(i, loss_items, loss)`` (device only); when ``due(i, nb)``,
    ``read()`` returns None, or (iteration, items) of the epoch's first non-finite loss; ``mean`` is then the
    running mean of the loss items over the steps read so far (numpy float64)."""

    def __init__(self, device, interval=None, n_items=3):
        """n_items: how many loss items the task's loss returns (detection: box, obj, cls)."""
        self.device = device
        self.interval = default_interval(device) if interval is None else int(interval)
        self.n = int(n_items)
        self._buf = None  # (interval, n + 1) on the device: the items and the total loss of the steps not yet read
        self.reset()

    def reset(self):
        self.steps = 0
        self.mean = None
        self._sum = np.zeros(self.n)
        self._pending = []  # the iterations whose rows wait in _buf
        self._bad = None

    def add(self, i, loss_items, loss):
        """Record step ``i``'s loss items (n,) and total loss: two copies on the device, no host sync."""
        if self._buf is None:
            self._buf = torch.zeros((self.interval, self.n + 1), dtype=torch.float32, device=loss_items.device)
        row = len(self._pending)
        self._buf[row, :self.n] = loss_items.detach().reshape(-1).to(torch.float32)
        self._buf[row, self.n:] = loss.detach().sum().reshape(1).to(torch.float32)
        self._pending.append(i)

    def due(self, i, nb):
        """Whether step i (of nb in the epoch) reads back: when `interval` steps wait, and at the last one."""
        return len(self._pending) >= self.interval or i == nb - 1

    def read(self):
        """The host sync: fetch the waiting steps; None, or (iteration, [box, obj, cls]) of the epoch's first
        non-finite loss."""
        if not self._pending:
            return self._bad
        rows = to_numpy(self._buf[:len(self._pending)]).astype(np.float64)
        for i, r in zip(self._pending, rows):
            if self._bad is None and not np.isfinite(r).all():
                self._bad = (i, [round(float(x), 4) for x in r[:self.n]])
        self._sum += rows[:, :self.n].sum(0)
        self.steps += len(self._pending)
        self._pending = []
        self.mean = self._sum / self.steps
        return self._bad
