"""Classification's steps in the one validation loop (utils/evaluation/loop.py): top-1 and top-5 accuracy and the
mean loss of a model over a loader of (images, labels, ...) batches, for classify/val.py and the trainer
(evaluate_classifier), as ultralytics' classify/val.run computes them."""
import numpy as np

from utils.backend import inference_mode, to_numpy
from utils.classify.metrics import accuracy_table, topk_correct
from utils.evaluation.detection_steps import model_device
from utils.evaluation.loop import validation_pass
from utils.log import LOGGER


class ClassificationSteps:
    """One classification validation's steps; the predictions of every batch are kept (logits, labels) for the
    accuracies at the end. Batches of uint8 images are scaled to 0-1 and passed through prepare_images (the task's
    normalisation); float batches are taken as the network's input. loss_fn(logits, labels on the device) -> float;
    first_batch(images as loaded, labels, predicted classes), numpy arrays, is called with the first batch."""

    def __init__(self, model, loss_fn=None, prepare_images=None, half=False, first_batch=None):
        self.device, self.loss_fn, self.prepare_images = model_device(model), loss_fn, prepare_images
        self.half, self.first_batch = half, first_batch
        self.logits, self.targets, self.loss = [], [], 0.0

    def to_device(self, batch):
        images, labels = batch[0], batch[1]
        x = images.to(self.device)
        if not x.dtype.is_floating_point:
            x = x.float() / 255
            x = self.prepare_images(x) if self.prepare_images is not None else x
        return x.half() if self.half else x, labels.to(self.device), images

    def forward(self, model, batch):
        return model(batch[0])

    def add_loss(self, out, batch):
        if self.loss_fn is not None:
            self.loss += self.loss_fn(out, batch[1])

    def postprocess(self, out, batch):
        return to_numpy(out.float())

    def update(self, batch_i, batch, out, preds):
        self.logits.append(preds)
        self.targets.append(to_numpy(batch[1]))
        if self.first_batch is not None and batch_i == 0:
            self.first_batch(to_numpy(batch[2]), self.targets[0], preds.argmax(1))

    def accuracy(self, n_batches):
        """(topk_correct (n, 5) of every image, their labels (n,), the mean loss per batch)."""
        logits, targets = np.concatenate(self.logits), np.concatenate(self.targets)
        return topk_correct(logits, targets, k=5), targets, self.loss / max(n_batches, 1)


def log_accuracy_table(acc, targets, names, every_class=True):
    """The top-1/top-5 table: the 'all' row, then every class's unless every_class is False."""
    names = dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names or {})
    LOGGER.info(f"{'Class':>24}{'Images':>12}{'top1_acc':>12}{'top5_acc':>12}")
    for c, n, t1, t5 in accuracy_table(acc, targets, names)[:None if every_class else 1]:
        LOGGER.info(f"{c:>24}{n:>12}{t1:>12.3g}{t5:>12.3g}")


@inference_mode()
def evaluate_classifier(model, dataloader, compute_loss=None, prepare_images=None, verbose=False, names=None,
                        first_batch=None, summary=False, **_):
    """The trainer's validation: ((top1, top5, mean loss), per-class top-1 (nc,)). The model is left in eval mode
    and fp32. compute_loss: the training loss (its items' first, the unscaled batch mean, is averaged); verbose
    prints the top-1/top-5 table of every class, summary its 'all' row alone. Extra keyword arguments (detection's
    thresholds) are ignored. See ClassificationSteps for prepare_images and first_batch."""
    model.float().eval()
    loss_fn = None if compute_loss is None else (lambda y, labels: float(to_numpy(compute_loss(y, labels)[1])[0]))
    steps = ClassificationSteps(model, loss_fn, prepare_images, first_batch=first_batch)
    validation_pass(model, dataloader, steps, progress=False)
    acc, targets, loss = steps.accuracy(len(dataloader))
    top1, top5 = (float(v) for v in acc.mean(0))
    nc = steps.logits[0].shape[1]
    per_class = np.array([acc[targets == c, 0].mean() if (targets == c).any() else 0.0 for c in range(nc)])
    if verbose or summary:
        log_accuracy_table(acc, targets, names if names is not None else getattr(model, "names", None), verbose)
    return (top1, top5, loss), per_class
