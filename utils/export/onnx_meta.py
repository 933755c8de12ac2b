"""The metadata (stride, names), input shape and outputs of an .onnx file, read without the onnx package: the OpenCV
DNN runtime (--dnn) runs ONNX models in environments that have neither onnx nor onnxruntime (OneFlow's).

An .onnx file is one protobuf ModelProto. Only the fields needed are decoded: metadata_props (14) of
StringStringEntryProto {key 1, value 2}, and graph (7) -> input (11) / output (12) -> ValueInfoProto {name (1),
type (2) -> tensor_type (1) -> shape (2) -> dim (1) -> dim_value (1)}."""

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """(field number, value) for each field of one message: int for varints, bytes for length-delimited ones."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _LEN:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            value, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, value


def _first(buf, number):
    """The first length-delimited field `number` of a message, or None (a varint where a message belongs: none)."""
    if not isinstance(buf, memoryview):
        return None
    return next((v for f, v in _fields(buf) if f == number and isinstance(v, memoryview)), None)


def _text(entry, number):
    v = entry.get(number, b"")
    return bytes(v).decode() if isinstance(v, memoryview) else ""  # bytes(int) would allocate that many bytes


def read_onnx_info(path):
    """Returns (metadata dict of str -> str, first input's shape as a tuple with None for symbolic dims). A file
    that is not a well-formed ModelProto raises ValueError naming it."""
    with open(path, "rb") as f:
        buf = memoryview(f.read())
    try:
        return _parse(buf)
    except (ValueError, IndexError, TypeError) as e:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"{path} is not a well-formed ONNX model ({type(e).__name__})") from None


def read_onnx_outputs(path):
    """[(name, rank or None)] of the graph's outputs, in order; a damaged file raises ValueError naming it."""
    with open(path, "rb") as f:
        buf = memoryview(f.read())
    try:
        graph = _first(buf, 7)
        outputs = [v for f, v in _fields(graph) if f == 12 and isinstance(v, memoryview)] if graph is not None else []
        found = []
        for out in outputs:
            shape = _value_shape(out)
            found.append((_text(dict(_fields(out)), 1), None if shape is None else len(shape)))
        return found
    except (ValueError, IndexError, TypeError) as e:
        raise ValueError(f"{path} is not a well-formed ONNX model ({type(e).__name__})") from None


def _value_shape(value_info):
    """A ValueInfoProto's tensor shape: a tuple with None for symbolic dims, or None when it records none."""
    t = _first(value_info, 2) if value_info is not None else None
    tensor = _first(t, 1) if t is not None else None
    shp = _first(tensor, 2) if tensor is not None else None
    if shp is None:
        return None
    dims = (dict(_fields(d)).get(1) for f, d in _fields(shp) if f == 1 and isinstance(d, memoryview))
    return tuple(d if isinstance(d, int) else None for d in dims)


def _parse(buf):
    meta, shape = {}, None
    for field, value in _fields(buf):
        if field == 14 and isinstance(value, memoryview):  # metadata_props
            entry = dict(_fields(value))
            meta[_text(entry, 1)] = _text(entry, 2)
        elif field == 7:  # graph
            shape = _value_shape(_first(value, 11))
    return meta, shape
