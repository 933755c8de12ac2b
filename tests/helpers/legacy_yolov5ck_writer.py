"""The writer of the project's earlier 'YOLOv5CK' checkpoint format, kept only so that tests can make such files
and prove that they still load (utils/checkpoint/legacy_yolov5ck.py reads them). The project writes PyTorch
archives now; nothing outside tests uses this."""
import argparse
import base64
import collections
import json
import os
import pathlib
import tempfile
import zlib
from datetime import datetime

import numpy as np

from utils.checkpoint import ModelRecord, model_record
from utils.checkpoint.legacy_yolov5ck import FORMAT_VERSION, HEAD, MAGIC, TRAIL, TRAILER_MAGIC

_ALIGN = 64


def _tensor_to_numpy(t, bk):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return t.cpu().numpy()


def _is_tensor(x, bk):
    return bk is not None and isinstance(x, bk.torch.Tensor)


def _is_module(x, bk):
    return bk is not None and isinstance(x, bk.nn.Module)


class _Encoder:
    """Object tree -> JSON-able tree + list of numpy arrays."""

    def __init__(self, bk):
        self.bk = bk
        self.arrays = []

    def array(self, a):
        a = np.asarray(a)
        self.arrays.append(a if a.flags.c_contiguous else np.ascontiguousarray(a))  # the latter makes 0-d 1-d
        return len(self.arrays) - 1

    def enc(self, x, where="obj"):
        bk = self.bk
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int) and not isinstance(x, bool):
            return x
        if isinstance(x, float):
            return x if np.isfinite(x) else {"__t__": "float", "v": repr(x)}
        if _is_tensor(x, bk):
            is_param = isinstance(x, bk.nn.Parameter)
            return {"__t__": "tensor", "i": self.array(_tensor_to_numpy(x, bk)), "rg": bool(x.requires_grad),
                    "param": bool(is_param)}
        if isinstance(x, np.ndarray):
            if x.dtype.hasobject:
                raise TypeError(f"{where}: numpy arrays of Python objects cannot be saved")
            return {"__t__": "nd", "i": self.array(x)}
        if isinstance(x, np.generic):
            return {"__t__": "npscalar", "dtype": x.dtype.str, "i": self.array(np.asarray(x))}
        if _is_module(x, bk):
            return {"__t__": "module", "v": self.enc(dict(model_record(x)), f"{where}<module>")}
        if isinstance(x, ModelRecord):
            return {"__t__": "module", "v": self.enc(dict(x), f"{where}<module>")}
        if isinstance(x, dict):
            tag = "odict" if isinstance(x, collections.OrderedDict) else "dict"
            return {"__t__": tag, "k": [self.enc(k, f"{where}.key") for k in x],
                    "v": [self.enc(v, f"{where}[{k!r}]") for k, v in x.items()]}
        if isinstance(x, list):
            return [self.enc(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, tuple):
            return {"__t__": "tuple", "v": [self.enc(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, (set, frozenset)):
            return {"__t__": "set" if isinstance(x, set) else "frozenset", "v": [self.enc(v, where) for v in x]}
        if isinstance(x, bytes):
            return {"__t__": "bytes", "v": base64.b64encode(x).decode("ascii")}
        if isinstance(x, argparse.Namespace):
            return {"__t__": "namespace", "v": self.enc(vars(x), where)}
        if isinstance(x, pathlib.PurePath):
            return {"__t__": "path", "v": str(x)}
        if isinstance(x, complex):
            return {"__t__": "complex", "v": [x.real, x.imag]}
        if bk is not None and isinstance(x, bk.torch.dtype):
            return {"__t__": "dtype", "v": str(x).split(".")[-1]}
        if bk is not None and isinstance(x, bk.torch.device):
            return {"__t__": "device", "v": str(x)}
        hint = " (save its .state_dict())" if hasattr(x, "state_dict") else ""
        raise TypeError(f"{where}: cannot save a {type(x).__module__}.{type(x).__name__} in a checkpoint{hint}")


def save_yolov5ck(obj, path):
    """Write obj (nested dicts/lists/tuples of tensors, arrays, numbers, strings, Namespaces, modules...) to one
    file, atomically: a temporary file in the same folder is fsynced and then renamed over ``path``, so a crash
    mid-save never leaves a half-written checkpoint under the final name."""
    path = pathlib.Path(path)
    from utils import backend as bk
    enc = _Encoder(bk)
    tree = enc.enc(obj)
    index, offset = [], 0
    for a in enc.arrays:
        offset = -(-offset // _ALIGN) * _ALIGN
        index.append({"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes})
        offset += a.nbytes
    header = json.dumps({
        "format": "yolov5-checkpoint", "version": FORMAT_VERSION, "tree": tree, "arrays": index,
        "producer": {"backend": getattr(bk, "BACKEND", None), "framework": getattr(bk, "VERSION", None),
                     "numpy": np.__version__},
        "saved": datetime.now().isoformat(timespec="seconds")}, allow_nan=False).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            crc = 0
            written = 0

            def write(b):
                nonlocal crc, written
                f.write(b)
                crc = zlib.crc32(b, crc)
                written += len(b)

            write(HEAD.pack(MAGIC, FORMAT_VERSION, len(header)))
            write(header)
            data_start = written
            for a, meta in zip(enc.arrays, index):
                pad = data_start + meta["offset"] - written
                if pad:
                    write(b"\0" * pad)
                write(memoryview(a).cast("B") if a.nbytes else b"")
            f.write(TRAIL.pack(TRAILER_MAGIC, written, crc & 0xFFFFFFFF))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
