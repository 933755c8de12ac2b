"""The trainer's classification validation: top-1 and top-5 accuracy and the mean loss of a model over a loader of
(images, labels, ...) batches, as ultralytics' classify/val.run computes them while training."""
import numpy as np

from utils import signals
from utils.backend import inference_mode, to_numpy
from utils.classify.metrics import accuracy_table, topk_correct
from utils.log import LOGGER


def _device(model):
    return next(model.parameters()).device


@inference_mode()
def evaluate_classifier(model, dataloader, compute_loss=None, prepare_images=None, verbose=False, names=None,
                        first_batch=None, summary=False, **_):
    """((top1, top5, mean loss), per-class top-1 (nc,)). Batches of uint8 images are scaled to 0-1 and passed
    through prepare_images (the task's normalisation); float batches are taken as the network's input. The model
    is left in eval mode and fp32. first_batch(images as loaded, labels, predicted classes), numpy arrays, is
    called with the first batch (the trainer's test_images.jpg). verbose prints the top-1/top-5 table of every
    class, summary its 'all' row alone. Extra keyword arguments (detection's thresholds) are ignored."""
    model.float().eval()
    device = _device(model)
    logits, targets, loss = [], [], 0.0
    for batch in dataloader:
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here
        images, labels = batch[0].to(device), batch[1]
        if not images.dtype.is_floating_point:
            images = images.float() / 255
            images = prepare_images(images) if prepare_images is not None else images
        y = model(images)
        logits.append(to_numpy(y.float()))
        targets.append(to_numpy(labels))
        if first_batch is not None and len(logits) == 1:
            first_batch(to_numpy(batch[0]), targets[0], logits[0].argmax(1))
        if compute_loss is not None:
            loss += float(to_numpy(compute_loss(y, labels.to(device))[1])[0])  # the unscaled batch mean
    loss /= max(len(dataloader), 1)
    logits, targets = np.concatenate(logits), np.concatenate(targets)
    acc = topk_correct(logits, targets, k=5)
    top1, top5 = (float(v) for v in acc.mean(0))
    nc = logits.shape[1]
    per_class = np.array([acc[targets == c, 0].mean() if (targets == c).any() else 0.0 for c in range(nc)])
    if verbose or summary:
        names = names if names is not None else getattr(model, "names", None) or {}
        names = dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names)
        LOGGER.info(f"{'Class':>24}{'Images':>12}{'top1_acc':>12}{'top5_acc':>12}")
        for c, n, t1, t5 in accuracy_table(acc, targets, names)[:None if verbose else 1]:
            LOGGER.info(f"{c:>24}{n:>12}{t1:>12.3g}{t5:>12.3g}")
    return (top1, top5, loss), per_class
