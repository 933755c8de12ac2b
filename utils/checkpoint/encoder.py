"""Checkpoint values -> pickle nodes in the forms torch.save and CPython write at protocol 2.

Framework tensors (OneFlow or PyTorch) become torch._utils._rebuild_tensor_v2 calls on persistent storages
('storage', torch.HalfStorage, key, 'cpu', numel) whose raw little-endian bytes go to <archive>/data/<key>;
parameters are wrapped in torch._utils._rebuild_parameter. Modules are laid out by module_layout. numpy arrays
and scalars are written as numpy pickles them (numpy.core.multiarray._reconstruct / scalar, a spelling both
numpy 1.x and 2.x load). Namespaces, paths, sets, OrderedDicts, bytes and complex numbers as CPython does.
Nothing here imports torch: under OneFlow the same code writes the same file.
"""
import argparse
import collections
import pathlib

import numpy as np

from utils.checkpoint.module_layout import encode_module
from utils.checkpoint.pickle_writer import Call, Global, NewObject, PersistentId, ordered_dict, pickle_bytes
from utils.checkpoint.records import CheckpointError, ModelRecord

# numpy dtype -> torch storage class (the dtypes torch.save writes as typed storages)
STORAGE_CLASS = {np.dtype(k): v for k, v in (
    ("float16", "HalfStorage"), ("float32", "FloatStorage"), ("float64", "DoubleStorage"), ("int64", "LongStorage"),
    ("int32", "IntStorage"), ("int16", "ShortStorage"), ("int8", "CharStorage"), ("uint8", "ByteStorage"),
    ("bool", "BoolStorage"))}
TORCH_DTYPE_NAMES = {"float16", "float32", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}
_NUMPY_MODULE = "numpy.core.multiarray"


class Half:
    """Marks a module to be written in fp16 (float parameters and buffers), as official checkpoints store model and
    ema, without a deepcopy(...).half() of the live model."""
    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module


