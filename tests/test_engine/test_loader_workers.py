"""A training run's loader workers end when the run does, not when a garbage collection happens to reach the loaders.

Left to the collector, the DataLoader ended its persistent workers at whatever the process was doing next; in an
--evolve search that was in the middle of an import, where no worker stopped when told to and each join waited out its
5 s (40 s after two generations). The run closes its loaders itself (utils/engine/run.py)."""
import multiprocessing
import time

import pytest

from tests.helpers.train_helpers import make_tiny_dataset

pytestmark = pytest.mark.slow  # a whole (tiny) training run in this process


def test_no_loader_worker_outlives_the_run(tmp_path):
    import train
    data = make_tiny_dataset(tmp_path / "data", n_train=8, n_val=4, size=96)
    before = set(multiprocessing.active_children())
    train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=4, epochs=1, workers=2,
              device="cpu", project=str(tmp_path / "runs"), noplots=True)
    left = [p for p in multiprocessing.active_children() if p not in before]
    assert not left, f"worker processes still running after train.run returned: {left}"


def test_closing_a_loader_ends_its_workers_at_once_and_it_iterates_again(tmp_path):
    """EarlyStartLoader.close(): a pass begun and not taken, then a persistent loader's workers between passes."""
    from utils.data import EarlyStartLoader
    from utils.data.loader import create_dataloader
    data = make_tiny_dataset(tmp_path / "data", n_train=8, n_val=4, size=96)
    images = data.parent / "images" / "train"
    before = set(multiprocessing.active_children())
    loader = EarlyStartLoader(create_dataloader(str(images), 64, 4, 32, workers=2)[0])  # OneFlow forks them here
    for finish_a_pass in (False, True):
        loader.start()
        if finish_a_pass:
            assert sum(len(batch[0]) for batch in loader) == 8
        assert [p for p in multiprocessing.active_children() if p not in before], "the pass started no workers"
        t0 = time.monotonic()
        loader.close()
        assert time.monotonic() - t0 < 4  # not a join that timed out
        assert not [p for p in multiprocessing.active_children() if p not in before]
    assert sum(len(batch[0]) for batch in loader) == 8  # new workers for the next pass
    loader.close()
