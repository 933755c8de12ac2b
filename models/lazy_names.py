"""Official import paths under models/ for classes that live higher up, in utils/inference/.

Official code imports the inference wrappers from models (``from models.common import DetectMultiBackend,
AutoShape``), but they build on the network, so a module under models/ may not import them: that import would run
back up a floor and load the whole inference stack with the network. A facade module instead hands each name out on
first access, through a module ``__getattr__`` that this function makes from a table of name -> defining module.
"""
import importlib


def forward_on_access(facade, homes):
    """A module __getattr__ for `facade` that imports homes[name] when name is first asked for."""

    def __getattr__(name):
        if name in homes:
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {facade!r} has no attribute {name!r}")

    return __getattr__
