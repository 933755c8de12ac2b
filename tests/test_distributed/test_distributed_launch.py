"""utils/distributed/launch.py: what a launch cannot honour is refused in one line before any work (--sync-bn on
CPU under DDP, bad batch sizes, AutoBatch/--evolve/--image-weights under DDP, several GPUs without a launcher), and
each DDP rank gets its GPU by the framework's rule."""
import pytest

from utils.backend import torch
from utils.distributed import DistContext
from utils.distributed.launch import (LaunchError, LaunchOptions, check_single_process, device_ids, rank_gpu,
                                      sync_bn_error, training_device)
from utils.errors import UserError

SINGLE, PAIR = DistContext(), DistContext(rank=0, local_rank=0, world_size=2)
CPU = torch.device("cpu")


def _opt(**kw):
    """The launch options of a run's flags (evolve as the parser gives it: None or a generation count)."""
    return LaunchOptions.of({"device": "cpu", "batch_size": 4, "sync_bn": False, "evolve": None,
                             "image_weights": False, **kw})


def test_sync_bn_refused_on_cpu_under_ddp():
    """SyncBatchNorm is CUDA only; on CPU under a launcher it is refused before any work starts."""
    opt = LaunchOptions.of({"device": "cpu", "batch_size": 4, "sync_bn": True})  # a script without the other flags
    with pytest.raises(LaunchError, match="--sync-bn") as e:
        training_device(opt, PAIR)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)
    assert sync_bn_error(True, PAIR, CPU)
    assert sync_bn_error(True, SINGLE, CPU) is None  # single process: ignored with a warning
    assert sync_bn_error(False, PAIR, CPU) is None


def test_sync_bn_in_a_single_process_is_ignored_with_a_warning(caplog):
    from utils.general import LOGGER
    LOGGER.addHandler(caplog.handler)  # the project logger does not propagate to caplog's root handler
    try:
        assert training_device(_opt(sync_bn=True), SINGLE).type == "cpu"
    finally:
        LOGGER.removeHandler(caplog.handler)
    assert sum("--sync-bn only applies to DDP" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("batch,world,match", [(-1, 2, "AutoBatch"), (0, 1, "positive number"),
                                               (-3, 1, "positive number"), (6, 4, "multiple of WORLD_SIZE 4")])
def test_bad_batch_sizes_refused(batch, world, match):
    ctx = DistContext(rank=0, local_rank=0, world_size=world) if world > 1 else SINGLE
    with pytest.raises(LaunchError, match=match):
        training_device(_opt(batch_size=batch), ctx)


@pytest.mark.parametrize("flag,value", [("evolve", 300), ("image_weights", True)])
def test_single_process_flags_refused_under_ddp(flag, value):
    with pytest.raises(LaunchError, match=f"--{flag.replace('_', '-')} is not compatible with DDP"):
        training_device(_opt(**{flag: value}), PAIR)
    assert training_device(_opt(**{flag: value}), SINGLE).type == "cpu"  # fine in one process


def test_batch_size_is_the_total_over_ranks():
    assert training_device(_opt(batch_size=8), DistContext(rank=1, local_rank=1, world_size=4)).type == "cpu"


def test_several_gpus_without_a_launcher_point_to_ddp():
    with pytest.raises(LaunchError, match="names 2 GPUs but this is a single process") as e:
        check_single_process(_opt(device="0,1"), SINGLE, CPU)
    assert "torch.distributed.run --nproc_per_node 2" in str(e.value)
    assert "oneflow.distributed.launch --nproc_per_node 2" in str(e.value)
    check_single_process(_opt(device="0,1"), PAIR, CPU)  # under a launcher each rank takes one of them


def test_device_ids():
    assert device_ids("0,1") == [0, 1] and device_ids("cuda:2") == [2] and device_ids("cpu") == device_ids("") == []


def test_rank_gpu_rule():
    # PyTorch: rank i takes the i-th GPU that --device names, or cuda:<local rank> when it names none
    assert [rank_gpu("2,3", r, follows_local_rank=False) for r in (0, 1)] == [2, 3]
    assert [rank_gpu("", r, follows_local_rank=False) for r in (0, 1)] == [0, 1]
    with pytest.raises(LaunchError, match="names 2 GPUs but LOCAL_RANK is 2"):
        rank_gpu("0,1", 2, follows_local_rank=False)
    # OneFlow: its collectives need rank i on cuda:i; other ids are refused with the way to get the same GPUs
    assert [rank_gpu("0,1", r, follows_local_rank=True) for r in (0, 1)] == [0, 1]
    with pytest.raises(LaunchError, match="CUDA_VISIBLE_DEVICES=2,3 with --device 0,1"):
        rank_gpu("2,3", 1, follows_local_rank=True)


def test_missing_gpu_is_one_line():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    with pytest.raises(LaunchError, match="--device 0 asks for CUDA") as e:
        training_device(_opt(device="0"), SINGLE)
    assert "\n" not in str(e.value)
