"""The restricted unpickler of PyTorch files: only the globals a YOLOv5 checkpoint needs resolve (to the builders of
utils/checkpoint/pickle_values.py); any other is refused before it is imported. Storages come from the caller (a zip
archive's members, or a legacy file's tail read after the pickle), and numpy's checked stand-ins are replaced by
what they built once the object is loaded."""
import argparse
import codecs
import collections
import pickle

import numpy as np

from utils.checkpoint.pickle_values import (BUILTINS, PATHS, STORAGE_DTYPES, STUB_GLOBALS, TORCH_DTYPES, ArrayBuild,
                                            Budget, DtypeBuild, Storage, StubObject, TensorData, rebuild_from_type_v2,
                                            rebuild_parameter, rebuild_tensor, rebuild_tensor_v2, safe_numpy_globals,
                                            stub_class, stub_getattr, torch_device, torch_size)
from utils.checkpoint.records import CheckpointError

# Module namespaces whose classes are stubbed (never imported): the model's own classes and torch.nn layers.
_STUB_PREFIXES = ("models.", "torch.nn.modules.", "utils.activations")


class RestrictedUnpickler(pickle.Unpickler):
    """Only the globals a YOLOv5 checkpoint needs; anything else is refused before it is imported."""

    def __init__(self, file, storages_loader, source, legacy=False, budget=None):
        super().__init__(file, encoding="latin1")
        self._legacy = legacy
        self._load_storage = storages_loader
        self._source = source
        self._numpy_allowed = safe_numpy_globals()
        self.budget = budget if budget is not None else Budget(0)

    def load(self):
        """The object, with numpy's checked stand-ins replaced by what they built (legacy tensors stay lazy)."""
        return _finish(super().load())

    def find_class(self, module, name):
        if module == "torch._utils" and self._legacy and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda *args: _LazyTensor(args[:4])  # storage data follows the pickle in legacy files
        if module == "torch._utils" and self._legacy and name.startswith("_rebuild_parameter"):
            return lambda data, requires_grad=False, *rest: TensorData(data, requires_grad, param=True)
        if module == "torch._utils":
            fn = {"_rebuild_tensor_v2": rebuild_tensor_v2, "_rebuild_tensor": rebuild_tensor,
                  "_rebuild_parameter": rebuild_parameter,
                  "_rebuild_parameter_with_state": rebuild_parameter}.get(name)
            if fn:
                return fn
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return rebuild_from_type_v2
        if module == "torch" and (name in STORAGE_DTYPES or name in TORCH_DTYPES):
            return stub_class("torch", name)  # storage types: markers in persistent ids; dtypes: kept by name
        if module == "torch" and name == "Size":
            return torch_size
        if module == "torch" and name == "device":
            return torch_device
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return stub_class(module, name)  # the new_type of rebuild_from_type_v2: ignored
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("__builtin__", "builtins") and name in BUILTINS:
            return BUILTINS[name]
        if module in ("__builtin__", "builtins") and name == "getattr":
            return stub_getattr
        if (module, name) in STUB_GLOBALS:
            return stub_class(module, name)
        if module == "_codecs" and name == "encode":  # how protocol 2 writes bytes: text -> bytes, nothing else
            return codecs.encode
        if module == "argparse" and name == "Namespace":
            return argparse.Namespace
        if module in ("pathlib", "pathlib._local") and name in PATHS:
            return PATHS[name]
        if (module, name) in self._numpy_allowed:
            return self._numpy_allowed[(module, name)]
        if module.startswith(_STUB_PREFIXES) or module == "torch.nn":
            return stub_class(module, name)
        raise CheckpointError(f"{self._source}: refusing to load global '{module}.{name}': it is not a class a "
                              "YOLOv5 checkpoint needs, and importing it could run arbitrary code")

    def persistent_load(self, pid):
        # ('storage', storage_type, key, location, numel[, view_metadata])
        if isinstance(pid, tuple) and len(pid) >= 2 and pid[0] == "module":  # legacy files: (tag, class, file, src)
            return pid[1]  # already vetted (stubbed) by find_class
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise CheckpointError(f"{self._source}: unsupported persistent id {pid!r}")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if isinstance(storage_type, type) and issubclass(storage_type, StubObject):
            tname = storage_type._class_path.split(".")[-1]
            dtype = STORAGE_DTYPES.get(tname) or TORCH_DTYPES.get(tname)
        else:
            tname, dtype = repr(storage_type), None
        if dtype is None:
            raise CheckpointError(f"{self._source}: unsupported storage type {tname}")
        bf16 = "BFloat16" in tname or tname == "bfloat16"
        if numel < 0:
            raise CheckpointError(f"{self._source}: storage {key} declares {numel} elements")
        st = self._load_storage(key, np.dtype(dtype), numel)
        if isinstance(st, DeferredStorage):
            st.bfloat16 = bf16
            return st
        return Storage(st, bfloat16=bf16, budget=self.budget)


class DeferredStorage:
    """Legacy files store raw storage data after the object pickle: tensors are resolved once it is read."""
    __slots__ = ("key", "dtype", "numel", "bfloat16")

    def __init__(self, key, dtype, numel, bfloat16):
        self.key, self.dtype, self.numel, self.bfloat16 = key, dtype, numel, bfloat16


class _LazyTensor:
    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args


_KEEP = object()


def _walk_replace(root, replace):
    """root with each object x for which replace(x) is not _KEEP replaced by that value: in place in dicts, lists,
    sets, stubs and Namespaces, by rebuilding in tuples. Each object is visited once: shared objects stay shared and
    a cycle ends (a file can nest deeper than Python recurses: the caller reports a RecursionError as damage)."""
    done = {}

    def visit(x):
        r = replace(x)
        if r is not _KEEP:
            return r
        key = id(x)
        if key in done:
            return done[key]
        done[key] = x
        if isinstance(x, dict):
            for k in list(x):
                x[k] = visit(x[k])
        elif isinstance(x, list):
            for i, v in enumerate(x):
                x[i] = visit(v)
        elif isinstance(x, set):
            items = [visit(v) for v in x]
            x.clear()
            x.update(items)
        elif isinstance(x, (tuple, frozenset)) and not hasattr(x, "_fields"):
            done[key] = type(x)(visit(v) for v in x)
        elif isinstance(x, (StubObject, argparse.Namespace)):
            d = vars(x)
            for k in list(d):
                d[k] = visit(d[k])
        return done[key]

    return visit(root)


def _built(x):
    """numpy's checked stand-ins -> what they built."""
    if isinstance(x, ArrayBuild):
        if x.array is None:
            raise CheckpointError("numpy array without its state")
        return x.array
    if isinstance(x, DtypeBuild):
        return x.dtype
    return _KEEP


def _finish(obj):
    return _walk_replace(obj, _built)


def resolve_lazy(obj, data, budget=None):
    """Legacy files: every tensor rebuilt now that the storages' bytes are read."""
    def resolve(x):
        if isinstance(x, _LazyTensor):
            storage, *rest = x.args
            return rebuild_tensor_v2(Storage(data[storage.key], storage.bfloat16, budget), *rest)
        if isinstance(x, TensorData) and isinstance(x.array, _LazyTensor):  # a Parameter around a lazy tensor
            return TensorData(resolve(x.array).array, x.requires_grad, x.param)
        return _KEEP

    return _walk_replace(obj, resolve)
