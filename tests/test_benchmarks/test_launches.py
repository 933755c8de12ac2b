"""benchmarks/launches.py: the dispatch counter finds launches and host syncs where they are, and this project's
training step has no host sync (fixed-shape loss) and multi-tensor clip/optimizer/EMA. A PyTorch tool: skipped
under OneFlow."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.backend import IS_TORCH, torch

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="dispatch counting is a PyTorch feature")
ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))


def test_counter_finds_syncs_launches_and_views():
    from benchmarks.dispatch_count import DispatchCounter
    x = torch.arange(12, dtype=torch.float32).view(3, 4)
    with DispatchCounter() as c:
        with c.stage("a"):
            y = x.t().reshape(12)  # a transpose is a view; flattening it copies (one launch)
            z = y[y > 5]  # the comparison (one launch) and a boolean-mask index (a sync and a launch)
            float(z.sum())  # sum (one launch) and a scalar read (a sync, no launch)
            z.cpu().tolist()  # one copy to the host (tolist of a host copy is free)
            torch.tensor([1.0, 2.0])  # host data
        with c.stage("b"):
            w = torch.zeros(8, requires_grad=True)
            torch.nn.functional.silu(w * 1, inplace=True).sum().backward()  # autograd clones in-place inputs
    s = c.summary(["a", "b"])
    a = s["stages"]["a"]
    assert a["sync_kinds"] == {"boolean-mask indexing": 1, "scalar read (.item/float/bool)": 1,
                               "copy to host (.cpu/.tolist)": 1}
    assert a["host_data"] == 1
    assert a["ops"].get("clone", 0) + a["ops"].get("_unsafe_view", 0) >= 1 and "gt" in a["ops"]
    assert "t" not in a["ops"] and "transpose" not in a["ops"]
    assert s["stages"]["b"]["ops"].get("clone") == 1 and s["stages"]["b"]["syncs"] == 0
    assert torch.Tensor.cpu.__name__ == "cpu"  # the host-copy patches are undone


def test_project_step_counts(tmp_path):
    """yolov5n at 64 px, batch 2: the flags-on step (CUDA branches: Triton CIoU, fused SGD, foreach EMA) has no host
    sync and no tensor made from host data, a forward without in-place activation clones, and far fewer launches
    than the plain step."""
    out = tmp_path / "l.json"
    env = {**os.environ, "YOLO_QUIET": "1", "YOLO_BACKEND": "torch", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launches.py"), "--cfg", "yolov5n.yaml",
                        "--batch", "2", "--img", "64", "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "official code: skipped (no --ref)" in p.stdout
    r = json.loads(out.read_text())
    flags, plain = r["project"], r["project_plain"]
    assert r["project_sync_points"] == 0 and flags["host_data"] == 0 and plain["syncs"] == 0
    assert r["project_launches"] == flags["launches"] and r["project_plain_launches"] == plain["launches"]
    st = flags["stages"]
    assert st["ema"]["launches"] == 2  # foreach mul_ + add_
    assert st["optimizer"]["ops"].get("_fused_sgd_") == 3  # one fused kernel per parameter group
    assert st["optimizer"]["ops"].get("_foreach_norm") == 1 and st["optimizer"]["launches"] <= 20
    assert st["loss"]["ops"].get("triton:_ciou_fwd") == 1
    assert st["forward"]["ops"].get("clone", 0) == 3  # Detect's 3 contiguous() copies only
    assert flags["launches"] < 0.5 * plain["launches"]
    assert "project flags" in p.stdout and "host syncs" in p.stdout


@pytest.mark.slow
@pytest.mark.skipif(not (REF / "models" / "yolo.py").is_file(), reason=f"no official checkout at {REF}")
def test_official_step_has_the_boolean_mask_syncs(tmp_path):
    """The same counter on the official code (its own Python) finds the 9 boolean-mask syncs of its target building
    (3 per level) and the per-tensor EMA (3 ops per floating tensor)."""
    ref_python = REF.parent / "venv" / "bin" / "python"
    if not ref_python.exists():
        pytest.skip(f"no {ref_python}")
    out = tmp_path / "o.json"
    p = subprocess.run([str(ref_python), str(ROOT / "benchmarks" / "official_step.py"), "--ref", str(REF), "--json",
                        str(out), "--cfg", "yolov5n.yaml", "--batch", "2", "--img", "64"], capture_output=True,
                       text=True, timeout=900, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["stages"]["loss"]["sync_kinds"] == {"boolean-mask indexing": 9} and r["syncs"] == 9
    assert r["stages"]["ema"]["launches"] % 3 == 0 and r["stages"]["ema"]["launches"] > 500
