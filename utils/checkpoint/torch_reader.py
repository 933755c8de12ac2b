"""Reading PyTorch files (torch.save: the zip archive of torch>=1.6 and the legacy single-file format) without
PyTorch and without running code from the file.

A restricted unpickler resolves only what a YOLOv5 checkpoint needs: ``models.*`` and ``torch.nn.*`` classes are
stubbed (:class:`StubObject` keeps their state, runs nothing), tensors are rebuilt from the raw storages into
numpy arrays (wrapped in :class:`TensorData` so callers can tell a tensor from a numpy array and keep
requires_grad), numpy arrays/scalars, Namespaces, paths, OrderedDicts, sets and bytes are rebuilt with the
harmless constructors numpy and the standard library provide. Any other global is refused before it is imported.

What a file may make the reader allocate is bounded before it is allocated: a storage must be a stored (not
compressed) archive member whose size is exactly what the pickle declares and which lies inside the archive; a tensor
view must lie inside its storage, and may hold more elements than its storage (a stride-0 expansion, as Detect's
anchor_grid) only up to MAX_EXPANDED_ELEMENTS; all tensors of one file together are copied out within a budget of
twice the file's size plus BUDGET_ALLOWANCE. numpy arrays, scalars and dtypes are rebuilt from checked state only
(no object dtypes, no forged dtype flags: numpy would read raw bytes as object pointers and crash). A file that breaks
a bound is refused with one CheckpointError naming it.
"""
import argparse
import codecs
import collections
import io
import math
import os
import pathlib
import pickle
import struct
import zipfile

import numpy as np

from utils.checkpoint.records import DAMAGED_REMEDY, CheckpointError

# Storage class name -> numpy dtype. BFloat16 has no numpy dtype: its raw uint16 bits are widened to float32.
STORAGE_DTYPES = {
    "HalfStorage": np.float16, "FloatStorage": np.float32, "DoubleStorage": np.float64,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_, "BFloat16Storage": np.uint16,
}
TORCH_DTYPES = {  # torch dtype globals (e.g. 'torch float16') that may appear in newer pickles
    "float16": np.float16, "half": np.float16, "float32": np.float32, "float": np.float32, "float64": np.float64,
    "double": np.float64, "int64": np.int64, "long": np.int64, "int32": np.int32, "int": np.int32,
    "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "bfloat16": np.uint16,
}
# Module namespaces whose classes are stubbed (never imported): the model's own classes and torch.nn layers.
_STUB_PREFIXES = ("models.", "torch.nn.modules.", "utils.activations")
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLE_BYTES = 256 << 20  # a checkpoint's object pickle (tensors are stored apart); yolov5x's is under 1 MB
# A tensor with more elements than its storage repeats values (stride 0): Detect's anchor_grid at --img 1280 holds
# 153,600 from 6. More than this many is not a checkpoint's tensor but a request to allocate (16 GiB from 1.6 KB).
MAX_EXPANDED_ELEMENTS = 1 << 24
BUDGET_ALLOWANCE = 256 << 20  # bytes all tensors of a file may take beyond twice its size (bfloat16 widens to fp32)
NUMPY_KINDS = "biufcSU"  # numpy dtypes a file may hold: numbers, booleans and strings, never Python objects


class StubObject:
    """Stands in for a pickled ``models.*`` / ``torch.nn.*`` object: keeps its state, runs nothing."""
    _class_path = "?"

    def __init__(self, *args, **kwargs):
        self._stub_args = args

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):  # (dict, slotstate)
            state = {**(state[0] or {}), **state[1]}
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["_stub_state"] = state

    def __repr__(self):
        return f"<stub {self._class_path}>"


_stub_classes = {}


def stub_class(module, name):
    key = f"{module}.{name}"
    if key not in _stub_classes:
        _stub_classes[key] = type(name, (StubObject,), {"_class_path": key, "__module__": "utils.checkpoint.stubs"})
    return _stub_classes[key]


class TensorData:
    """A tensor read from a file: its values as a C-contiguous numpy array, and whether it was a Parameter and
    required grad (so a caller with a framework can rebuild it exactly)."""
    __slots__ = ("array", "requires_grad", "param")

    def __init__(self, array, requires_grad=False, param=False):
        self.array, self.requires_grad, self.param = array, bool(requires_grad), bool(param)


class _Budget:
    """The bytes the tensors of one file may still take when copied out of their storages."""
    __slots__ = ("left", "limit")

    def __init__(self, file_bytes):
        self.limit = self.left = 2 * int(file_bytes) + BUDGET_ALLOWANCE

    def spend(self, nbytes, what):
        if nbytes > self.left:
            raise CheckpointError(f"{what} would take the file's tensors past {self.limit} bytes, more than a "
                                  f"checkpoint of its size holds")
        self.left -= nbytes


