"""best.pt's final validation, done once when training ends on its best epoch.

The official trainer validates the last epoch's EMA, writes it to best.pt in fp16 when its fitness is the best so far,
then reads best.pt back and validates it again with plots and per-class rows. When the last epoch is the best one
(the usual end of a run whose learning rate decays to its end) that second pass repeats the first on the same weights
up to their fp16 rounding: on a 2-core CPU, 2.6 s of a 17 s yolov5n run. Here the last epoch is validated on exactly
the model that reading best.pt back gives (the EMA's floats rounded to fp16 as the stripped checkpoint stores them,
rebuilt and folded as attempt_load does), with best.pt's plots; when that epoch is written to best.pt, its figures
are best.pt's validation, printed as such at the end, and the pass is not repeated. Otherwise best.pt is validated
after training as before (the plots are drawn again, for best.pt).

What changes for a user: the last epoch's row of results.csv holds the figures of its fp16-rounded weights, which
are the figures best.pt gives anywhere; the official row holds the fp32 EMA's (a 3-epoch yolov5n 320 run: P 0.5132
against 0.5026, mAP50-95 0.23836 against 0.23795, while best.pt's printed figures were the same both ways).
"""
import collections
from dataclasses import dataclass
from typing import Any, List

import numpy as np

from models.experimental import model_from_record
from models.yolo import fold_batchnorm
from utils.checkpoint.records import model_record
from utils.log import LOGGER


def last_epoch_validates_best(parts, record):
    """Whether this epoch's validation can stand for best.pt's: the run's last epoch, of a task that validates
    best.pt at the end (not --evolve, whose generations skip it), with best.pt's validation settings (a COCO
    val2017 run's best.pt is validated at IoU 0.65 and writes JSON: validated again as official)."""
    return bool(record.is_last_epoch and parts.task.validate_best and not parts.options.evolve
                and not parts.is_coco)


def as_best_pt_holds(ema_model, device, build_model, source):
    """The model that attempt_load(best.pt) gives once ema_model is written to best.pt: its floating-point
    parameters and buffers rounded to fp16 (the stripped checkpoint's storage), rebuilt from that record by
    build_model (the task's) the same way, in eval mode, BatchNorms folded. The fold is silent here; the summary
    the official fuse prints is printed with the figures (HeldValidation.report)."""
    record = model_record(ema_model)
    record["state_dict"] = collections.OrderedDict(
        (k, v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in record["state_dict"].items())
    model = model_from_record(record, source, device=device, fuse=False, build_model=build_model)
    return fold_batchnorm(model)


@dataclass
class HeldValidation:
    """The last epoch's validation on best.pt's model, kept until training ends: whether it is best.pt's is known
    only once the epoch's fitness is compared and its checkpoints are written."""
    epoch: int
    model: Any  # the folded model validated (its summary is part of the report)
    table: List[str]  # header, `all` row, per-class rows

    def report(self, best):
        """Print what validating best.pt prints: the file, the model's summary, the figures with per-class rows."""
        LOGGER.info(f"\nValidating {best}...")
        self.model.info()
        for row in self.table:
            LOGGER.info(row)
