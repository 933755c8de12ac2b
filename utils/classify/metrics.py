"""Top-k accuracy of classifier outputs (numpy), overall and per class."""
import numpy as np


def topk_correct(logits, targets, k=5):
    """(n, 2) float: per sample, whether the target is the top-1 class and whether it is among the top k.
    Ties are broken as a descending stable sort of the scores would."""
    logits, targets = np.asarray(logits, np.float32), np.asarray(targets).reshape(-1)
    order = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    hit = order == targets[:, None]
    return np.stack((hit[:, 0], hit.any(1)), 1).astype(np.float64)


def accuracy_table(acc, targets, names):
    """[(name, images, top1, top5)] for 'all' and each class in names order."""
    rows = [("all", len(acc), *acc.mean(0))] if len(acc) else [("all", 0, 0.0, 0.0)]
    for i, c in names.items():
        a = acc[np.asarray(targets) == i]
        rows.append((c, len(a), *(a.mean(0) if len(a) else (float("nan"), float("nan")))))
    return rows
