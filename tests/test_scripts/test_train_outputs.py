"""A default train.py run writes every file of an ultralytics run folder."""
import numpy as np
import pytest
import yaml

from tests.helpers.train_helpers import make_tiny_dataset, run_train


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=96)


def _load(path):
    from utils.checkpoint import load_checkpoint
    return load_checkpoint(path, tensors=False, build_models=False)


def _rows(csv):
    from utils.loggers import read_results_csv
    return read_results_csv(csv)


def _base(data, project, epochs=2, batch=4):
    return ["--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch-size", batch,
            "--epochs", epochs, "--device", "cpu", "--project", project, "--name", "exp"]


def _ok(r):
    assert r.returncode == 0, (r.stdout[-2000:] + r.stderr[-4000:])
    return r


@pytest.mark.slow
def test_outputs_of_a_default_run(data, tmp_path):
    """Plots on, 2 workers: every file of an ultralytics run folder, stripped final checkpoints."""
    r = _ok(run_train(_base(data, tmp_path) + ["--workers", "2"]))
    d = tmp_path / "exp"
    for f in ("opt.yaml", "hyp.yaml", "results.csv", "results.png", "labels.jpg", "labels_correlogram.jpg",
              "train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg", "val_batch0_labels.jpg",
              "val_batch0_pred.jpg", "confusion_matrix.png", "weights/last.pt", "weights/best.pt"):
        # (PR/F1/P/R curves come from val.py only when there are true positives: not after 2 epochs at 64 px)
        assert (d / f).is_file(), f"{f} missing from the run folder"
    opt = yaml.safe_load((d / "opt.yaml").read_text())
    assert opt["bbox_iou_optim"] is False and opt["multi_tensor_optimizer"] is False and opt["epochs"] == 2
    assert len(_rows(d / "results.csv")) == 2
    for f in ("last.pt", "best.pt"):
        ck = _load(d / "weights" / f)
        assert ck["optimizer"] is None and ck["ema"] is None and ck["epoch"] == -1
        assert all(v.dtype != np.float32 for v in ck["model"]["state_dict"].values())  # fp16 weights
    assert "Instances" in r.stderr + r.stdout and "box_loss" in r.stderr + r.stdout
    assert not list((d / "weights").glob("*.tmp"))
    from models.experimental import attempt_load
    m = attempt_load(d / "weights" / "best.pt", device="cpu")
    assert m.names == {0: "rect", 1: "ellipse"} or list(m.names) == ["rect", "ellipse"]