class _Storage:
    """A raw storage: a flat numpy array of its dtype (BFloat16 as uint16 bits, marked), and the file's budget."""
    __slots__ = ("array", "bfloat16", "budget")

    def __init__(self, array, bfloat16=False, budget=None):
        self.array, self.bfloat16, self.budget = array, bfloat16, budget


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    """A tensor view (offset, size, stride in elements) on a storage, copied out into its own numpy array."""
    if not isinstance(storage, _Storage):
        raise CheckpointError(f"tensor rebuilt from a {type(storage).__name__}, expected a storage")
    flat = storage.array
    size, stride, storage_offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(storage_offset)
    n = _checked_numel(size, stride, storage_offset, flat.size)
    if storage.budget is not None:
        storage.budget.spend(n * flat.itemsize * (2 if storage.bfloat16 else 1), f"a tensor of size {size}")
    if n == 0:
        arr = np.zeros(size, dtype=flat.dtype)
    else:
        view = np.lib.stride_tricks.as_strided(flat[storage_offset:], shape=size,
                                               strides=tuple(st * flat.itemsize for st in stride))
        arr = np.array(view, copy=True)  # own memory, C-contiguous, writable
    if storage.bfloat16:
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return TensorData(arr, requires_grad)


def _checked_numel(size, stride, offset, storage_numel):
    """The element count of a view (size, stride, offset) on a storage of storage_numel elements, after checking,
    before anything is allocated, that the view lies inside the storage and repeats it within bounds."""
    where = f"tensor of size {size} stride {stride} offset {offset}"
    if len(size) != len(stride) or any(s < 0 for s in size) or any(st < 0 for st in stride) or offset < 0:
        raise CheckpointError(f"{where} is malformed (negative, or sizes and strides differ in number)")
    n = math.prod(size)  # Python integers: no overflow on a forged size
    if n == 0:
        return 0
    last = offset + sum((s - 1) * st for s, st in zip(size, stride))  # the highest element the view reads
    if last >= storage_numel:
        raise CheckpointError(f"{where} overruns its storage of {storage_numel} elements")
    if n > storage_numel and n > MAX_EXPANDED_ELEMENTS:
        raise CheckpointError(f"{where} repeats its storage of {storage_numel} elements into {n} (over "
                              f"{MAX_EXPANDED_ELEMENTS}), which no checkpoint holds")
    return n


def _rebuild_tensor(storage, storage_offset, size, stride):  # torch<1.0 files
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *state):
    if isinstance(data, TensorData):
        return TensorData(data.array, requires_grad, param=True)
    return data


def _rebuild_from_type_v2(func, new_type, args, state):  # torch>=1.13 wraps tensors of subclasses / with state
    return func(*args)


def _torch_size(*args):
    return tuple(*args) if args else ()


def _torch_device(*args):
    return str(args[0]) if args else "cpu"


class _DtypeBuild:
    """numpy.dtype(spec, align, copy) as a file calls it: the dtype is made from its spec string alone, and the
    state numpy's pickle sets afterwards (byte order; fields, flags) is checked, never applied as given: a state
    may claim 'holds objects' for a float dtype, and numpy would then read the file's bytes as object pointers."""
    __slots__ = ("dtype",)

    def __init__(self, spec, align=False, copy=True):
        if not isinstance(spec, str) or len(spec) > 16:
            raise CheckpointError(f"numpy dtype {spec!r} is not a plain type")
        self.dtype = _plain_dtype(np.dtype(spec))

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 8 and state[1] in ("<", ">", "|", "=")
                and state[2:5] == (None, None, None) and state[7] == self.dtype.flags):
            raise CheckpointError(f"numpy dtype {self.dtype} with a state numpy never writes: {state!r}"[:300])
        if state[1] in ("<", ">") and self.dtype.itemsize > 1:
            self.dtype = self.dtype.newbyteorder(state[1])


def _plain_dtype(dtype):
    if isinstance(dtype, _DtypeBuild):
        dtype = dtype.dtype
    if not isinstance(dtype, np.dtype) or dtype.hasobject or dtype.kind not in NUMPY_KINDS or \
            dtype.fields is not None or dtype.subdtype is not None or dtype.itemsize > 1 << 20:
        raise CheckpointError(f"numpy dtype {dtype!r} is not a plain number or string type"[:300])
    return dtype


