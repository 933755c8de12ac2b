"""Shared fixtures. The suite runs once per backend (YOLO_BACKEND=torch in .venv-torch, YOLO_BACKEND=oneflow in
.venv-oneflow); cross-backend tests run a snippet under the other one through `other_python`."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_QUIET", "1")
# Without an NVIDIA GPU, Triton kernels (utils/backend/torch_ciou_triton.py) run in Triton's interpreter so that their
# maths is still tested; it must be set before triton is first imported.
if not (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
    os.environ.setdefault("TRITON_INTERPRET", "1")

SHARED = Path(os.environ.get("YOLO_SHARED_DIR", ROOT.parent / "shared"))


def _run_folders():
    """The run folders under the project's own runs/ (runs/<project>/<name>, as the scripts' defaults make them)."""
    def names(d):
        try:
            return [e.name for e in os.scandir(d) if e.is_dir()]
        except OSError:  # absent, or removed meanwhile by a run of the user's own
            return []
    runs = ROOT / "runs"
    return {f"{p}/{q}" for p in names(runs) for q in names(runs / p)} | set(names(runs))


@pytest.fixture(autouse=True)
def _nothing_written_to_the_projects_runs():
    """A test's outputs go to its tmp_path: a run folder left in the project's runs/ is written into the user's
    checkout, and it also broke a concurrent test that checks nothing new appears in the project (make test runs the
    two backends' suites side by side in one checkout). Fails the test that made it, naming the folder."""
    before = _run_folders()
    yield
    added = sorted(_run_folders() - before)
    assert not added, f"this test wrote into {ROOT / 'runs'}: {added}; pass project=tmp_path (or --project)"


@pytest.fixture(scope="session")
def root_dir():
    return ROOT


@pytest.fixture(scope="session")
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not found: the shared test data sits beside the project")
    return SHARED


@pytest.fixture(scope="session")
def coco128_dir(shared_dir):
    return shared_dir / "data" / "coco128"


@pytest.fixture(scope="session")
def yolov5n_pt(shared_dir):
    return shared_dir / "weights" / "yolov5n.pt"


@pytest.fixture(scope="session")
def ref_a(shared_dir):
    import numpy as np
    return dict(np.load(shared_dir / "reference" / "ref_A.npz"))


class OtherBackend:
    """Runs Python code under the backend this process is not using."""

    def __init__(self, backend, python):
        self.backend = backend
        self.python = str(python)
        self.env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
        self.env.pop("_YOLO_BACKEND_ANNOUNCED", None)

    def run(self, code, timeout=600, cwd=ROOT):
        """Run code with `python -c`; returns stdout, raises AssertionError with stderr when it fails."""
        p = subprocess.run([self.python, "-c", code], cwd=cwd, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        assert p.returncode == 0, f"{self.backend} snippet failed ({p.returncode}):\n{p.stderr[-4000:]}"
        return p.stdout


@pytest.fixture(scope="session")
def other_python():
    from utils.backend import BACKEND
    other = "torch" if BACKEND == "oneflow" else "oneflow"
    python = Path(os.environ.get(f"YOLO_{other.upper()}_PYTHON", ROOT / f".venv-{other}" / "bin" / "python"))
    if not python.exists():
        pytest.skip(f"no {other} environment at {python} ('make setup' builds it)")
    return OtherBackend(other, python)
