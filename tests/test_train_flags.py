"""train.py flags and outputs on a tiny synthetic set (64 px, a few images): each run combines several flags and
checks what they must change. Faults (non-finite loss, Ctrl-C, full disk, unwritable folder) run in-process."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.train_helpers import make_tiny_dataset, run_train
from utils import backend


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=96)


def _base(data, project, epochs=2, batch=4):
    return ["--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch-size", batch,
            "--epochs", epochs, "--device", "cpu", "--project", project, "--name", "exp"]


def _ok(r):
    assert r.returncode == 0, (r.stdout[-2000:] + r.stderr[-4000:])
    return r


def _load(path):
    from utils.checkpoint import load_checkpoint
    return load_checkpoint(path, tensors=False, build_models=False)


def _rows(csv):
    from utils.loggers import read_results_csv
    return read_results_csv(csv)


def test_flag_set_one(data, tmp_path):
    """--cos-lr --label-smoothing --optimizer AdamW --freeze --save-period --single-cls --multi-scale
    --image-weights --cache ram --noautoanchor --seed --bbox_iou_optim --multi_tensor_optimizer --workers 0."""
    _ok(run_train(_base(data, tmp_path) + [
        "--cos-lr", "--label-smoothing", "0.1", "--optimizer", "AdamW", "--freeze", "3", "--save-period", "1",
        "--single-cls", "--multi-scale", "--image-weights", "--cache", "ram", "--noautoanchor", "--seed", "5",
        "--bbox_iou_optim", "--multi_tensor_optimizer", "--workers", "0", "--noplots"]))
    d = tmp_path / "exp"
    opt = yaml.safe_load((d / "opt.yaml").read_text())
    assert opt["bbox_iou_optim"] is True and opt["multi_tensor_optimizer"] is True
    assert opt["optimizer"] == "AdamW" and opt["cos_lr"] is True and opt["freeze"] == [3] and opt["seed"] == 5
    assert (d / "weights" / "epoch0.pt").is_file() and (d / "weights" / "epoch1.pt").is_file()
    e0, last = _load(d / "weights" / "epoch0.pt"), _load(d / "weights" / "last.pt")
    assert e0["nc"] == 1 and e0["model"]["yaml"]["nc"] == 1 and e0["hyp"]["label_smoothing"] == 0.1
    assert e0["optimizer"] is not None and len(e0["optimizer"]["param_groups"]) == 3
    sd0, sd1 = e0["ema"]["state_dict"], last["model"]["state_dict"]
    init = _load(d / "weights" / "epoch0.pt")["model"]["state_dict"]  # frozen layers never move from init
    for k in ("model.0.conv.weight", "model.2.cv1.conv.weight"):  # layers 0-2 frozen
        np.testing.assert_allclose(sd1[k].astype(np.float32), init[k], atol=1e-3, err_msg=k)
        np.testing.assert_allclose(sd0[k], init[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert not np.allclose(sd0["model.24.m.0.weight"], sd1["model.24.m.0.weight"].astype(np.float32), atol=0)
    assert not (d / "labels.jpg").exists()  # --noplots


def test_flag_set_two(data, tmp_path):
    """--rect --quad --nosave --noval --optimizer Adam --cache disk --hyp --exist-ok --patience."""
    hyp = Path(__file__).resolve().parents[1] / "data/hyps/hyp.scratch-high.yaml"
    args = _base(data, tmp_path, batch=8) + ["--rect", "--quad", "--nosave", "--noval", "--optimizer", "Adam",
                                             "--cache", "disk", "--hyp", hyp, "--patience", "5", "--workers", "0",
                                             "--noplots", "--exist-ok"]
    _ok(run_train(args))
    d = tmp_path / "exp"
    rows = _rows(d / "results.csv")
    assert rows[0]["val/box_loss"] == 0 and rows[0]["metrics/mAP_0.5"] == 0  # --noval: no validation at epoch 0
    assert rows[1]["val/box_loss"] > 0  # the final epoch is always validated
    assert not list((d / "weights").glob("epoch*.pt"))
    h = yaml.safe_load((d / "hyp.yaml").read_text())
    assert h["mixup"] == yaml.safe_load(hyp.read_text())["mixup"]
    assert yaml.safe_load((d / "opt.yaml").read_text())["rect"] is True
    _ok(run_train(args[:args.index("--epochs") + 1] + ["1"] + args[args.index("--epochs") + 2:]))
    assert not (tmp_path / "exp2").exists()  # --exist-ok reuses exp
    assert len(_rows(d / "results.csv")) == 1  # a new run, not appended


def test_evolve(data, tmp_path):
    _ok(run_train(_base(data, tmp_path, epochs=1) + ["--evolve", "2", "--noplots", "--workers", "0"]))
    d = tmp_path / "exp"
    lines = (d / "evolve.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].split(",")[0].strip() == "metrics/precision"
    assert "lr0" in yaml.safe_load((d / "hyp_evolve.yaml").read_text())


def test_pretrained_transfer(yolov5n_pt, data, tmp_path):
    """--weights yolov5n.pt --cfg yolov5n.yaml with 2 classes: every tensor but the class-dependent Detect convs
    and the anchors (the yaml's are kept) comes from the checkpoint."""
    import argparse
    from utils.checkpoint import load_any
    from utils.trainer import Trainer
    opt = argparse.Namespace(weights=str(yolov5n_pt), cfg="yolov5n.yaml", resume=False, freeze=[0], imgsz=64, epochs=1,
                             data=str(data), single_cls=False)
    t = Trainer({"lr0": 0.01}, opt, backend.device("cpu"))
    t.setup_data()
    t.setup_model()
    ck = load_any(yolov5n_pt)["model"]["state_dict"]
    sd = {k: backend.to_numpy(v) for k, v in t.model.state_dict().items()}
    np.testing.assert_allclose(sd["model.0.conv.weight"], ck["model.0.conv.weight"].astype(np.float32))
    np.testing.assert_allclose(sd["model.23.cv3.bn.running_var"], ck["model.23.cv3.bn.running_var"].astype(np.float32))
    assert sd["model.24.m.0.weight"].shape[0] == 3 * 7 != ck["model.24.m.0.weight"].shape[0]


def test_sync_bn_refused_on_cpu_under_ddp():
    """--sync-bn: SyncBatchNorm is CUDA only; on CPU under a launcher it is refused before any work starts."""
    import argparse
    import train
    from utils.trainer import TrainingError
    opt = argparse.Namespace(device="cpu", batch_size=4, sync_bn=True, evolve=None)
    with pytest.raises(TrainingError, match="sync-bn"):
        train.select_training_device(opt, world_size=2, local_rank=0)


def test_unwritable_run_folder(data, tmp_path):
    import train
    from utils.trainer import TrainingError
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(TrainingError, match="not writable"):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, epochs=1, device="cpu",
                  project=str(blocker), noplots=True)
    r = run_train(_base(data, blocker, epochs=1))
    assert r.returncode == 1 and "not writable" in r.stderr and "Traceback" not in r.stderr
