"""TensorFlow.js graph model (<stem>_web_model/: model.json + group1-shard1of1.bin), written from the frozen GraphDef.

The tensorflowjs package (4.22, its latest) imports tensorflow_decision_forests, tensorflow_hub and jax at start-up,
which pin TensorFlow releases older than the one onnx2tf needs. Its graph-model format is small and documented, so it
is written here: model.json holds the GraphDef as JSON (modelTopology) with every Const node's value moved into the
weights file, listed in order in weightsManifest (name, shape, dtype; little-endian float32/int32 as tfjs reads them).
The graph is the frozen one (utils/export/to_tensorflow.export_graphdef): input x (NHWC, [0, 1]), output xywh
normalised like the other TensorFlow formats. TF.js models run in a browser or Node.js; read_tfjs_graph() reads the
folder back into a GraphDef, which is how the tests check it. The folder is built in a temporary one and its files
renamed into place on success (utils/atomic_files.output_folder): a failure leaves the earlier export as it was."""
import json
import tempfile
from pathlib import Path

import numpy as np

from utils.atomic_files import output_folder
from utils.export.prepare import ExportError

_VALUE_FIELDS = ("tensor_content", "float_val", "double_val", "int_val", "int64_val", "bool_val", "half_val",
                 "string_val")
_DTYPES = {np.dtype("float32"): "float32", np.dtype("int32"): "int32", np.dtype("bool"): "bool"}
SHARD = "group1-shard1of1.bin"


def export_tfjs(saved_model, file, metadata):
    import tensorflow as tf
    from google.protobuf.json_format import MessageToDict

    from utils.export.to_tensorflow import export_graphdef
    d = file.with_name(f"{file.stem}_web_model")
    with tempfile.TemporaryDirectory(prefix="yolo-tfjs-") as work:
        pb = export_graphdef(saved_model, Path(work) / "frozen.pt")  # work/frozen.pb
        gd = tf.compat.v1.GraphDef()
        gd.ParseFromString(pb.read_bytes())
    weights, blobs = [], []
    for node in gd.node:
        if node.op != "Const":
            continue
        value = tf.make_ndarray(node.attr["value"].tensor)
        if value.dtype == np.int64:  # TF.js has no int64
            value = value.astype(np.int32)
            node.attr["dtype"].type = tf.int32.as_datatype_enum
            node.attr["value"].tensor.dtype = tf.int32.as_datatype_enum
        if value.dtype not in _DTYPES:
            raise ExportError(f"constant {node.name} has dtype {value.dtype}, which TF.js graph models cannot hold")
        weights.append({"name": node.name, "shape": list(value.shape), "dtype": _DTYPES[value.dtype]})
        blobs.append(np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes())
        for field in _VALUE_FIELDS:
            node.attr["value"].tensor.ClearField(field)
    model = {
        "format": "graph-model",
        "generatedBy": tf.__version__,
        "convertedBy": "YOLOv5 export.py",
        "userDefinedMetadata": {"stride": metadata["stride"],
                                "names": {str(k): v for k, v in metadata["names"].items()}},
        "modelTopology": MessageToDict(gd),
        "weightsManifest": [{"paths": [SHARD], "weights": weights}],
    }
    with output_folder(d) as tmp:  # written in a temporary folder, renamed into d on success
        (tmp / SHARD).write_bytes(b"".join(blobs))
        (tmp / "model.json").write_text(json.dumps(model))
    return d


def read_tfjs_graph(folder):
    """-> (GraphDef with the constants put back, userDefinedMetadata): the inverse of export_tfjs, for checks."""
    import tensorflow as tf
    from google.protobuf.json_format import ParseDict
    with open(folder / "model.json") as f:
        model = json.load(f)
    gd = ParseDict(model["modelTopology"], tf.compat.v1.GraphDef())
    nodes = {n.name: n for n in gd.node}
    buf, offset = (folder / model["weightsManifest"][0]["paths"][0]).read_bytes(), 0
    for w in model["weightsManifest"][0]["weights"]:
        dtype = np.dtype(w["dtype"]).newbyteorder("<")
        n = int(np.prod(w["shape"])) * dtype.itemsize
        value = np.frombuffer(buf[offset:offset + n], dtype=dtype).reshape(w["shape"])
        offset += n
        nodes[w["name"]].attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    return gd, model.get("userDefinedMetadata", {})
