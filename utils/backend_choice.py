"""Which backend to use, decided without importing one: a CUDA GPU means OneFlow, a CPU-only machine PyTorch.

The rule only: utils/backend/selection.py owns the choice (it reads YOLO_BACKEND and calls choose_backend). Kept apart
from utils/backend/ (which imports the chosen framework at import time) so that the rule can be read, tested and
asked from a shell before any framework is installed:

    python3 utils/backend_choice.py      # prints 'oneflow' or 'torch' for this machine (the Makefile's default)
"""
import functools
import glob
import os
import shutil


class BackendError(ImportError):
    """Raised with a message that says what to install or set."""


ALIASES = {"oneflow": "oneflow", "flow": "oneflow", "of": "oneflow", "torch": "torch", "pytorch": "torch",
            "pt": "torch"}
BACKEND_NAMES = {"oneflow": "OneFlow", "torch": "PyTorch"}


def gpu_seen(env=None, exists=os.path.exists, listdir=glob.glob, which=shutil.which):
    """(seen, why): whether this process can see a CUDA GPU, decided without importing a framework (a framework's
    own check would import it, and importing OneFlow alone takes seconds). The arguments exist for tests.

    CUDA_VISIBLE_DEVICES set to '' or -1 hides every GPU; otherwise an NVIDIA device node (/dev/nvidia0, ...) means a
    GPU, as does WSL's /dev/dxg with an nvidia-smi beside it. A driver that the framework then cannot use still
    counts as a GPU here; the framework's own device check decides later where tensors go."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return False, f"CUDA_VISIBLE_DEVICES={visible.strip()!r} hides the GPUs"
    nodes = sorted(p for p in listdir("/dev/nvidia*") if p[len("/dev/nvidia"):].isdigit())
    if nodes:
        return True, f"CUDA GPU seen ({nodes[0]})"
    if exists("/dev/dxg") and (which("nvidia-smi") or exists("/usr/lib/wsl/lib/nvidia-smi")):
        return True, "CUDA GPU seen (WSL /dev/dxg)"
    return False, "no CUDA GPU seen"


@functools.lru_cache(maxsize=1)
def gpu_seen_here():
    """gpu_seen() for this process, looked at once: the backend's selection, PyTorch's OpenMP default and the host
    allocator all ask at start-up, and the answer does not change while the process runs."""
    return gpu_seen()


def choose_backend(requested, gpu, gpu_why, installed):
    """The backends to try, in order, and why: a pure function of what is asked and what is seen.

    requested: YOLO_BACKEND's value ('' when unset); gpu, gpu_why: gpu_seen()'s answer; installed: {'oneflow': bool,
    'torch': bool} (found on the path, not yet imported). An explicit request is tried alone. Unset: OneFlow when a
    GPU is seen (the design's backend for CUDA, with its fused kernels), PyTorch otherwise (multi-threaded CPU
    kernels); the other one follows as the fallback."""
    requested = (requested or "").strip().lower()
    if requested:
        if requested not in ALIASES:
            raise BackendError(f"YOLO_BACKEND={requested!r} is not a backend: use 'oneflow' or 'torch'.")
        name = ALIASES[requested]
        return [name], f"YOLO_BACKEND={requested}"
    preferred = "oneflow" if gpu else "torch"
    other = "torch" if gpu else "oneflow"
    why = f"{gpu_why}: {BACKEND_NAMES[preferred]} is the backend for {'CUDA' if gpu else 'CPU'} machines"
    if installed.get(preferred, True) or not installed.get(other, False):
        return [preferred, other], why
    return [other, preferred], f"{gpu_why}, but {BACKEND_NAMES[preferred]} is not installed"


if __name__ == "__main__":
    seen, why = gpu_seen()
    print(choose_backend("", seen, why, {"oneflow": True, "torch": True})[0][0])
