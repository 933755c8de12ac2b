"""The training errors whose message is meant for the user: train.py prints the one line and exits 1."""
from utils.errors import UserError


class TrainingError(UserError, RuntimeError):
    """A training that cannot start or go on, with a message that says what to do."""


class NonFiniteLossError(TrainingError):
    """The loss of one iteration was NaN or infinite; raised before that epoch writes any checkpoint."""

    def __init__(self, epoch, iteration, loss_items):
        super().__init__(f"Non-finite loss at epoch {epoch}, iteration {iteration} (box, obj, cls = {loss_items}); "
                         "training stopped, last.pt is left as it was after the previous epoch. Lower --hyp lr0, "
                         "check the labels, or resume from last.pt.")
        self.epoch, self.iteration = epoch, iteration
