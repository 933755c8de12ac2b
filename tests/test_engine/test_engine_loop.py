"""utils/engine/loop.py and hooks.py on a tiny model, a fixed loader and a made-up loss (tests/helpers/engine_helpers.py), in
milliseconds: the order of hook calls, gradient accumulation, the lr columns, early stopping, a hook that stops
training, and a resume from the checkpoint contents that continues exactly as the uninterrupted run."""
import copy
import dataclasses

import numpy as np
import pytest

from tests.helpers.engine_helpers import tiny_parts, weights
from utils.engine.resume import restore_rng, restore_training_state
from utils.engine.hooks import EarlyStopHook, checkpoint_contents
from utils.engine.loop import HookBase, TrainLoop

PHASES = ("before_train", "before_epoch", "before_step", "after_step", "after_epoch", "after_train")


class Recorder(HookBase):
    """Records (name, phase, epoch, iter) of every call into a shared list."""

    def __init__(self, name, log):
        self.name, self.log = name, log
        for phase in PHASES:
            setattr(self, phase, self._recorder(phase))

    def _recorder(self, phase):
        def record():
            self.log.append((self.name, phase, self.loop.epoch, self.loop.iter if phase.endswith("step") else None))
        return record


def test_hook_order():
    log = []
    loop = TrainLoop(tiny_parts(epochs=2, nb=2), [Recorder("a", log), Recorder("b", log)])
    loop.train()
    want = [("before_train", 0, None)]
    for e in range(2):
        want.append(("before_epoch", e, None))
        for i in range(2):
            want += [("before_step", e, i), ("after_step", e, i)]
        want.append(("after_epoch", e, None))
    want.append(("after_train", 1, None))
    assert log == [(h, *w) for w in want for h in "ab"]  # each call goes to a, then b


class StepWatcher(HookBase):
    """What each step left: the integrated iteration, whether it stepped the optimizer, the losses read."""

    def __init__(self):
        self.steps, self.read, self.lrs_after_epoch, self.final = [], [], [], []
        self.updates = 0

    def after_step(self):
        ema = self.loop.parts.ema
        self.steps.append((self.loop.ni, ema.updates > self.updates, self.loop.last_opt_step))
        self.updates = ema.updates
        self.read.append(self.loop.losses_read is not None)

    def after_epoch(self):
        groups = self.loop.parts.optimizer.param_groups
        self.lrs_after_epoch.append((list(self.loop.record.lrs), [float(g["lr"]) for g in groups]))
        self.final.append(self.loop.record.may_be_last)


def test_accumulation_follows_the_warmup():
    """Batch 32: accumulate rises from 1 to 64/32 = 2 over the 100 warmup iterations (np.interp, rounded to even),
    so the first 50 iterations each step the optimizer and from there every second one does."""
    watch = StepWatcher()
    loop = TrainLoop(tiny_parts(epochs=12, nb=10, batch_size=32), [watch])
    loop.train()
    stepped = [ni for ni, did, _ in watch.steps if did]
    assert [ni for ni, _, _ in watch.steps] == list(range(120))
    assert stepped[:50] == list(range(50))  # accumulate 1 while 1 + ni / 100 < 1.5
    assert 50 not in stepped and 51 in stepped  # ni 50: 1.5 rounds to 2, one iteration since the last step
    assert np.all(np.diff(stepped[50:]) == 2) and stepped[-1] == 119
    assert len(stepped) == 50 + 35 == loop.parts.ema.updates
    assert loop.last_opt_step == 119 and all(watch.read)  # on the CPU the losses are read every step


@pytest.mark.parametrize("lagging", [True, False], ids=["detect-lagging-step", "classify-step"])
def test_epoch_lrs_are_the_last_step_lrs_then_the_next_epochs(lagging):
    """results.csv's x/lr0-2 (loop.lrs) hold the lrs the epoch's last step trained with; then the loop sets the next
    epoch's lr (overwritten again by the warmup while it lasts): lf(epoch) with the detection trainer's lagging step,
    lf(epoch + 1) without."""
    watch = StepWatcher()
    parts = tiny_parts(epochs=6, nb=30)  # warmup: 100 iterations, until epoch 3's ni 100
    parts.schedule = dataclasses.replace(parts.schedule, lagging_lr_step=lagging)
    loop = TrainLoop(parts, [watch])
    loop.train()
    s = loop.parts.schedule
    for epoch, (lrs, after) in enumerate(watch.lrs_after_epoch):
        assert lrs == list(s.at(30 * epoch + 29, epoch).lrs)
        assert after == list(s.epoch_lrs(epoch if lagging else epoch + 1))
    assert watch.lrs_after_epoch[3][0] == list(s.epoch_lrs(3))  # the warmup ended in epoch 3 at lf(3)
    assert watch.lrs_after_epoch[4][0] == list(s.epoch_lrs(3 if lagging else 4))
    assert watch.lrs_after_epoch[5][0] == list(s.epoch_lrs(4 if lagging else 5))
    assert watch.lrs_after_epoch[0][0][0] > watch.lrs_after_epoch[0][0][1]  # the bias group starts high
    assert watch.final == [False] * 5 + [True]


