"""What a checkpoint's pickle may build, each through a harmless constructor (utils/checkpoint/unpickler.py maps the
globals a file names to these): stubs for the model's classes (StubObject, StubAttribute: state kept, nothing run),
tensors copied out of raw storages into numpy (TensorData, within the file's Budget; views checked against their
storage), numpy arrays, scalars and dtypes from checked state only, paths and the few builtins a checkpoint holds."""
import math
import pathlib

import numpy as np

from utils.checkpoint.records import CheckpointError

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


class Budget:
    """The bytes the tensors of one file may still take when copied out of their storages."""
    __slots__ = ("left", "limit")

    def __init__(self, file_bytes):
        self.limit = self.left = 2 * int(file_bytes) + BUDGET_ALLOWANCE

    def spend(self, nbytes, what):
        if nbytes > self.left:
            raise CheckpointError(f"{what} would take the file's tensors past {self.limit} bytes, more than a "
                                  f"checkpoint of its size holds")
        self.left -= nbytes


class Storage:
    """A raw storage: a flat numpy array of its dtype (BFloat16 as uint16 bits, marked), and the file's budget."""
    __slots__ = ("array", "bfloat16", "budget")

    def __init__(self, array, bfloat16=False, budget=None):
        self.array, self.bfloat16, self.budget = array, bfloat16, budget


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    """A tensor view (offset, size, stride in elements) on a storage, copied out into its own numpy array."""
    if not isinstance(storage, Storage):
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


def rebuild_tensor(storage, storage_offset, size, stride):  # torch<1.0 files
    return rebuild_tensor_v2(storage, storage_offset, size, stride)


def rebuild_parameter(data, requires_grad=False, backward_hooks=None, *state):
    if isinstance(data, TensorData):
        return TensorData(data.array, requires_grad, param=True)
    return data


def rebuild_from_type_v2(func, new_type, args, state):  # torch>=1.13 wraps tensors of subclasses / with state
    return func(*args)


def torch_size(*args):
    return tuple(*args) if args else ()


def torch_device(*args):
    return str(args[0]) if args else "cpu"


class DtypeBuild:
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
    if isinstance(dtype, DtypeBuild):
        dtype = dtype.dtype
    if not isinstance(dtype, np.dtype) or dtype.hasobject or dtype.kind not in NUMPY_KINDS or \
            dtype.fields is not None or dtype.subdtype is not None or dtype.itemsize > 1 << 20:
        raise CheckpointError(f"numpy dtype {dtype!r} is not a plain number or string type"[:300])
    return dtype


class ArrayBuild:
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
    return ArrayBuild()


def _scalar(dtype, data=None):
    dtype = _plain_dtype(dtype)
    if not isinstance(data, (bytes, bytearray)) or len(data) != dtype.itemsize:
        raise CheckpointError(f"numpy {dtype} scalar without its {dtype.itemsize} bytes")
    return np.frombuffer(bytes(data), dtype=dtype)[0]


def _dtype_class(cls):
    """numpy 2's numpy.dtypes.<Name>DType called in a file: the dtype it stands for, checked like numpy.dtype's."""
    return lambda *args: DtypeBuild(np.dtype(cls.type).str)


def safe_numpy_globals():
    """numpy globals that only build arrays/scalars/dtypes (what torch's weights_only loader also allows), each
    through a checked stand-in (the tree is finished by _finish)."""
    allowed = {}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):  # files name either, whatever numpy wrote them
        allowed[(mod, "_reconstruct")] = _reconstruct
        allowed[(mod, "scalar")] = _scalar
    allowed[("numpy", "ndarray")] = _NDARRAY
    allowed[("numpy", "dtype")] = DtypeBuild
    for name in ("Float64DType", "Float32DType", "Float16DType", "Int64DType", "Int32DType", "Int16DType",
                 "Int8DType", "UInt8DType", "UInt32DType", "UInt16DType", "UInt64DType", "BoolDType"):
        if hasattr(np, "dtypes") and hasattr(np.dtypes, name):
            allowed[("numpy.dtypes", name)] = _dtype_class(getattr(np.dtypes, name))
    return allowed


PATHS = {"Path": pathlib.Path, "PosixPath": pathlib.Path, "PurePosixPath": pathlib.PurePosixPath,
          "WindowsPath": pathlib.PureWindowsPath, "PureWindowsPath": pathlib.PureWindowsPath,
          "PurePath": pathlib.PurePath}
def _bytes_of(cls):
    """bytes / bytearray as a pickle calls them: from bytes or text, never bytes(n) (n zero bytes: any size asked)."""
    def build(*args):
        if args and not isinstance(args[0], (bytes, bytearray, str, list)):
            raise CheckpointError(f"{cls.__name__}({type(args[0]).__name__}) in a checkpoint: only from bytes or text")
        return cls(*args)
    return build


BUILTINS = {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex, "bytes": _bytes_of(bytes),
             "bytearray": _bytes_of(bytearray)}
# Plain objects official checkpoints pickle beside the model, stubbed like the model's classes: a classifier's
# preprocessing (torchvision Compose/Normalize around ultralytics' CenterCrop/ToTensor).
STUB_GLOBALS = {("torchvision.transforms.transforms", "Compose"), ("torchvision.transforms.transforms", "Normalize"),
                 ("utils.augmentations", "CenterCrop"), ("utils.augmentations", "ToTensor")}


class StubAttribute:
    """What ``getattr(<stubbed class>, name)`` stands for in a file (official Segment keeps ``detect =
    Detect.forward``): the attribute's dotted name, nothing resolved or called."""
    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"<attribute {self.path}>"


def stub_getattr(obj, name, *default):
    """getattr as a pickle global may only name an attribute of a stubbed class: it becomes a StubAttribute."""
    if not (isinstance(obj, type) and issubclass(obj, StubObject)) or not isinstance(name, str) or \
            name.startswith("_"):
        raise CheckpointError(f"refusing getattr({obj!r}, {name!r}) in a checkpoint: only a public attribute of a "
                              "model class may be named")
    return StubAttribute(f"{obj._class_path}.{name}")