def contiguous_strides(shape):
    """torch's strides of a contiguous tensor (sizes of 0 count as 1)."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


class ValueEncoder:
    """One checkpoint's encoder: ``encode(obj)`` returns the node tree; ``storages`` the (key, bytes) to store."""

    def __init__(self, build_model=None):
        self.build_model = build_model  # record -> module, for ModelRecords in the value (the caller's model code)
        self.storages = []
        self._tensor_memo = {}
        self._module_memo = {}
        self._keep = []  # objects whose id() is a memo key stay alive until the file is written
        self._bk = _backend_or_none()

    # ------------------------------------------------------------------------------------------------ framework
    def is_tensor(self, x):
        return self._bk is not None and isinstance(x, self._bk.torch.Tensor)

    def is_module(self, x):
        return self._bk is not None and isinstance(x, self._bk.nn.Module)

    @staticmethod
    def numpy_dtype(t):
        name = str(getattr(t, "dtype", "float32")).split(".")[-1]
        return np.dtype("float32" if name == "bfloat16" else name)

    def _to_numpy(self, t):
        t = t.detach()
        if str(t.dtype).endswith("bfloat16"):
            t = t.float()  # numpy has no bfloat16; fp32 holds it exactly
        return np.asarray(t.cpu().numpy())

    def tensor(self, t, half=False, param=False):
        """Node of a framework tensor (memoised: a tensor met twice is one object in the file)."""
        key = (id(t), bool(half), bool(param))
        if key not in self._tensor_memo:
            a = self._to_numpy(t)
            if half and a.dtype.kind == "f":
                a = a.astype(np.float16)
            self._keep.append(t)
            node = self.array_tensor(a, bool(t.requires_grad) and not param)
            if param:
                node = Call(Global("torch._utils", "_rebuild_parameter"),
                            (node, bool(t.requires_grad), ordered_dict([])))
            self._tensor_memo[key] = node
        return self._tensor_memo[key]

    def array_tensor(self, a, requires_grad=False):
        """A numpy array written as a torch tensor on a storage of its own."""
        a = np.asarray(a)
        if a.dtype not in STORAGE_CLASS:
            raise TypeError(f"cannot write a tensor of dtype {a.dtype} (no torch storage type for it)")
        a = np.ascontiguousarray(a).reshape(a.shape)  # ascontiguousarray alone makes 0-d arrays 1-d
        key = str(len(self.storages))
        self.storages.append((key, a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()))
        pid = PersistentId(("storage", Global("torch", STORAGE_CLASS[a.dtype]), key, "cpu", int(a.size)))
        shape = tuple(int(s) for s in a.shape)
        return Call(Global("torch._utils", "_rebuild_tensor_v2"),
                    (pid, 0, shape, contiguous_strides(shape), bool(requires_grad), ordered_dict([])))

    def _build_from_record(self, rec):
        """A record read back from a file (numpy state dict + yaml) is written as the model it describes."""
        if not isinstance(rec.get("yaml"), dict):
            raise TypeError(f"cannot save a {rec.get('class')} record without a model yaml; save the module itself")
        if self.build_model is None:
            raise TypeError(f"cannot save a {rec.get('class')} record without a model builder: pass "
                            "build_model=models.from_record.build_model, or save the module itself")
        try:
            return self.build_model(rec, source="record")
        except CheckpointError as e:
            raise TypeError(str(e)) from e

    # ------------------------------------------------------------------------------------------------ values
    def encode(self, x):
        return self.value(x)

    def value(self, x, where="checkpoint"):
        if x is None or isinstance(x, (bool, str)):
            return bool(x) if isinstance(x, bool) else (str(x) if isinstance(x, str) else x)
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x)
        if self.is_tensor(x):
            return self.tensor(x, param=isinstance(x, self._bk.nn.Parameter))
        if isinstance(x, Half):
            return self.module(x.module, cast_half=True)
        if self.is_module(x):
            return self.module(x)
        if isinstance(x, ModelRecord):
            return self.module(self._build_from_record(x))
        if isinstance(x, np.ndarray):
            return self.ndarray(x, where)
        if isinstance(x, np.generic):
            return Call(Global(_NUMPY_MODULE, "scalar"), (self.dtype(x.dtype), pickle_bytes(_le_bytes(np.asarray(x)))))
        if isinstance(x, collections.OrderedDict):
            return ordered_dict((self.value(k, where), self.value(v, f"{where}[{k!r}]")) for k, v in x.items())
        if isinstance(x, dict):
            return {self.value(k, where): self.value(v, f"{where}[{k!r}]") for k, v in x.items()}
        if isinstance(x, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, tuple):
            return tuple(self.value(v, f"{where}[{i}]") for i, v in enumerate(x))
        if isinstance(x, (set, frozenset)):
            name = "set" if isinstance(x, set) else "frozenset"
            return Call(Global("__builtin__", name), ([self.value(v, where) for v in x],))
        if isinstance(x, (bytes, bytearray)):
            return pickle_bytes(bytes(x))
        if isinstance(x, argparse.Namespace):
            return NewObject(Global("argparse", "Namespace"), self.value(vars(x), where))
        if isinstance(x, pathlib.PurePath):
            cls = "WindowsPath" if isinstance(x, pathlib.PureWindowsPath) else "PosixPath"
            return Call(Global("pathlib", cls), tuple(x.parts))
        if isinstance(x, complex):
            return Call(Global("__builtin__", "complex"), (x.real, x.imag))
        if self._bk is not None and isinstance(x, self._bk.torch.dtype):
            return Global("torch", str(x).split(".")[-1])
        if self._bk is not None and isinstance(x, self._bk.torch.device):
            return Call(Global("torch", "device"), (str(x),))
        hint = " (save its .state_dict())" if hasattr(x, "state_dict") else ""
        raise TypeError(f"{where}: cannot save a {type(x).__module__}.{type(x).__name__} in a checkpoint{hint}")

    def module(self, m, cast_half=False):
        if type(m).__name__ in ("DistributedDataParallel", "DataParallel"):
            m = m.module
        key = (id(m), cast_half)
        if key not in self._module_memo:
            self._keep.append(m)
            self._module_memo[key] = encode_module(m, self, cast_half)
        return self._module_memo[key]

    def ndarray(self, a, where="checkpoint"):
        if a.dtype.hasobject or a.dtype.fields is not None:
            raise TypeError(f"{where}: numpy arrays of Python objects or records cannot be saved")
        state = (1, tuple(int(s) for s in a.shape), self.dtype(a.dtype), False, pickle_bytes(_le_bytes(a)))
        return Call(Global(_NUMPY_MODULE, "_reconstruct"), (Global("numpy", "ndarray"), (0,), pickle_bytes(b"b")),
                    state=state)

    @staticmethod
    def dtype(dt):
        dt = np.dtype(dt)
        order = "|" if dt.itemsize == 1 else "<"
        return Call(Global("numpy", "dtype"), (dt.str[1:], False, True), state=(3, order, None, None, None, -1, -1, 0))


def _le_bytes(a):
    a = np.asarray(a)
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype,
                                          copy=False).tobytes()


def _backend_or_none():
    try:
        from utils import backend  # framework choice: numpy-only content is written without one
        return backend
    except ImportError:  # numpy-only content can still be written
        return None
