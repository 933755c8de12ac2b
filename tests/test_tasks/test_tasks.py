"""utils/tasks/: the task plug-in. Detection's fills every seam with what the trainer used before; a task with other
loss items runs through the same loop, validation pass and results.csv without a branch on the task."""
import dataclasses

import numpy as np

from tests.helpers.engine_helpers import fake_loss, tiny_parts
from utils.engine.loop import HookBase, TrainLoop
from utils.evaluation.runner import evaluator_for_dataset
from utils.loggers import KEYS, Loggers
from utils.metrics import fitness
from utils.nms import non_max_suppression
from utils.tasks.detect import DETECT


def test_detection_fills_the_seams_with_the_official_pieces():
    assert DETECT.results_keys() == KEYS  # results.csv keeps the ultralytics columns
    assert DETECT.loss_names == ("box_loss", "obj_loss", "cls_loss")
    assert DETECT.fitness is fitness and DETECT.postprocess is non_max_suppression
    assert DETECT.build_evaluator is evaluator_for_dataset
    assert DETECT.model_class.__name__ == "DetectionModel" and DETECT.head.__name__ == "Detect"


def two_item_loss(pred, targets):
    loss, items = fake_loss(pred, targets)
    return loss, items[:2]


class KeepMeans(HookBase):
    def __init__(self):
        self.means = []

    def after_epoch(self):
        self.means.append(np.array(self.loop.record.mloss))


def test_a_task_with_other_loss_items_runs_through_the_loop():
    task = dataclasses.replace(DETECT, name="two-losses", loss_names=("a_loss", "b_loss"))
    parts = tiny_parts(epochs=2, task=task)
    parts.compute_loss = two_item_loss
    keep = KeepMeans()
    TrainLoop(parts, [keep]).train()
    assert [m.shape for m in keep.means] == [(2,), (2,)] and all(np.isfinite(m).all() for m in keep.means)
    assert task.results_keys() == ["train/a_loss", "train/b_loss", *DETECT.metric_names, "val/a_loss", "val/b_loss",
                                   "x/lr0", "x/lr1", "x/lr2"]


def test_results_csv_follows_the_task_columns(tmp_path):
    task = dataclasses.replace(DETECT, loss_names=("a_loss",))
    log = Loggers(tmp_path, include=("csv",), keys=task.results_keys())
    log.on_fit_epoch_end([0.5, 0.1, 0.2, 0.3, 0.4, 0.6, 0.01, 0.02, 0.03], epoch=0)
    header = [k.strip() for k in (tmp_path / "results.csv").read_text().splitlines()[0].split(",")]
    assert header == ["epoch", "train/a_loss", *DETECT.metric_names, "val/a_loss", "x/lr0", "x/lr1", "x/lr2"]


def test_the_model_graph_goes_to_tensorboard_where_the_official_trainer_writes_it():
    """Official train.py and classify/train.py write the model graph before training; segment/train.py does not."""
    from types import SimpleNamespace
    from utils.engine.hooks import ResultsLogHook
    from utils.tasks.classify import CLASSIFY
    from utils.tasks.segment import SEGMENT

    class Recorder:
        def __init__(self):
            self.graphs = 0

        def truncate_csv(self, epoch):
            pass

        def on_pretrain_routine_end(self, data):
            pass

        def on_train_start(self, model, imgsz, plots=True):
            self.graphs += 1

    for task, graphs in ((DETECT, 1), (CLASSIFY, 1), (SEGMENT, 0)):
        hook = ResultsLogHook(Recorder())
        parts = SimpleNamespace(task=task, state=SimpleNamespace(resumed=False), data={}, model=None, imgsz=64,
                                options=SimpleNamespace(noplots=False))
        hook.loop = SimpleNamespace(parts=parts, start_epoch=0)
        hook.before_train()
        assert hook.loggers.graphs == graphs, task.name
