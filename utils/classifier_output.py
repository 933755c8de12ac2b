"""A classifier's output, official's utils/torch_utils names for it: reshape_classifier_output sizes the last layer
to n classes (a YOLOv5 Classify head's linear, a last Linear, or the last Linear or Conv2d of a last Sequential, as in
ResNet- or EfficientNet-style models), and smartCrossEntropyLoss is the classification loss with label smoothing
(utils/classify/loss.py's ClassificationLoss wraps it). Here, below utils/torch_utils.py, so that it may re-export
them."""
from models.common import Classify
from utils.backend import nn


def reshape_classifier_output(model, n=1000):
    """Give model's last layer n outputs (a new, randomly initialised layer; one already of n is kept). model: a
    ClassificationModel (its .model Sequential), or any module whose last child is the head."""
    name, m = list((model.model if hasattr(model, "model") else model).named_children())[-1]
    if isinstance(m, Classify):
        if m.linear.out_features != n:
            m.linear = nn.Linear(m.linear.in_features, n)
        if hasattr(model, "model"):  # a ClassificationModel records its class count
            model.nc = n
    elif isinstance(m, nn.Linear):
        if m.out_features != n:
            setattr(model, name, nn.Linear(m.in_features, n))
    elif isinstance(m, nn.Sequential):
        kinds = [type(x) for x in m]
        if nn.Linear in kinds:
            i = len(kinds) - 1 - kinds[::-1].index(nn.Linear)
            if m[i].out_features != n:
                m[i] = nn.Linear(m[i].in_features, n)
        elif nn.Conv2d in kinds:
            i = len(kinds) - 1 - kinds[::-1].index(nn.Conv2d)
            if m[i].out_channels != n:
                m[i] = nn.Conv2d(m[i].in_channels, n, m[i].kernel_size, m[i].stride, bias=m[i].bias is not None)


def smartCrossEntropyLoss(label_smoothing=0.0):  # noqa: N802  (official's name)
    """CrossEntropyLoss with label smoothing (both frameworks take it: PyTorch >= 1.10, OneFlow 0.9.0)."""
    return nn.CrossEntropyLoss(label_smoothing=float(label_smoothing))
