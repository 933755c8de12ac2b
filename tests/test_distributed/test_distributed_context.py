"""utils/distributed/context.py and the ultralytics-style loader facade: one convention for "single process" (rank 0
of 1, local rank 0, main), read once from a launcher's environment and never from OneFlow's leftovers."""
import importlib.util

import pytest

from utils.distributed import DistContext
from utils.general import ROOT


def test_single_process_after_the_framework_import():
    """Importing OneFlow 0.9.0 sets RANK=-1 and LOCAL_RANK=0 in the environment (which once made the train sampler
    yield 1 image per epoch); under both backends a process without a launcher is still rank 0 of 1."""
    import utils.backend  # noqa: F401
    ctx = DistContext.from_env()
    assert ctx == DistContext(rank=0, local_rank=0, world_size=1)
    assert ctx.is_main and not ctx.distributed


@pytest.mark.parametrize("env", [{}, {"RANK": "-1", "LOCAL_RANK": "0"}, {"WORLD_SIZE": "1", "RANK": "5"},
                                 {"WORLD_SIZE": "x", "RANK": "3"}, {"WORLD_SIZE": "0"}])
def test_no_launcher_is_a_single_process(env):
    assert DistContext.from_env(env) == DistContext()


def test_launcher_ranks():
    ctx = DistContext.from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert (ctx.rank, ctx.local_rank, ctx.world_size) == (3, 1, 4)
    assert ctx.distributed and not ctx.is_main
    assert DistContext.from_env({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}).is_main
    with pytest.raises(Exception):  # frozen: passed down, never changed on the way
        ctx.rank = 0


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    root = tmp_path_factory.mktemp("shapes")
    gen.make_shapes(root, n_train=8, n_val=2, size=64, seed=1)
    return str(root / "images" / "train")


def _positions(loader):
    return sorted(int(i) for i in loader.sampler)


def test_loader_facade_rank_minus_one_and_contexts(images, monkeypatch):
    """create_dataloader keeps ultralytics' rank argument (-1: no DDP; another rank: the launcher's job) and takes
    the job's DistContext directly; the shares of a 2-rank job are disjoint halves."""
    from utils.dataloaders import create_dataloader
    monkeypatch.setenv("RANK", "-1")  # what importing OneFlow leaves behind
    monkeypatch.setenv("LOCAL_RANK", "0")
    single = create_dataloader(images, 64, 2, 32, workers=0, rank=-1)[0]
    assert _positions(single) == list(range(8))
    shares = [_positions(create_dataloader(images, 64, 2, 32, workers=0, dist=DistContext(r, r, 2))[0])
              for r in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 4 and sorted(shares[0] + shares[1]) == list(range(8))
    monkeypatch.setenv("WORLD_SIZE", "2")  # under a launcher, rank != -1 reads the job from the environment
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert _positions(create_dataloader(images, 64, 2, 32, workers=0, rank=1)[0]) == shares[1]
    assert _positions(create_dataloader(images, 64, 2, 32, workers=0, rank=-1)[0]) == list(range(8))
