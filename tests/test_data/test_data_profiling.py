"""StageTimer: per-stage time of the dataset, installed from outside, exclusive of nested stages, changing nothing."""
import random

import numpy as np
import pytest
import yaml

from utils.data import LoadImagesAndLabels, StageTimer
from utils.general import ROOT


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_nested_stages_count_only_their_own_time():
    clock = FakeClock()
    timer = StageTimer(clock=clock)

    def decode():
        clock.t += 3.0

    def mosaic():
        clock.t += 1.0
        timed_decode()
        timed_decode()
        clock.t += 0.5

    timed_decode = timer.timed("read/decode", decode)
    timer.timed("mosaic", mosaic)()
    assert timer.t == {"read/decode": 6.0, "mosaic": 1.5}
    with pytest.raises(ZeroDivisionError):  # an exception still closes the stage
        timer.timed("hsv", lambda: 1 / 0)()
    timer.timed("mosaic", mosaic)()
    assert timer.t["mosaic"] == 3.0 and timer.t["read/decode"] == 12.0


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    root = tmp_path_factory.mktemp("small")
    gen.make_shapes(root, n_train=8, n_val=2, size=96, seed=1)
    return root / "images" / "train"


def _hyp(**kw):
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        h = yaml.safe_load(f)
    h.update(kw)
    return h


@pytest.mark.parametrize("hyp_extra", [{}, {"perspective": 0.0005}, {"mosaic": 0.0}])
def test_installed_timer_sees_the_stages_and_changes_no_item(small_set, hyp_extra):
    kw = dict(img_size=64, batch_size=4, augment=True, hyp=_hyp(**hyp_extra))
    plain = LoadImagesAndLabels(str(small_set), **kw)
    timer = StageTimer()
    timed = timer.install(LoadImagesAndLabels(str(small_set), **kw))
    for i in range(len(plain)):
        out = []
        for ds in (plain, timed):
            random.seed(i)
            np.random.seed(i)
            out.append(ds[i])
        np.testing.assert_array_equal(out[0][0], out[1][0])
        np.testing.assert_array_equal(out[0][1], out[1][1])
    stages = {"read/decode", "hsv", "flip/format"} | (
        {"letterbox/perspective"} if hyp_extra.get("mosaic") == 0.0 else {"mosaic", "perspective"})
    assert stages <= set(timer.t) <= set(LoadImagesAndLabels.STAGES.values())
    assert all(v > 0 for v in timer.t.values()), timer.t
    assert "load_mosaic" not in vars(plain)  # installed on that one instance only


@pytest.mark.parametrize("classic", [False, True])
def test_loader_benchmark_stage_table(small_set, classic):
    """benchmarks/loader.py's per-stage measurement, both loaders, at a toy size."""
    from benchmarks.loader import parse_opt, stages
    opt = parse_opt(["--data", str(small_set), "--img", "64", "--batch-size", "4", "--images", "8"]
                    + (["--classic"] if classic else []))
    per, total = stages(str(small_set), opt, _hyp())
    assert {"read/decode", "mosaic", "perspective", "hsv", "flip/format", "collate"} <= set(per)
    assert all(v >= 0 for v in per.values()) and 0 < sum(per.values()) <= total * 1.01
