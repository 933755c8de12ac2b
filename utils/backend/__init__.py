"""The one package that imports a deep-learning framework, laid out as keras' backend is: the backend is chosen once,
here, and each per-backend module implements the same function set (utils/backend/api.py lists it):

    torch_backend.py    PyTorch (with torch_ciou.py and torch_ciou_triton.py, its fused CIoU)
    oneflow_backend.py  OneFlow 0.9.0 (with oneflow_ciou.py, its fused-kernel CIoU chain)
    shared.py           helpers whose code is the same on both (devices, RNG, attention fallback)
    common.py           helpers that need no framework at all

Every other module does ``from utils.backend import torch, nn, F`` and calls the names re-exported below; nothing
outside this package branches on the backend. Selection: ``YOLO_BACKEND=oneflow|torch``; unset means the backend
follows the device: OneFlow when a CUDA GPU is seen, PyTorch otherwise (OneFlow 0.9.0's CPU kernels run on one
thread, 5-10x slower than PyTorch's), each falling back to the other when it is not installed. A one-line notice on
stderr says which one is in use and why (``YOLO_QUIET=1`` silences it).
"""
import os
import sys

from utils.backend.api import FUNCTION_SET
from utils.backend.host_memory import keep_freed_memory
from utils.backend.selection import select_backend
from utils.backend_choice import gpu_seen_here
from utils.settings import announce_backend_once

BACKEND, impl, SELECTION_REASON = select_backend()
if not gpu_seen_here()[0]:  # CPU tensors are the activations: keep their pages between steps (host_memory.py)
    keep_freed_memory()
IS_ONEFLOW = BACKEND == "oneflow"  # for tests and tools; project code asks the function set instead
IS_TORCH = BACKEND == "torch"
# impl: the chosen per-backend module itself (tests patch its internals there)
globals().update({name: getattr(impl, name) for name in FUNCTION_SET})
torch = impl.torch
nn = torch.nn
F = torch.nn.functional
VERSION = torch.__version__

from utils.backend import shared  # noqa: E402  (written against torch/nn/F above)

globals().update({name: getattr(shared, name) for name in shared.__all__})
__all__ = ["torch", "nn", "F", "BACKEND", "IS_ONEFLOW", "IS_TORCH", "VERSION", "SELECTION_REASON", "impl",
           *FUNCTION_SET, *shared.__all__]

if announce_backend_once():  # once per process tree, unless YOLO_QUIET=1
    print(f"YOLOv5 backend: {BACKEND} {VERSION} ({SELECTION_REASON}; set YOLO_BACKEND=oneflow|torch to choose)",
          file=sys.stderr)