class _ArrayBuild:
    """numpy's _reconstruct(ndarray, (0,), b'b') as a file calls it: the array is made from the state that follows
    (version, shape, dtype, fortran order, raw bytes) only once the bytes are checked to be exactly what the
    shape and dtype need."""
    __slots__ = ("array",)

    def __init__(self):
        self.array = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) in (4, 5)):
            raise CheckpointError("numpy array with a malformed state")
        shape, dtype, fortran, raw = state[-4:]
        dtype = _plain_dtype(dtype)
        if not (isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape)) or \
                not isinstance(raw, (bytes, bytearray)) or math.prod(shape) * dtype.itemsize != len(raw):
            raise CheckpointError(f"numpy array of shape {shape!r} {dtype} does not match its {len(raw)} bytes"[:300]
                                  if isinstance(raw, (bytes, bytearray)) else "numpy array without its bytes")
        self.array = np.frombuffer(bytes(raw), dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


_NDARRAY = object()  # numpy.ndarray named in a file: only as _reconstruct's first argument, never called


def _reconstruct(subtype, shape, typecode):
    if subtype is not _NDARRAY or not isinstance(shape, tuple) or math.prod(int(d) for d in shape) > 1:
        raise CheckpointError("numpy array rebuilt other than numpy pickles one (_reconstruct(ndarray, (0,), ...))")
    return _ArrayBuild()


def _scalar(dtype, data=None):
    dtype = _plain_dtype(dtype)
    if not isinstance(data, (bytes, bytearray)) or len(data) != dtype.itemsize:
        raise CheckpointError(f"numpy {dtype} scalar without its {dtype.itemsize} bytes")
    return np.frombuffer(bytes(data), dtype=dtype)[0]


def _dtype_class(cls):
    """numpy 2's numpy.dtypes.<Name>DType called in a file: the dtype it stands for, checked like numpy.dtype's."""
    return lambda *args: _DtypeBuild(np.dtype(cls.type).str)


def _safe_numpy_globals():
    """numpy globals that only build arrays/scalars/dtypes (what torch's weights_only loader also allows), each
    through a checked stand-in (the tree is finished by _finish)."""
    allowed = {}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):  # files name either, whatever numpy wrote them
        allowed[(mod, "_reconstruct")] = _reconstruct
        allowed[(mod, "scalar")] = _scalar
    allowed[("numpy", "ndarray")] = _NDARRAY
    allowed[("numpy", "dtype")] = _DtypeBuild
    for name in ("Float64DType", "Float32DType", "Float16DType", "Int64DType", "Int32DType", "Int16DType",
                 "Int8DType", "UInt8DType", "UInt32DType", "UInt16DType", "UInt64DType", "BoolDType"):
        if hasattr(np, "dtypes") and hasattr(np.dtypes, name):
            allowed[("numpy.dtypes", name)] = _dtype_class(getattr(np.dtypes, name))
    return allowed


_PATHS = {"Path": pathlib.Path, "PosixPath": pathlib.Path, "PurePosixPath": pathlib.PurePosixPath,
          "WindowsPath": pathlib.PureWindowsPath, "PureWindowsPath": pathlib.PureWindowsPath,
          "PurePath": pathlib.PurePath}
def _bytes_of(cls):
    """bytes / bytearray as a pickle calls them: from bytes or text, never bytes(n) (n zero bytes: any size asked)."""
    def build(*args):
        if args and not isinstance(args[0], (bytes, bytearray, str, list)):
            raise CheckpointError(f"{cls.__name__}({type(args[0]).__name__}) in a checkpoint: only from bytes or text")
        return cls(*args)
    return build


_BUILTINS = {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex, "bytes": _bytes_of(bytes),
             "bytearray": _bytes_of(bytearray)}
# Plain objects official checkpoints pickle beside the model, stubbed like the model's classes: a classifier's
# preprocessing (torchvision Compose/Normalize around ultralytics' CenterCrop/ToTensor).
_STUB_GLOBALS = {("torchvision.transforms.transforms", "Compose"), ("torchvision.transforms.transforms", "Normalize"),
                 ("utils.augmentations", "CenterCrop"), ("utils.augmentations", "ToTensor")}


class StubAttribute:
    """What ``getattr(<stubbed class>, name)`` stands for in a file (official Segment keeps ``detect =
    Detect.forward``): the attribute's dotted name, nothing resolved or called."""
    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"<attribute {self.path}>"


def _stub_getattr(obj, name, *default):
    """getattr as a pickle global may only name an attribute of a stubbed class: it becomes a StubAttribute."""
    if not (isinstance(obj, type) and issubclass(obj, StubObject)) or not isinstance(name, str) or \
            name.startswith("_"):
        raise CheckpointError(f"refusing getattr({obj!r}, {name!r}) in a checkpoint: only a public attribute of a "
                              "model class may be named")
    return StubAttribute(f"{obj._class_path}.{name}")


