"""An outside observer of a DDP job's ranks, installed from the environment: YOLO_DDP_PROBE=<module> names an
importable module (e.g. through PYTHONPATH) whose ``attach(model, loader, ctx)`` is called on every rank once the
model is wrapped for DDP. The DDP tests use it (tests/helpers/ddp_probe.py) to record what each rank held and
iterated and to crash a rank on purpose; unset, nothing is imported or attached."""
import importlib

from utils.errors import UserError
from utils.settings import DDP_PROBE

ENV = DDP_PROBE.name


class ProbeError(UserError, RuntimeError):
    pass


def attach(model, loader, ctx):
    """Import the named probe and attach it; returns the probe module, or None when none is named."""
    name = DDP_PROBE.get()
    if not name:
        return None
    try:
        probe = importlib.import_module(name)
    except ImportError as e:
        raise ProbeError(f"{ENV}={name}: cannot import it ({e}); put its folder on PYTHONPATH or unset {ENV}.") from e
    if not callable(getattr(probe, "attach", None)):
        raise ProbeError(f"{ENV}={name}: the module has no attach(model, loader, ctx) function.")
    probe.attach(model, loader, ctx)
    return probe
