"""The training errors whose message is meant for the user: train.py prints the one line and exits 1."""
from utils.errors import TrainingError  # noqa: F401  (the one class; the tasks' training steps raise it too)


class NonFiniteLossError(TrainingError):
    """The loss of one iteration was NaN or infinite; raised before that epoch writes any checkpoint. on_disk: one
    clause on the checkpoint left as it was (utils/signals.checkpoint_status), e.g. 'no checkpoint was written yet'
    at epoch 0."""

    def __init__(self, epoch, iteration, loss_items, on_disk="the last checkpoint is left as it was"):
        super().__init__(f"Non-finite loss at epoch {epoch}, iteration {iteration} (box, obj, cls = {loss_items}); "
                         f"training stopped before this epoch saved anything: {on_disk}. Lower --hyp lr0 or check "
                         "the labels.")
        self.epoch, self.iteration = epoch, iteration


class NonFiniteWeightsError(TrainingError):
    """The weights about to be saved hold NaN or Inf; nothing was written (the last good checkpoint stays)."""

    def __init__(self, epoch, where, on_disk):
        super().__init__(f"Epoch {epoch}: the weights to be saved are no longer finite (NaN or Inf, first in {where}); "
                         f"training stopped without saving them: {on_disk}. Check the --hyp learning rates (lr0, "
                         "warmup_bias_lr), momentum and weight_decay, and the labels.")
        self.epoch = epoch
