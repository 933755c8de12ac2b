"""What a checkpoint file holds, told before it is unpickled: a YOLOv5 detection model (what train.py, val.py and
detect.py take), or a segmentation or classification model, an Ultralytics YOLOv8/11 model, or a bare state dict.

The class names a pickle would import are read from its opcodes (pickletools walks them; nothing is built or
run), so a file of another kind gets one line naming what it is and what runs it, instead of the restricted
reader's refusal of a class it has never heard of.
"""
import io
import pickletools
import zipfile

from utils.checkpoint.records import CheckpointError, ModelRecord
from utils.checkpoint.torch_reader import MAX_PICKLE_BYTES

_DETECTION_SCRIPTS = "this project's train.py, val.py and detect.py take YOLOv5 detection checkpoints (yolov5n.pt...)"
_OTHER_KINDS = (  # (global names that mark the kind, what the file is, what runs it): files no reader here takes
    (("ultralytics.",), "an Ultralytics YOLOv8/YOLO11 checkpoint",
     "the `yolo` command of the ultralytics package (pip install ultralytics)"),
)
# Stored model classes of the other YOLOv5 tasks: read here, but run by their own scripts
_TASK_SCRIPTS = {
    "SegmentationModel": ("a YOLOv5 segmentation checkpoint", "segment/val.py or segment/predict.py (training: "
                          "segment/train.py)"),
    "ClassificationModel": ("a YOLOv5 classification checkpoint", "classify/val.py or classify/predict.py "
                            "(training: classify/train.py --model)"),
}


def pickle_globals(data):
    """The 'module.name' globals a pickle would import (GLOBAL and STACK_GLOBAL opcodes), without unpickling."""
    found, strings = set(), []
    try:
        for op, arg, _ in pickletools.genops(io.BytesIO(data)):
            if op.name in ("GLOBAL", "INST"):
                found.add(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.add(f"{strings[-2]}.{strings[-1]}")
            if isinstance(arg, str):
                strings.append(arg)
    except Exception:  # noqa: BLE001 (a damaged pickle: the reader reports it properly; here only the kind is asked)
        pass
    return found


def zip_pickle(path):
    """The object pickle of a torch zip archive, or None (not a zip, no data.pkl, or too large to be a model's)."""
    try:
        with zipfile.ZipFile(path) as zf:
            pkl = [i for i in zf.infolist() if i.filename.endswith("data.pkl") and i.filename.count("/") <= 1]
            if not pkl or pkl[0].file_size > MAX_PICKLE_BYTES:
                return None
            return zf.read(pkl[0])
    except (zipfile.BadZipFile, OSError, KeyError, ValueError, EOFError, NotImplementedError):
        return None


def check_detection_kind(path):
    """Raise CheckpointError naming what the file is and what runs it, when its pickle names the classes of a
    segmentation, classification or Ultralytics-8 model."""
    data = zip_pickle(path)
    if data is None:
        return
    # A global's module name is stored as its own bytes (GLOBAL's text or STACK_GLOBAL's string), so a pickle that
    # holds none of the marks cannot name them: skip the opcode walk (0.2 s in Python per model-sized pickle).
    if not any(m.rstrip(".").encode() in data for marks, _, _ in _OTHER_KINDS for m in marks):
        return
    names = pickle_globals(data)
    for marks, what, runner in _OTHER_KINDS:
        if any(n == m or (m.endswith(".") and n.startswith(m)) for n in names for m in marks):
            raise CheckpointError(f"{path} is {what}, not a YOLOv5 detection model ({_DETECTION_SCRIPTS}): run it "
                                  f"with {runner}.")


def looks_like_state_dict(obj):
    return isinstance(obj, dict) and obj and all(isinstance(k, str) for k in obj) and \
        sum("." in k for k in obj) > len(obj) // 2 and not any(isinstance(v, ModelRecord) for v in obj.values())


def check_detection_record(rec, source):
    """One line when a stored model is a segmentation or classification model given where detection runs."""
    kind = str(rec.get("class", "")).rsplit(".", 1)[-1]
    if kind in _TASK_SCRIPTS:
        what, runner = _TASK_SCRIPTS[kind]
        raise CheckpointError(f"{source} is {what}, not a YOLOv5 detection model ({_DETECTION_SCRIPTS}): run it "
                              f"with {runner}.")


def pick_model_record(ckpt, source):
    """The EMA weights when stored (what validation uses), else the raw model, like ultralytics; one line when the
    file holds no YOLOv5 model (a bare state dict, an optimizer, a dict of something else)."""
    if isinstance(ckpt, dict):
        for key in ("ema", "model"):
            rec = ckpt.get(key)
            if isinstance(rec, ModelRecord):
                return rec
    if looks_like_state_dict(ckpt):
        tensors = [k for k in ckpt if "." in k]
        raise CheckpointError(f"{source} is a bare state dict ({len(tensors)} tensors such as {tensors[0]!r}) without "
                              "the model's structure: no script here takes it; build the model from its YAML, "
                              "load_state_dict() it and save a checkpoint, or train with --cfg and --weights ''.")
    keys = sorted(map(str, ckpt))[:8] if isinstance(ckpt, dict) else type(ckpt).__name__
    raise CheckpointError(f"{source}: no YOLOv5 model in this file (it holds {keys}); give a checkpoint that "
                          f"train.py wrote or an official yolov5*.pt; {_DETECTION_SCRIPTS}.")
