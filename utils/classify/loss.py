"""The classification loss of ultralytics' classify/train.py: cross-entropy with label smoothing, the batch mean."""
from utils.classifier_output import smartCrossEntropyLoss


class ClassificationLoss:
    """(logits, class indices) -> (the loss to back-propagate, the (1,) detached loss the trainer logs).

    world_size: under DDP the training loop multiplies the loss by the number of processes (detection's loss is a
    per-process sum); dividing here keeps the gradient the official one (each process's batch mean, averaged)."""

    def __init__(self, label_smoothing=0.0, world_size=1):
        # both frameworks' CrossEntropyLoss take label_smoothing (OneFlow 0.9.0 included; tests/test_classify)
        self.criterion = smartCrossEntropyLoss(label_smoothing)
        self.world_size = max(int(world_size), 1)

    def __call__(self, logits, labels):
        loss = self.criterion(logits, labels)
        return (loss / self.world_size if self.world_size > 1 else loss), loss.detach().reshape(1)
