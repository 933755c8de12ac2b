"""Choosing the backend once per process: the rule (utils/backend_choice.py, which imports no framework) gives an
order to try, and the first per-backend module that imports wins. Only utils/backend/__init__.py calls this."""
import importlib

from utils.backend.common import installed
from utils.backend_choice import BACKEND_NAMES, BackendError, choose_backend, gpu_seen_here
from utils.settings import BACKEND


def select_backend():
    """(name, its per-backend module, why) for this process: YOLO_BACKEND=oneflow|torch, or unset: the backend
    follows the device. A preferred framework that fails to import makes way for the other, and the reason says so."""
    requested = BACKEND.get()
    gpu, gpu_why = gpu_seen_here() if not requested.strip() else (None, "")
    order, why = choose_backend(requested, gpu, gpu_why, {k: installed(k) for k in BACKEND_NAMES})
    errors = []
    for name in order:
        try:
            module = importlib.import_module(f"utils.backend.{name}_backend")
        except BackendError as e:
            if len(order) == 1:
                raise
            errors.append(f"  {BACKEND_NAMES[name]}: {e}")
            continue
        if errors:  # the preferred one failed to import: say so in the notice
            why = f"{why}; {BACKEND_NAMES[order[0]]} failed to import"
        return name, module, why
    raise BackendError("No backend imports.\n" + "\n".join(errors))