class FakeValidation(HookBase):
    """Sets each epoch's fitness from a list, as ValidationHook does from mAPs."""

    def __init__(self, fitnesses):
        self.fitnesses = fitnesses

    def after_epoch(self):
        self.loop.record.fitness = self.fitnesses[self.loop.epoch]


def test_early_stop_after_patience_epochs_without_improvement():
    """patience 2: best at epoch 1, epochs 2 and 3 no better -> stop after epoch 3. Epoch 3 is announced as possibly
    final (so ValidationHook validates it under --noval) and after_train still runs."""
    watch, log = StepWatcher(), []
    hooks = [FakeValidation([0.1, 0.3, 0.2, 0.25, 0.9, 0.9]), EarlyStopHook(patience=2), watch, Recorder("r", log)]
    loop = TrainLoop(tiny_parts(epochs=6, nb=1), hooks)
    loop.train()
    assert [e for _, phase, e, _ in log if phase == "after_epoch"] == [0, 1, 2, 3]
    assert watch.final == [False, False, False, True]
    assert log[-1][1] == "after_train" and loop.epoch == 3


class StopAfter(HookBase):
    def __init__(self, epoch):
        self.epoch = epoch

    def after_epoch(self):
        if self.loop.epoch == self.epoch:
            self.loop.request_stop()


def test_a_hook_stops_training_after_the_epoch():
    log = []
    loop = TrainLoop(tiny_parts(epochs=5, nb=2), [StopAfter(1), Recorder("r", log)])
    loop.train()
    epochs_run = sorted({e for _, phase, e, _ in log if phase == "before_epoch"})
    assert epochs_run == [0, 1]
    assert ("r", "after_epoch", 1, None) in log  # later hooks still finish the epoch
    assert log[-1] == ("r", "after_train", 1, None)


class Capture(HookBase):
    """At the end of `epoch`: what CheckpointHook would save, with the models as a file read gives them back."""

    def __init__(self, epoch):
        self.epoch, self.ckpt = epoch, None

    def after_epoch(self):
        if self.loop.epoch == self.epoch:
            ck = checkpoint_contents(self.loop)
            ck["model"], ck["ema"] = copy.deepcopy(ck["model"].module), copy.deepcopy(ck["ema"].module)
            self.ckpt = ck
            self.loop.request_stop()


def test_resume_continues_exactly():
    """Stopped after epoch 1 (inside the warmup) and resumed from its checkpoint contents: the resumed run starts at
    epoch 2, iteration 60, with the checkpoint's optimizer, EMA and last optimizer step, and ends with the
    uninterrupted run's weights, EMA, lr columns and optimizer state."""
    epochs, nb = 4, 30
    full_watch = StepWatcher()
    full = TrainLoop(tiny_parts(epochs, nb), [full_watch])
    full.train()

    capture = Capture(epoch=1)
    TrainLoop(tiny_parts(epochs, nb), [capture]).train()
    ck = capture.ckpt
    last_step = full_watch.steps[59][2]  # batch 2 accumulates up to 32 iterations: a step some iterations back
    assert ck["epoch"] == 1 and ck["last_opt_step"] == last_step < 59

    parts = tiny_parts(epochs, nb, model=ck["model"])
    parts.state = restore_training_state(ck, parts.optimizer, parts.scaler, parts.ema, parts.device, epochs)
    restore_rng(ck)
    assert (parts.state.start_epoch, parts.state.last_opt_step) == (2, last_step)
    assert [g["lr"] for g in parts.optimizer.param_groups] == full_watch.lrs_after_epoch[1][1]
    assert parts.ema.updates == ck["updates"]
    watch = StepWatcher()
    watch.updates = parts.ema.updates
    resumed = TrainLoop(parts, [watch])
    resumed.train()

    assert watch.steps[0][0] == 60 and resumed.last_opt_step == full.last_opt_step
    assert watch.steps == full_watch.steps[60:]
    assert watch.lrs_after_epoch == full_watch.lrs_after_epoch[2:]
    for a, b in ((full.parts.model, resumed.parts.model), (full.parts.ema.ema, resumed.parts.ema.ema)):
        wa, wb = weights(a), weights(b)
        for k in wa:
            np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
    assert resumed.parts.ema.updates == full.parts.ema.updates


def test_resume_refuses_a_finished_run():
    from utils.engine.errors import TrainingError
    parts = tiny_parts(epochs=3)
    ck = {"epoch": 2, "optimizer": None, "best_fitness": None}
    with pytest.raises(TrainingError, match="finished its 3 epochs"):
        restore_training_state(ck, parts.optimizer, parts.scaler, parts.ema, parts.device, 3, name="last.pt")
