"""The loader for every export format moved to utils/inference/format_loader.py; this path is kept for code that
imports it from here (models/lazy_names.py says why the names are handed out on access)."""
from models.lazy_names import forward_on_access

_HOME = "utils.inference.format_loader"
__getattr__ = forward_on_access(__name__, {"DetectMultiBackend": _HOME, "ModelLoadError": _HOME})
