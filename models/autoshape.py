"""AutoShape and Detections moved to utils/inference/autoshape.py; this path is kept for code that imports them from
here (models/lazy_names.py says why the names are handed out on access)."""
from models.lazy_names import forward_on_access

_HOME = "utils.inference.autoshape"
__getattr__ = forward_on_access(__name__, {"AutoShape": _HOME, "Detections": _HOME, "ImageInputError": _HOME})
