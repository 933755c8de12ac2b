"""utils/engine/schedule.py: the official warmup (bias lr from warmup_bias_lr, the others from 0, momentum, at least
100 iterations), epoch lr (linear or cosine) and accumulation, at chosen iterations, with values worked out by hand
from the official formulas (hyp.scratch-low: lr0 0.01, lrf 0.01, momentum 0.937, warmup_epochs 3,
warmup_momentum 0.8, warmup_bias_lr 0.1)."""
import pytest

from tests.helpers.engine_helpers import HYP, tiny_model
from utils.engine.schedule import Schedule, set_param_groups
from utils.torch_utils import smart_optimizer


def _schedule(nb=50, epochs=10, batch_size=16, cos_lr=False, lagging_lr_step=False, **hyp):
    return Schedule.from_hyp({**HYP, **hyp}, [0.01] * 3, epochs, nb, batch_size, cos_lr=cos_lr,
                             lagging_lr_step=lagging_lr_step)


def _lf(epoch, epochs=10):
    return (1 - epoch / epochs) * 0.99 + 0.01


def test_warmup_iterations_at_least_100():
    assert _schedule(nb=50).warmup_iters == 150  # 3 epochs of 50 batches
    assert _schedule(nb=10).warmup_iters == 100  # 30 would be too short: the official floor
    assert _schedule(nb=50, warmup_epochs=0).warmup_iters == 100
    assert _schedule(nb=7, warmup_epochs=20.5).warmup_iters == 144  # round(143.5), to even


def test_warmup_start_middle_end():
    s = _schedule()  # nw 150; epoch 1 starts at ni 50
    lrs, momentum, accumulate = s.at(0, 0)
    assert lrs == (0.1, 0.0, 0.0) and momentum == pytest.approx(0.8) and accumulate == 1
    # ni 75 of 150, in epoch 1: target lr 0.01 * lf(1) = 0.01 * (0.9 * 0.99 + 0.01) = 0.00901
    lrs, momentum, accumulate = s.at(75, 1)
    assert lrs == pytest.approx((0.054505, 0.004505, 0.004505), abs=1e-12)
    assert momentum == pytest.approx(0.8685)
    assert accumulate == 2  # 1 + 0.5 * (64 / 16 - 1) = 2.5, rounded to even as np.round does
    lrs, momentum, accumulate = s.at(150, 3)  # the last warmup iteration reaches the epoch's lr: lf(3) = 0.703
    assert lrs == pytest.approx((0.00703,) * 3, abs=1e-12) and momentum == pytest.approx(0.937) and accumulate == 4


def test_after_warmup_epoch_lr_and_accumulate():
    s = _schedule()
    lrs, momentum, accumulate = s.at(151, 3)
    assert lrs == pytest.approx((0.00703,) * 3, abs=1e-12) and momentum is None and accumulate == 4
    assert s.at(10_000, 9).lrs == pytest.approx((0.01 * (0.1 * 0.99 + 0.01),) * 3)
    assert s.epoch_lrs(10) == pytest.approx((1e-4,) * 3)  # lrf at the end
    assert _schedule(batch_size=128).at(500, 9).accumulate == 1  # a batch above the nominal 64 never accumulates
    assert _schedule(batch_size=24).at(500, 9).accumulate == 3  # round(64 / 24 = 2.67)


def test_the_detection_trainers_lr_step_lags_one_epoch():
    """Official train.py and segment/train.py set `scheduler.last_epoch = start_epoch - 1` after making their
    LambdaLR, so its step at the end of epoch e sets lf(e): each epoch after the warmup trains at lf(epoch - 1).
    Official classify/train.py has no such line: its step sets lf(e + 1)."""
    lag, plain = _schedule(lagging_lr_step=True), _schedule()  # warmup: 150 iterations, ends in epoch 3
    assert lag.warmup_end_epoch == plain.warmup_end_epoch == 3
    for s in (lag, plain):  # the epoch the warmup ends in keeps the lr the warmup reached
        assert s.at(151, 3).lrs == pytest.approx((0.01 * _lf(3),) * 3, abs=1e-12)
    assert lag.lrs_after_epoch(3) == pytest.approx((0.01 * _lf(3),) * 3)  # epoch 4 trains at lf(3)
    assert plain.lrs_after_epoch(3) == pytest.approx((0.01 * _lf(4),) * 3)
    assert lag.at(200, 4).lrs == lag.lrs_after_epoch(3) and plain.at(200, 4).lrs == plain.lrs_after_epoch(3)
    assert lag.at(10_000, 9).lrs == pytest.approx((0.01 * _lf(8),) * 3)  # the last epoch at lf(epochs - 2)
    assert lag.lrs_of_epoch(0) == plain.lrs_of_epoch(0) == pytest.approx((0.01,) * 3)  # a new run starts at lf(0)
    early = _schedule(nb=1000, lagging_lr_step=True, warmup_epochs=0)  # 100 iterations, in epoch 0: epoch 1 at lf(0)
    assert early.warmup_end_epoch == 0 and early.lrs_of_epoch(1) == pytest.approx((0.01,) * 3)


def test_cosine_lr():
    s = _schedule(cos_lr=True)
    assert s.epoch_lrs(0) == pytest.approx((0.01,) * 3)
    assert s.epoch_lrs(5) == pytest.approx((0.01 * 0.505,) * 3)  # halfway: (1 + lrf) / 2
    assert s.epoch_lrs(2)[0] > _schedule().epoch_lrs(2)[0]  # cosine stays higher early on


def test_pure_function_of_iteration_and_epoch():
    s = _schedule()
    later = s.at(120, 2)
    assert s.at(3, 0) == _schedule().at(3, 0) and s.at(120, 2) == later  # no state carried between calls


def test_set_param_groups_on_the_three_groups():
    s = _schedule()
    sgd = smart_optimizer(tiny_model(), "SGD", 0.01, 0.937, 5e-4)
    lrs, momentum, _ = s.at(30, 0)
    set_param_groups(sgd, lrs, momentum)
    assert [g["lr"] for g in sgd.param_groups] == list(lrs) and lrs[0] > lrs[1] == lrs[2] > 0
    assert all(g["momentum"] == momentum for g in sgd.param_groups)
    adam = smart_optimizer(tiny_model(), "Adam", 0.01, 0.937, 5e-4)
    set_param_groups(adam, lrs, momentum)
    assert all("momentum" not in g and tuple(g["betas"]) == (0.937, 0.999) for g in adam.param_groups)
