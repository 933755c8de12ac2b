"""The backend follows the device: unset YOLO_BACKEND means OneFlow with a CUDA GPU, PyTorch without; an explicit
choice is kept; a missing framework makes way for the other. The rule is a pure function of what is seen, so it
is tested here without a GPU."""
import os
import subprocess
import sys

import pytest

from utils.backend_choice import BackendError, choose_backend, gpu_seen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _seen(env=None, nodes=(), exists=(), which=None):
    return gpu_seen(env=env or {}, exists=lambda p: p in exists,
                    listdir=lambda pattern: [n for n in nodes if n.startswith(pattern.rstrip("*"))],
                    which=lambda name: which)


def test_gpu_seen_from_device_nodes_and_visibility():
    assert _seen(nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]) == (True, "CUDA GPU seen (/dev/nvidia0)")
    # control nodes alone (driver loaded, no GPU given to this container) are not a GPU
    assert _seen(nodes=["/dev/nvidiactl", "/dev/nvidia-uvm"])[0] is False
    assert _seen()[0] is False
    for hidden in ("", "-1", " "):
        seen, why = _seen(env={"CUDA_VISIBLE_DEVICES": hidden}, nodes=["/dev/nvidia0"])
        assert seen is False and "CUDA_VISIBLE_DEVICES" in why
    assert _seen(env={"CUDA_VISIBLE_DEVICES": "1"}, nodes=["/dev/nvidia0", "/dev/nvidia1"])[0] is True
    # WSL exposes the GPU as /dev/dxg; it counts only with NVIDIA's tools beside it
    assert _seen(exists=["/dev/dxg"], which="/usr/lib/wsl/lib/nvidia-smi")[0] is True
    assert _seen(exists=["/dev/dxg"])[0] is False


@pytest.mark.parametrize("gpu, installed, order, why", [
    (True, {"oneflow": True, "torch": True}, ["oneflow", "torch"], "OneFlow is the backend for CUDA machines"),
    (False, {"oneflow": True, "torch": True}, ["torch", "oneflow"], "PyTorch is the backend for CPU machines"),
    (False, {"oneflow": True, "torch": False}, ["oneflow", "torch"], "but PyTorch is not installed"),
    (True, {"oneflow": False, "torch": True}, ["torch", "oneflow"], "but OneFlow is not installed"),
    (True, {"oneflow": False, "torch": False}, ["oneflow", "torch"], "OneFlow is the backend for CUDA machines"),
])
def test_unset_backend_follows_the_device(gpu, installed, order, why):
    got, reason = choose_backend("", gpu, "seen-or-not", installed)
    assert got == order and why in reason and reason.startswith("seen-or-not")


def test_explicit_backend_is_kept_and_checked():
    both = {"oneflow": True, "torch": True}
    assert choose_backend("oneflow", False, "", both) == (["oneflow"], "YOLO_BACKEND=oneflow")
    assert choose_backend(" PyTorch ", True, "", {"oneflow": True, "torch": False})[0] == ["torch"]
    assert choose_backend("of", False, "", {})[0] == ["oneflow"]
    with pytest.raises(BackendError, match="'tensorflow' is not a backend"):
        choose_backend("tensorflow", False, "", {})


def test_unset_backend_in_this_environment_picks_and_says_why():
    """This interpreter with YOLO_BACKEND unset and the GPUs hidden: PyTorch where it is installed (the torch
    environment), else OneFlow (the OneFlow environment has no PyTorch); the notice gives the reason."""
    import importlib.util
    env = {k: v for k, v in os.environ.items() if k not in ("YOLO_BACKEND", "YOLO_QUIET", "_YOLO_BACKEND_ANNOUNCED")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", "from utils.backend import BACKEND; print(BACKEND)"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    has_torch = importlib.util.find_spec("torch") is not None
    assert p.stdout.strip() == ("torch" if has_torch else "oneflow")
    notice = [line for line in p.stderr.splitlines() if line.startswith("YOLOv5 backend:")]
    assert len(notice) == 1, p.stderr[-2000:]
    assert ("PyTorch is the backend for CPU machines" if has_torch else "PyTorch is not installed") in notice[0]
    assert "CUDA_VISIBLE_DEVICES=''" in notice[0]


@pytest.mark.parametrize("preset", [None, "ACTIVE"])
def test_openmp_waits_passively_without_a_gpu_unless_set(preset):
    """PyTorch on a CPU machine is imported with OMP_WAIT_POLICY=PASSIVE (spinning OpenMP threads starve the loader
    workers); a value the user set is kept. OneFlow's CPU runtime has no OpenMP, so it is left alone."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "_YOLO_BACKEND_ANNOUNCED")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT, YOLO_QUIET="1")
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    code = "import os; from utils.backend import BACKEND; print(BACKEND, os.environ.get('OMP_WAIT_POLICY'))"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    backend, policy = p.stdout.split()
    assert policy == (preset or ("PASSIVE" if backend == "torch" else "None"))


def test_makefile_default_is_this_machines_backend():
    """The Makefile asks utils/backend_choice.py (no framework import) for its BACKEND default."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, os.path.join(ROOT, "utils", "backend_choice.py")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "torch"
    with open(os.path.join(ROOT, "Makefile")) as f:
        assert "BACKEND ?= $(shell python3 utils/backend_choice.py" in f.read()
