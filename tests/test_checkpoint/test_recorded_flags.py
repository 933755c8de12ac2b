"""The engine's door (utils/checkpoint/run_options.py): a run's flags frozen once into RecordedFlags, the typed records
below made from them (defaults where a script lacks a flag), and the saved options produced from the frozen flags."""
import argparse
import dataclasses
from pathlib import Path

import pytest

from utils.checkpoint.run_options import OFFICIAL_OPT_DEFAULTS, RecordedFlags, official_opt, typed_options
from utils.distributed.launch import LaunchOptions
from utils.loggers.options import LogOptions

pytestmark = pytest.mark.framework_free


def test_recorded_flags_are_frozen_and_a_copy():
    opt = argparse.Namespace(data="a.yaml", freeze=[0], epochs=3)
    flags = RecordedFlags.of(opt)
    opt.freeze.append(5)  # what the script does to its namespace afterwards does not reach the record
    opt.epochs = 9
    assert flags["freeze"] == [0] and flags["epochs"] == 3 and dict(flags) == {"data": "a.yaml", "freeze": [0],
                                                                                 "epochs": 3}
    with pytest.raises(AttributeError):
        flags.epochs = 4
    with pytest.raises(TypeError):
        flags["epochs"] = 4


def test_typed_records_take_defaults_for_flags_a_script_lacks():
    classify = {"device": "cpu", "batch_size": "8", "epochs": 2}  # no --sync-bn, --evolve, --image-weights
    assert LaunchOptions.of(classify) == LaunchOptions(device="cpu", batch_size=8)
    assert LaunchOptions.of({"evolve": 300, "image_weights": True}).evolve is True  # the parser's count -> bool
    log = LogOptions.of({"ndjson_file": True, "resume": "runs/train/exp/weights/last.pt", "project": "p"})
    assert (log.ndjson_file, log.resume, log.project, log.save_period, log.sync_bn) == (True, True, "p", -1, False)
    assert dict(log.flags)["project"] == "p"  # every flag, for the cloud loggers' run configuration
    with pytest.raises(dataclasses.FrozenInstanceError):
        log.resume = False


def test_a_field_reads_the_flag_its_metadata_names():
    @dataclasses.dataclass(frozen=True)
    class Fast:
        multi_tensor: bool = dataclasses.field(default=False, metadata={"flag": "multi_tensor_optimizer"})

    assert typed_options(Fast, {"multi_tensor_optimizer": 1}) == Fast(multi_tensor=True)
    assert typed_options(Fast, {"multi_tensor": True}) == Fast()  # the field's own name is not the flag


def test_saved_options_come_from_the_frozen_flags(tmp_path):
    opt = argparse.Namespace(data="", cfg="yolov5n.yaml", epochs=3, evolve_population=Path("data/hyps"),
                             allow_download_scripts=True, bbox_iou_optim=True, results=(0.1, 0.2))
    d = official_opt(RecordedFlags.of(opt), {"lr0": 0.01})
    assert list(d)[:len(OFFICIAL_OPT_DEFAULTS)] == list(OFFICIAL_OPT_DEFAULTS)
    assert d["evolve_population"] == "data/hyps" and d["epochs"] == 3 and d["bbox_iou_optim"] is True
    assert "allow_download_scripts" not in d and "results" not in d and d["hyp"] == {"lr0": 0.01}
