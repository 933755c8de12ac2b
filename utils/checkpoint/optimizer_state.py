"""Optimizer state across backends for checkpoints: the layouts and their translations live in
utils/optimizer_layout.py; which layout this process needs is the backend's answer (backend.optimizer_state_to_native).
"""
from utils import optimizer_layout
from utils.optimizer_layout import complete_torch_groups, to_oneflow_layout  # noqa: F401  (this package's names)


def to_torch_layout(state_dict):
    """OneFlow's layout -> PyTorch's, Adam's step counter as a tensor of the framework this process runs."""
    from utils.backend import torch  # framework choice: the package reads files without one; this step needs it
    return optimizer_layout.to_torch_layout(state_dict, torch.tensor)


def optimizer_state_for_backend(state_dict, backend=None):
    """Translate an SGD/Adam/AdamW state dict into the layout of ``backend`` ('torch' or 'oneflow'; None: the
    framework this process runs)."""
    if backend is None:
        from utils import backend as bk  # framework choice: translating to a named layout needs none
        return bk.optimizer_state_to_native(state_dict)
    return {"torch": to_torch_layout, "oneflow": to_oneflow_layout}[backend](state_dict)
