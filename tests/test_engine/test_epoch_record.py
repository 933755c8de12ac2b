"""The loop's hooks talk through one EpochRecord (utils/engine/loop.py), never through the loop's attributes, and
"this epoch is the last" is one value, record.is_last_epoch, that every hook reads. Tiny model, milliseconds."""
import re
from pathlib import Path

import pytest

from tests.helpers.engine_helpers import tiny_parts
from utils.checkpoint import load_checkpoint
from utils.engine.hooks import CheckpointHook, EarlyStopHook
from utils.engine.loop import EpochRecord, HookBase, TrainLoop
from utils.engine.parts import RunFolder

ENGINE = Path(__file__).resolve().parents[2] / "utils" / "engine"
# what hooks used to park on the loop, and the old spellings of "last epoch"
OLD_LOOP_STATE = ("results", "maps", "fitness", "best_fitness", "best_epoch", "stop_possible", "saved_in_epoch",
                  "written_stripped", "final_epoch", "ends_here", "mloss", "lrs")


class WritesOnLoop(HookBase):
    def __init__(self, name):
        self.name = name

    def after_epoch(self):
        setattr(self.loop, self.name, 1.0)


@pytest.mark.parametrize("name", OLD_LOOP_STATE)
def test_a_hook_cannot_park_state_on_the_loop(name):
    loop = TrainLoop(tiny_parts(epochs=1, nb=1), [WritesOnLoop(name)])
    with pytest.raises(AttributeError):
        loop.train()


def test_a_hook_cannot_move_the_loop_to_another_epoch():
    class MovesEpoch(HookBase):
        def before_epoch(self):
            self.loop.epoch = 5

    with pytest.raises(AttributeError):
        TrainLoop(tiny_parts(epochs=1, nb=1), [MovesEpoch()]).train()


class Publish(HookBase):
    """Publishes each epoch's fitness into the record, as ValidationHook does."""

    def __init__(self, fitnesses):
        self.fitnesses = fitnesses

    def after_epoch(self):
        rec = self.loop.record
        rec.fitness = self.fitnesses[rec.epoch]
        if rec.fitness > rec.best_fitness:
            rec.best_fitness, rec.best_epoch = rec.fitness, rec.epoch


class Watch(HookBase):
    """What the record said at each point: (phase, epoch, is_last_epoch, may_be_last, best_fitness)."""

    def __init__(self):
        self.seen = []

    def _note(self, phase):
        r = self.loop.record
        self.seen.append((phase, r.epoch, r.is_last_epoch, r.may_be_last, r.best_fitness))

    def before_epoch(self):
        self._note("before_epoch")

    def after_epoch(self):
        self._note("after_epoch")

    def after_train(self):
        self._note("after_train")


def test_the_record_carries_the_running_values_and_resets_the_epochs_own():
    watch = Watch()
    loop = TrainLoop(tiny_parts(epochs=3, nb=2), [Publish([0.2, 0.1, 0.3]), watch])
    loop.train()
    after = [s for s in watch.seen if s[0] == "after_epoch"]
    assert [s[4] for s in after] == [0.2, 0.2, 0.3]  # best fitness carried from epoch to epoch
    assert (loop.record.best_epoch, loop.record.fitness) == (2, 0.3)
    assert [(s[1], s[2]) for s in after] == [(0, False), (1, False), (2, True)]
    assert watch.seen[-1] == ("after_train", 2, True, True, 0.3)
    nxt = loop.record.following(3, 5)  # a new epoch: its own values reset, the running ones kept
    assert (nxt.fitness, nxt.lrs, nxt.best_fitness, nxt.is_last_epoch) == (0.0, [], 0.3, False)


