"""Third-party clients load and run this project's checkpoints as they do the official ones: supervision (on the
Detections that hubconf's models return), the `yolov5` pip package and sahi (which loads YOLOv5 models through it).

None of them is installed by the project's environments (the yolov5 package and sahi pull torchvision and a second
torch build): each test skips when its package is absent. To run them, build a throwaway environment outside the
project (README, "Third-party clients"). The checkpoint under test is official yolov5n.pt rewritten by this project's
checkpoint writer (strip_optimizer, what a finished training run leaves)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "data" / "images" / "still_life.jpg"


@pytest.fixture(scope="module")
def project_pt(yolov5n_pt, tmp_path_factory):
    from models.from_record import build_model
    from utils.checkpoint.training import strip_optimizer
    f = tmp_path_factory.mktemp("clients") / "yolov5n_project.pt"
    strip_optimizer(yolov5n_pt, s=str(f), build_model=build_model)
    return f


def test_supervision_reads_hub_detections(project_pt):
    sv = pytest.importorskip("supervision")
    import hubconf
    model = hubconf.custom(path=str(project_pt), _verbose=False)
    results = model(str(IMAGE), size=320)
    det = sv.Detections.from_yolov5(results)
    pred = results.xyxy[0].cpu().numpy()
    assert len(det) == len(pred) > 0
    np.testing.assert_allclose(det.xyxy, pred[:, :4], rtol=1e-6)
    assert det.class_id.tolist() == pred[:, 5].astype(int).tolist()


# Run outside the repository, so `models` in the pickles resolves to the yolov5 package's own classes, as for any
# user of that package. torch >= 2.6 loads with weights_only=True by default, which refuses the pickled model
# objects of every YOLOv5 .pt, official ones included: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 is the documented way.
CLIENT = r'''
import json, sys
kind, weights, image = sys.argv[1:4]
if kind == "yolov5":
    import yolov5
    model = yolov5.load(weights, device="cpu")
    model.conf = 0.25
    rows = model(image, size=320).xyxy[0].cpu().numpy().tolist()
else:
    from sahi import AutoDetectionModel
    from sahi.predict import get_prediction
    model = AutoDetectionModel.from_pretrained(model_type="yolov5", model_path=weights, confidence_threshold=0.25,
                                               device="cpu", image_size=320)
    found = get_prediction(image, model).object_prediction_list
    rows = [[*map(float, p.bbox.to_xyxy()), float(p.score.value), int(p.category.id)] for p in found]
print("ROWS" + json.dumps(rows))
'''


def _client_rows(kind, weights, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    p = subprocess.run([sys.executable, "-c", CLIENT, kind, str(weights), str(IMAGE)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return np.array(json.loads(p.stdout.split("ROWS", 1)[1]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["yolov5", "sahi"])
def test_client_runs_the_project_checkpoint_as_the_official_one(kind, project_pt, yolov5n_pt, tmp_path):
    import importlib.util
    if importlib.util.find_spec(kind) is None:
        pytest.skip(f"the {kind} package is not installed in this environment")
    try:  # both run torchvision's compiled NMS: PyPI's torchvision wheels do not load their ops into a CPU torch
        import torch
        import torchvision
        torchvision.ops.nms(torch.zeros((1, 4)), torch.ones(1), 0.5)
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"{kind} needs torchvision's compiled ops, unusable here: {str(e).strip().splitlines()[-1]}")
    official = _client_rows(kind, yolov5n_pt, tmp_path)
    ours = _client_rows(kind, project_pt, tmp_path)
    assert len(official) > 0 and official.shape == ours.shape
    np.testing.assert_allclose(ours, official, atol=1e-3)  # the same fp16 weights: the same detections
