"""Training learns: a smaller version of the README's main command (data/shapes.yaml, yolov5n from scratch) on a
reduced shapes set at a small image size must bring the training losses down and lift mAP50 above chance.
The full command (300 images, --img 256) is measured by hand; see the training notes in the README."""
import importlib.util

import pytest

from tests.helpers.train_helpers import ROOT, run_train

EPOCHS = 25


def _make_shapes(out, **kw):
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.make_shapes(out, **kw)


@pytest.fixture(scope="module")
def small_shapes(tmp_path_factory):
    if not (ROOT / "data" / "scripts" / "make_shapes.py").is_file():
        pytest.skip("data/scripts/make_shapes.py not present")
    root = tmp_path_factory.mktemp("shapes")
    _make_shapes(root, n_train=128, n_val=32, size=128, seed=0)
    names = "\n".join(f"  {i}: c{i}" for i in range(6))
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n{names}\n")
    return root / "data.yaml"


@pytest.mark.slow
def test_shapes_small_learns(small_shapes, tmp_path):
    from utils.loggers import read_results_csv
    # 128 images at 128 px, batch 16 (accumulate 4, as in the full run): 200 iterations, twice the official
    # 100-iteration warmup; --noval validates only the final epoch (an untrained model's thousands of candidate boxes
    # make early validation the slow part). A 96 px / batch 8 version (accumulate 8) did not learn in 240 iterations.
    r = run_train(["--data", small_shapes, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "128",
                   "--batch-size", "16", "--epochs", EPOCHS, "--workers", "2", "--device", "cpu", "--noplots",
                   "--noval", "--project", tmp_path, "--name", "exp"], timeout=3000)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = read_results_csv(tmp_path / "exp" / "results.csv")
    assert len(rows) == EPOCHS
    box = [r["train/box_loss"] for r in rows]
    # Calibration (torch, this exact command): box loss 0.1225 -> 0.1028 (mean of the first 3 epochs 0.1195, of the
    # last 3 0.1026), cls loss 0.0558 -> 0.0520, final mAP50 0.0087 against about 0.001 for an untrained model. The
    # full README command reaches mAP50 0.5 after 16 epochs; this small version only checks the direction.
    assert sum(box[-3:]) < 0.9 * sum(box[:3]), box
    assert rows[-1]["train/cls_loss"] < rows[0]["train/cls_loss"]
    assert rows[-1]["metrics/mAP_0.5"] > 0.004, rows[-1]