def test_is_last_epoch_is_one_value_that_an_early_stop_turns_on():
    """patience 2, best at epoch 1: the early stopper stops at epoch 3 of 6. Hooks after it see is_last_epoch turn
    True in that epoch (a hook before it saw False); may_be_last (official's final_epoch) was known at its start."""
    before, after = Watch(), Watch()
    hooks = [Publish([0.1, 0.3, 0.2, 0.25, 0.9, 0.9]), before, EarlyStopHook(patience=2), after]
    loop = TrainLoop(tiny_parts(epochs=6, nb=1), hooks)
    loop.train()
    last = [(s[1], s[2], s[3]) for s in after.seen if s[0] == "after_epoch"]
    assert last == [(0, False, False), (1, False, False), (2, False, False), (3, True, True)]
    assert [s[2] for s in before.seen if s[0] == "after_epoch"] == [False, False, False, False]
    assert [s[3] for s in before.seen if s[0] == "before_epoch"] == [False, False, False, True]
    assert loop.epoch == 3 and after.seen[-1][:3] == ("after_train", 3, True)


def test_the_checkpoint_hook_writes_the_final_form_exactly_when_the_record_says_last(tmp_path):
    """A hook stops training after epoch 1 of 4: CheckpointHook, after it, reads the same is_last_epoch and writes
    last.pt in its final (stripped) form then, a whole checkpoint before."""
    class StopAt(HookBase):
        def after_epoch(self):
            if self.loop.epoch == 1:
                self.loop.request_stop()

    class Saved(HookBase):
        def __init__(self):
            self.epochs = []

        def after_epoch(self):
            ck = load_checkpoint(self.loop.parts.run.last, tensors=False, build_models=False)
            self.epochs.append((ck["epoch"], ck["optimizer"] is None))

    parts = tiny_parts(epochs=4, nb=1, run=RunFolder(save_dir=tmp_path))
    parts.run.weights.mkdir(parents=True)
    saved = Saved()
    loop = TrainLoop(parts, [StopAt(), CheckpointHook(), saved])
    loop.train()
    assert saved.epochs == [(0, False), (-1, True)]  # epoch 0 whole; epoch 1, the last, stripped
    assert loop.record.written_stripped == {parts.run.last, parts.run.best}
    assert loop.record.saved_in_epoch == {parts.run.last: 1, parts.run.best: 1}


def test_last_epoch_is_computed_in_one_place():
    """Neither the loop nor a hook compares an epoch with the epoch count, or reads the early stopper's word, but
    EpochRecord.following."""
    last_epoch = re.compile(r"\+\s*1\s*==|==\s*[\w.]*epochs\b|stop_possible\b(?!_next)|possible_stop")
    found = {(f.name, line.strip()) for f in (ENGINE / "loop.py", ENGINE / "hooks.py")
             for line in f.read_text().splitlines() if last_epoch.search(line) and not line.strip().startswith("#")}
    assert found == {("loop.py", "is_last = epoch + 1 == epochs"),
                     ("hooks.py", "rec.stop_possible_next = self.stopper.possible_stop")}
    assert EpochRecord(0, False, False).following(4, 5).is_last_epoch


def test_each_epoch_validates_a_folded_copy_of_the_ema(monkeypatch):
    """ValidationHook hands validation a copy of the EMA with its Conv BatchNorms folded, in eval mode; the EMA
    itself keeps its BatchNorms and goes on averaging (its weights after the run are the EMA's, not the copy's).
    (A task that validates best.pt at the end validates its last epoch on best.pt's model instead:
    tests/test_engine/test_best_validation.py.)"""
    import dataclasses

    import utils.engine.hooks as hooks
    from utils.tasks.detect import DETECT
    from models.common import Conv
    from utils.backend import torch
    from utils.engine.hooks import ValidationHook
    seen = []

    def fake_validate(parts, model, plots=False, **kw):
        seen.append((model, model.training, sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())))
        return (0.1, 0.2, 0.3, 0.4, 0.0, 0.0, 0.0), None
    monkeypatch.setattr(hooks, "validate", fake_validate)
    net = torch.nn.Sequential(Conv(3, 4, 3), torch.nn.Conv2d(4, 2, 1))  # one BatchNorm, inside a Conv
    parts = tiny_parts(epochs=2, nb=1, model=net, task=dataclasses.replace(DETECT, validate_best=False))
    TrainLoop(parts, [ValidationHook()]).train()
    assert len(seen) == 2
    for model, training, n_bn in seen:
        assert model is not parts.ema.ema and not training and n_bn == 0
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in parts.ema.ema.modules()) == 1
