"""A user's utils.callbacks.Callbacks, handed to train.main(opt, callbacks=...), is called at the official training
events with the official arguments, can stop the run, and is told when it registers what training never calls."""
import logging

import pytest

from tests.helpers.engine_helpers import tiny_parts
from utils.callbacks import EVENTS, CallbackError, Callbacks
from utils.engine.hooks import CheckpointHook
from utils.engine.loop import TrainLoop
from utils.engine.parts import RunFolder
from utils.engine.user_callbacks import NOT_CALLED, UserCallbacksHook


def recorder(events=EVENTS):
    cb, calls = Callbacks(), []
    for e in events:
        if e not in NOT_CALLED:
            cb.register_action(e, name="rec", callback=lambda *a, _e=e, **k: calls.append((_e, a, k)))
    return cb, calls


def test_registration_refuses_unknown_events_and_non_callables():
    cb = Callbacks()
    with pytest.raises(CallbackError, match="'on_train_epoch_ends' does not exist"):
        cb.register_action("on_train_epoch_ends", callback=print)  # a typo would never be called
    with pytest.raises(CallbackError, match="not callable"):
        cb.register_action("on_train_end", callback=None)
    cb.register_action("on_train_end", name="a", callback=print)
    assert [a["name"] for a in cb.get_registered_actions("on_train_end")] == ["a"]


def test_events_arrive_in_the_official_order_with_the_official_arguments(tmp_path):
    parts = tiny_parts(epochs=2, nb=3, run=RunFolder(save_dir=tmp_path))
    parts.run.weights.mkdir(parents=True)
    cb, calls = recorder()
    loop = TrainLoop(parts, [CheckpointHook(), UserCallbacksHook(cb)])
    loop.train()
    names = [c[0] for c in calls]
    per_epoch = ["on_train_epoch_start"] + ["on_train_batch_start", "on_train_batch_end"] * 3 + [
        "on_train_epoch_end", "on_fit_epoch_end", "on_model_save"]
    assert names == ["on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_start", *per_epoch,
                     *per_epoch, "on_train_end", "teardown"]
    batch_ends = [c[1] for c in calls if c[0] == "on_train_batch_end"]
    assert [b[1] for b in batch_ends] == [0, 1, 2, 3, 4, 5]  # ni, the integrated iteration
    model, _, imgs, targets, paths, mloss = batch_ends[0]
    assert model is parts.model and tuple(imgs.shape) == (2, 3, 8, 8) and paths == ["im0.jpg"] and len(mloss) == 3
    fit = [c[1] for c in calls if c[0] == "on_fit_epoch_end"]
    assert [f[1] for f in fit] == [0, 1] and len(fit[0][0]) == 3 + 7 + 3  # losses, metrics + val losses, 3 lrs
    assert [c[2] for c in calls if c[0] == "on_train_epoch_end"] == [{"epoch": 0}, {"epoch": 1}]
    saves = [c[1] for c in calls if c[0] == "on_model_save"]
    assert saves[0][:3] == (parts.run.last, 0, False) and saves[1][:3] == (parts.run.last, 1, True)
    last, best, epoch, results = next(c[1] for c in calls if c[0] == "on_train_end")
    assert (last, best, epoch) == (parts.run.last, parts.run.best, 1) and last.is_file()


def test_stop_training_ends_the_run_after_the_epoch():
    cb = Callbacks()
    batches = []
    cb.register_action("on_train_batch_end", callback=lambda model, ni, *a: batches.append(ni))

    def stop(epoch):
        cb.stop_training = epoch == 1

    cb.register_action("on_train_epoch_end", callback=stop)
    loop = TrainLoop(tiny_parts(epochs=5, nb=2), [UserCallbacksHook(cb)])
    loop.train()
    assert batches == [0, 1, 2, 3] and loop.record.epoch == 1  # epochs 0 and 1 trained whole, then stopped


def test_a_validation_event_is_reported_as_never_called(caplog):
    logging.getLogger("yolov5").propagate = True
    try:
        cb = Callbacks()
        cb.register_action("on_val_end", callback=print)
        with caplog.at_level(logging.WARNING, logger="yolov5"):
            UserCallbacksHook(cb)
    finally:
        logging.getLogger("yolov5").propagate = False
    assert "on_val_end" in caplog.text and "does not call" in caplog.text


@pytest.mark.slow
def test_train_main_calls_the_callbacks_of_a_real_run(tmp_path):
    """train.main(opt, callbacks=...) as a script copied from the official repository calls it."""
    import train
    from tests.helpers.train_helpers import make_tiny_dataset
    data = make_tiny_dataset(tmp_path / "d", n_train=4, n_val=2, size=64)
    cb, calls = recorder()
    opt = train.parse_opt(args=["--data", str(data), "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64",
                                "--epochs", "1", "--batch-size", "4", "--workers", "0", "--device", "cpu",
                                "--noplots", "--project", str(tmp_path / "runs")])
    train.main(opt, callbacks=cb)
    names = [c[0] for c in calls]
    assert names[:3] == ["on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_start"]
    labels, class_names = calls[1][1]
    assert labels.shape[1] == 5 and len(labels) > 0 and list(class_names.values()) == ["rect", "ellipse"]
    assert names.count("on_train_batch_end") == 1 and names[-2:] == ["on_train_end", "teardown"]
    last = calls[-2][1][0]
    assert last.name == "last.pt" and last.is_file()