class RestrictedUnpickler(pickle.Unpickler):
    """Only the globals a YOLOv5 checkpoint needs; anything else is refused before it is imported."""

    def __init__(self, file, storages_loader, source, legacy=False, budget=None):
        super().__init__(file, encoding="latin1")
        self._legacy = legacy
        self._load_storage = storages_loader
        self._source = source
        self._numpy_allowed = _safe_numpy_globals()
        self.budget = budget if budget is not None else _Budget(0)

    def load(self):
        """The object, with numpy's checked stand-ins replaced by what they built (legacy tensors stay lazy)."""
        return _finish(super().load())

    def find_class(self, module, name):
        if module == "torch._utils" and self._legacy and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda *args: _LazyTensor(args[:4])  # storage data follows the pickle in legacy files
        if module == "torch._utils" and self._legacy and name.startswith("_rebuild_parameter"):
            return lambda data, requires_grad=False, *rest: TensorData(data, requires_grad, param=True)
        if module == "torch._utils":
            fn = {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor": _rebuild_tensor,
                  "_rebuild_parameter": _rebuild_parameter,
                  "_rebuild_parameter_with_state": _rebuild_parameter}.get(name)
            if fn:
                return fn
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return _rebuild_from_type_v2
        if module == "torch" and (name in STORAGE_DTYPES or name in TORCH_DTYPES):
            return stub_class("torch", name)  # storage types: markers in persistent ids; dtypes: kept by name
        if module == "torch" and name == "Size":
            return _torch_size
        if module == "torch" and name == "device":
            return _torch_device
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return stub_class(module, name)  # the new_type of _rebuild_from_type_v2: ignored
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("__builtin__", "builtins") and name in _BUILTINS:
            return _BUILTINS[name]
        if module in ("__builtin__", "builtins") and name == "getattr":
            return _stub_getattr
        if (module, name) in _STUB_GLOBALS:
            return stub_class(module, name)
        if module == "_codecs" and name == "encode":  # how protocol 2 writes bytes: text -> bytes, nothing else
            return codecs.encode
        if module == "argparse" and name == "Namespace":
            return argparse.Namespace
        if module in ("pathlib", "pathlib._local") and name in _PATHS:
            return _PATHS[name]
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
        if isinstance(st, _DeferredStorage):
            st.bfloat16 = bf16
            return st
        return _Storage(st, bfloat16=bf16, budget=self.budget)


def read_zip(path):
    """The object stored in a torch>=1.6 zip archive (any archive folder name)."""
    archive_bytes = os.path.getsize(path)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") <= 1]
        if not pkl:
            raise CheckpointError(f"{path}: zip archive without data.pkl: not a PyTorch checkpoint")
        prefix = pkl[0][: -len("data.pkl")]
        cache = {}

        def load_storage(key, dtype, numel):
            if key not in cache:
                info = zf.getinfo(f"{prefix}data/{key}")
                _check_storage_member(path, key, info, numel * dtype.itemsize, archive_bytes)
                raw = zf.read(info)
                if len(raw) < numel * dtype.itemsize:
                    raise CheckpointError(f"{path} is truncated or corrupt (storage {key} holds {len(raw)} bytes, "
                                          f"expected {numel * dtype.itemsize}); {DAMAGED_REMEDY}")
                cache[key] = np.frombuffer(raw, dtype=dtype, count=numel)
            return cache[key]

        if zf.getinfo(pkl[0]).file_size > MAX_PICKLE_BYTES:
            raise CheckpointError(f"{path}: its object pickle is over {MAX_PICKLE_BYTES >> 20} MiB, no YOLOv5 "
                                  f"checkpoint's is; {DAMAGED_REMEDY}")
        return RestrictedUnpickler(io.BytesIO(zf.read(pkl[0])), load_storage, path,
                                   budget=_Budget(archive_bytes)).load()


