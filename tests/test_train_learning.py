"""Training learns: a smaller version of the README's main command (data/shapes.yaml, yolov5n from scratch) on a
reduced shapes set at a small image size must raise mAP50 well above chance and bring the training loss down.
The full command (300 images, --img 256) is measured by hand; see the training notes in the README."""
import importlib.util

import pytest

from tests.train_helpers import ROOT, run_train

EPOCHS = 20


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
    _make_shapes(root, n_train=96, n_val=24, size=96, seed=0)
    names = "\n".join(f"  {i}: c{i}" for i in range(6))
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n{names}\n")
    return root / "data.yaml"


def test_shapes_small_learns(small_shapes, tmp_path):
    from utils.loggers import read_results_csv
    # 96 images at 96 px, batch 8: 240 iterations, past the official 100-iteration warmup; --noval validates only
    # the final epoch (an untrained model's thousands of candidate boxes make early validation the slow part).
    r = run_train(["--data", small_shapes, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "96",
                   "--batch-size", "8", "--epochs", EPOCHS, "--workers", "2", "--device", "cpu", "--noplots",
                   "--noval", "--project", tmp_path, "--name", "exp"], timeout=3000)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = read_results_csv(tmp_path / "exp" / "results.csv")
    assert len(rows) == EPOCHS
    first, last = rows[0], rows[-1]
    assert last["train/box_loss"] < 0.9 * first["train/box_loss"], [r["train/box_loss"] for r in rows]
    assert last["metrics/mAP_0.5"] > 0.05, last  # chance level on this set is below 0.005
