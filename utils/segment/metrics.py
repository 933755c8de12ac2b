"""ultralytics' import path for the segmentation metrics, kept for users' scripts copied from official segment/val.py
and segment/train.py: `from utils.segment.metrics import KEYS, BEST_KEYS, Metrics, Metric, fitness, ...`.
No library module imports this facade; the AP maths is detection's, once:

    utils/metrics.py   ap_per_class (ap_per_class_box_and_mask: run once for the boxes, once for the masks),
                       fitness (here per group of four: boxes, then masks)
    here               KEYS, BEST_KEYS (results.csv's and the loggers' column names), Metric / Metrics: the official
                       holders of the per-class arrays, with the properties segment/val.py reads

The trainer itself takes its columns and fitness from the SEGMENT task (utils/tasks/segment.py); the tests check
that both give the same.
"""
import numpy as np

from utils.metrics import ap_per_class
from utils.metrics import fitness as _detection_fitness

_LOSSES = ("box_loss", "seg_loss", "obj_loss", "cls_loss")
_METRICS = ("precision", "recall", "mAP_0.5", "mAP_0.5:0.95")
_KINDS = ("B", "M")  # boxes, masks

KEYS = ([f"train/{n}" for n in _LOSSES] + [f"metrics/{m}({k})" for k in _KINDS for m in _METRICS] +
        [f"val/{n}" for n in _LOSSES] + [f"x/lr{i}" for i in range(3)])
BEST_KEYS = ["best/epoch"] + [f"best/{m}({k})" for k in _KINDS for m in _METRICS]


def fitness(x):
    """Rows of [box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, ...] -> 0.1 mAP50 + 0.9 mAP50-95 of the boxes
    plus the same of the masks: what best.pt is chosen by."""
    x = np.asarray(x)
    return _detection_fitness(x[..., :4]) + _detection_fitness(x[..., 4:8])


def ap_per_class_box_and_mask(tp_m, tp_b, conf, pred_cls, target_cls, plot=False, save_dir=".", names=()):
    """ap_per_class for the boxes (tp_b) and the masks (tp_m) of the same predictions. Returns
    {'boxes': {'p', 'r', 'ap', 'f1', 'ap_class'}, 'masks': {...}}, keys in that order (Metric.update reads them so)."""
    out = {}
    for key, tp, prefix in (("boxes", tp_b, "Box"), ("masks", tp_m, "Mask")):
        p, r, f1, ap, ap_class = ap_per_class(tp, conf, pred_cls, target_cls, plot=plot, save_dir=save_dir,
                                              names=names, prefix=prefix)[2:]
        out[key] = {"p": p, "r": r, "ap": ap, "f1": f1, "ap_class": ap_class}
    return out


class Metric:
    """One kind's (boxes' or masks') per-class results: p, r, f1 (nc,), all_ap (nc, 10), ap_class_index (nc,), nc
    counting the classes with labels. Empty lists until update()."""

    def __init__(self):
        self.p, self.r, self.f1, self.all_ap, self.ap_class_index = [], [], [], [], []

    @property
    def ap50(self):
        """(nc,) AP at IoU 0.5, or []."""
        return self.all_ap[:, 0] if len(self.all_ap) else []

    @property
    def ap(self):
        """(nc,) AP at IoU 0.5:0.95, or []."""
        return self.all_ap.mean(1) if len(self.all_ap) else []

    @property
    def mp(self):
        return self.p.mean() if len(self.p) else 0.0

    @property
    def mr(self):
        return self.r.mean() if len(self.r) else 0.0

    @property
    def map50(self):
        return self.all_ap[:, 0].mean() if len(self.all_ap) else 0.0

    @property
    def map(self):
        return self.all_ap.mean() if len(self.all_ap) else 0.0

    def mean_results(self):
        """(mp, mr, map50, map)."""
        return self.mp, self.mr, self.map50, self.map

    def class_result(self, i):
        """(p, r, ap50, ap) of the i-th class with labels (an index into ap_class_index, not a class id)."""
        return self.p[i], self.r[i], self.ap50[i], self.ap[i]

    def get_maps(self, nc):
        """(nc,) mAP50-95 per class id; classes without labels get the overall mAP50-95."""
        maps = np.zeros(nc) + self.map
        for i, c in enumerate(self.ap_class_index):
            maps[c] = self.ap[i]
        return maps

    def update(self, results):
        """results: (p, r, all_ap, f1, ap_class_index), the order of one kind's dict values above."""
        self.p, self.r, self.all_ap, self.f1, self.ap_class_index = results


class Metrics:
    """The boxes' and the masks' Metric side by side; tuples are the box values followed by the mask values."""

    def __init__(self):
        self.metric_box, self.metric_mask = Metric(), Metric()

    def update(self, results):
        """results: ap_per_class_box_and_mask's dict."""
        self.metric_box.update(list(results["boxes"].values()))
        self.metric_mask.update(list(results["masks"].values()))

    def mean_results(self):
        return self.metric_box.mean_results() + self.metric_mask.mean_results()

    def class_result(self, i):
        return self.metric_box.class_result(i) + self.metric_mask.class_result(i)

    def get_maps(self, nc):
        """(nc,) box plus mask mAP50-95 per class id."""
        return self.metric_box.get_maps(nc) + self.metric_mask.get_maps(nc)

    @property
    def ap_class_index(self):
        return self.metric_box.ap_class_index  # the same classes for both kinds: those with labels


__all__ = ["BEST_KEYS", "KEYS", "Metric", "Metrics", "ap_per_class_box_and_mask", "fitness"]