def _check_storage_member(path, key, info, declared, archive_bytes):
    """Before a storage is read: its member holds exactly the bytes the pickle declares, stored as they are
    (torch.save never compresses; a compressed member may declare gigabytes that a few bytes inflate to), and lies
    inside the archive (a stored member's declared size cannot exceed what the file has)."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise CheckpointError(f"{path} is corrupt (storage {key} is compressed, which torch.save never writes, and "
                              f"declares {info.file_size} bytes); {DAMAGED_REMEDY}")
    if info.file_size != declared or info.compress_size != info.file_size:
        raise CheckpointError(f"{path} is corrupt (storage {key} holds {info.file_size} bytes, expected "
                              f"{declared}); {DAMAGED_REMEDY}")
    if info.header_offset + info.compress_size > archive_bytes:
        raise CheckpointError(f"{path} is truncated or corrupt (storage {key} of {declared} bytes would end past "
                              f"the file's {archive_bytes} bytes); {DAMAGED_REMEDY}")


class _DeferredStorage:
    """Legacy files store raw storage data after the object pickle: tensors are resolved once it is read."""
    __slots__ = ("key", "dtype", "numel", "bfloat16")

    def __init__(self, key, dtype, numel, bfloat16):
        self.key, self.dtype, self.numel, self.bfloat16 = key, dtype, numel, bfloat16


class _LazyTensor:
    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args


class _HeaderUnpickler(pickle.Unpickler):
    """The legacy header records (magic, protocol, sys info, storage keys) hold only builtins."""

    def find_class(self, module, name):
        raise CheckpointError(f"unexpected global {module}.{name} in a legacy checkpoint header")


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
    if isinstance(x, _ArrayBuild):
        if x.array is None:
            raise CheckpointError("numpy array without its state")
        return x.array
    if isinstance(x, _DtypeBuild):
        return x.dtype
    return _KEEP


def _finish(obj):
    return _walk_replace(obj, _built)


def _resolve_lazy(obj, data, budget=None):
    """Legacy files: every tensor rebuilt now that the storages' bytes are read."""
    def resolve(x):
        if isinstance(x, _LazyTensor):
            storage, *rest = x.args
            return _rebuild_tensor_v2(_Storage(data[storage.key], storage.bfloat16, budget), *rest)
        if isinstance(x, TensorData) and isinstance(x.array, _LazyTensor):  # a Parameter around a lazy tensor
            return TensorData(resolve(x.array).array, x.requires_grad, x.param)
        return _KEEP

    return _walk_replace(obj, resolve)


def read_legacy(path):
    """torch<1.6 format: pickles of magic, protocol, sys info, the object, storage keys, then per storage an
    int64 element count and its raw bytes."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = _HeaderUnpickler(f)
        if head.load() != _LEGACY_MAGIC:
            raise CheckpointError(f"{path}: not a PyTorch checkpoint (bad legacy magic number)")
        head.load(), head.load()  # protocol version, sys info
        pending = {}

        def load_storage(key, dtype, numel):
            pending[key] = _DeferredStorage(key, dtype, numel, False)
            return pending[key]

        budget = _Budget(size)
        obj = RestrictedUnpickler(f, load_storage, path, legacy=True, budget=budget).load()
        keys = _HeaderUnpickler(f).load()
        data = {}
        for key in keys:
            st = pending[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            if not 0 <= numel * st.dtype.itemsize <= size - f.tell():  # checked before reading: no huge allocation
                raise CheckpointError(f"{path} is truncated (storage {key} ends early); {DAMAGED_REMEDY}")
            raw = f.read(numel * st.dtype.itemsize)
            if len(raw) < numel * st.dtype.itemsize:
                raise CheckpointError(f"{path} is truncated (storage {key} ends early); {DAMAGED_REMEDY}")
            data[str(key)] = np.frombuffer(raw, dtype=st.dtype)
    return _resolve_lazy(obj, data, budget)


def read_pytorch_file(path):
    """The raw object tree of a torch.save file (zip or legacy): stubs, TensorData, plain Python and numpy."""
    path = str(path)
    try:
        return read_zip(path) if zipfile.is_zipfile(path) else read_legacy(path)
    except CheckpointError as e:
        if path in str(e):
            raise
        raise CheckpointError(f"{path} is corrupt or not a checkpoint: {e}; {DAMAGED_REMEDY}") from e
    except (RecursionError, MemoryError) as e:
        raise CheckpointError(f"{path} is corrupt or not a checkpoint: it asks for more "
                              f"{'nesting' if isinstance(e, RecursionError) else 'memory'} than any checkpoint "
                              f"needs; {DAMAGED_REMEDY}") from e
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{path}: corrupt checkpoint ({e}): the file was damaged after it was written; "
                              f"{DAMAGED_REMEDY}") from e
    except (pickle.UnpicklingError, EOFError, struct.error, KeyError, ValueError, TypeError, AttributeError,
            IndexError) as e:
        raise CheckpointError(f"{path} is truncated or not a checkpoint: corrupt or unreadable PyTorch/YOLOv5 file "
                              f"({type(e).__name__}: {e}); {DAMAGED_REMEDY}") from e
