"""Models as plain data (:class:`ModelRecord`) and back: what the readers return for a stored model, and how the
project rebuilds a float32 DetectionModel from one (yaml -> model, then the weights), whatever wrote the file."""
import collections
import copy

import numpy as np

from utils.errors import UserError


class CheckpointError(UserError, RuntimeError):
    """A checkpoint file that cannot be read: truncated, corrupt, foreign, or holding a forbidden class."""


# What to do about a file whose bytes are cut short or damaged (a broken download or copy, a disk fault): the reader
# cannot repair it, a fresh copy can.
DAMAGED_REMEDY = "re-download or re-export it"


class ModelRecord(dict):
    """A model as plain data: {'class', 'yaml', 'names', 'nc', 'stride', 'hyp', 'training', 'state_dict' (name ->
    np.ndarray), ...}. Every reader returns this type for stored models, so ``attempt_load`` treats all alike."""


_LEGACY_KEYS = ("anchor_grid",)  # buffers older YOLOv5 versions saved but the model recomputes
_MODEL_ATTRS = ("nc", "names", "hyp", "class_weights")  # set on the model by official training; kept on rebuild


def _backend():
    from utils import backend  # lazy: records are read without a framework too
    return backend


def from_numpy(a, bk=None):
    """utils.backend.from_numpy (which widens the integer dtypes a framework lacks, e.g. OneFlow's int16), keeping
    0-d arrays 0-d (np.ascontiguousarray under numpy 1.x makes them 1-d, which breaks loading BatchNorm's
    num_batches_tracked)."""
    bk = bk or _backend()
    a = np.asarray(a)
    t = bk.from_numpy(a)
    return t.reshape(a.shape) if tuple(t.shape) != a.shape else t


def tensor_to_numpy(t):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()  # numpy has no bfloat16; widening to fp32 is exact
    return t.cpu().numpy()


def model_record(model):
    """A live model as a :class:`ModelRecord` of numpy arrays."""
    bk = _backend()
    m = getattr(model, "module", model)  # DDP / DataParallel wrappers
    rec = ModelRecord()
    rec["class"] = type(m).__name__
    for k in ("yaml", "yaml_file", "names", "nc", "hyp"):
        v = getattr(m, k, None)
        if v is not None:
            rec[k] = v
    stride = getattr(m, "stride", None)
    if stride is not None:
        rec["stride"] = tensor_to_numpy(stride) if isinstance(stride, bk.torch.Tensor) else np.asarray(stride)
    rec["training"] = bool(getattr(m, "training", False))
    rec["state_dict"] = collections.OrderedDict((k, tensor_to_numpy(v)) for k, v in m.state_dict().items())
    return rec


def load_record_state_dict(model, state_dict, source="checkpoint"):
    """Copy a numpy state dict into model, casting to the model's dtypes (fp16 files -> fp32 model).
    Missing parameters or shape mismatches raise; legacy extra keys (e.g. ``model.24.anchor_grid``) are skipped."""
    bk = _backend()
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state_dict if k not in own and not k.endswith(_LEGACY_KEYS)
                  and not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise CheckpointError(f"{source}: state dict does not match the model built from its yaml: "
                              f"missing {missing[:8]}{'...' if len(missing) > 8 else ''}, "
                              f"unexpected {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}")
    new = collections.OrderedDict()
    for k, ref in own.items():
        if k not in state_dict:
            new[k] = ref
            continue
        a = np.asarray(state_dict[k])
        if tuple(a.shape) != tuple(ref.shape):
            raise CheckpointError(f"{source}: {k} has shape {tuple(a.shape)}, the model expects {tuple(ref.shape)}")
        np_dtype = np.dtype(str(ref.dtype).split(".")[-1]) if "bfloat16" not in str(ref.dtype) else np.float32
        new[k] = from_numpy(a.astype(np_dtype, copy=False), bk).to(ref.device)
    model.load_state_dict(new)
    return model


def build_model(record, source="checkpoint"):
    """A float32 DetectionModel from a :class:`ModelRecord` (any format): yaml -> model, weights, names, hyp,
    class weights, and the train/eval mode it was saved in."""
    from models.yolo import DetectionModel  # lazy: models import this package
    cfg = record.get("yaml")
    task_class = str(record.get("class", "")).rsplit(".", 1)[-1]
    if task_class in ("SegmentationModel", "ClassificationModel"):
        from models.tasks import model_from_record  # lazy, as above
        try:
            model = model_from_record(record)
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{source}: cannot rebuild its {task_class}: {e}") from e
    elif not isinstance(cfg, dict):
        raise CheckpointError(f"{source}: the stored model has no yaml dict, cannot rebuild it")
    else:
        cfg = copy.deepcopy(cfg)
        nc = record.get("nc") or cfg.get("nc")
        model = DetectionModel(cfg, ch=cfg.get("ch", 3), nc=nc)
    load_record_state_dict(model, record["state_dict"], source)
    for k in _MODEL_ATTRS:
        v = record.get(k)
        if v is None:
            continue
        if k == "names" and isinstance(v, (list, tuple)):
            v = dict(enumerate(v))
        if k == "class_weights":
            v = from_numpy(np.asarray(v, dtype=np.float32))
        setattr(model, k, v)
    stored_stride = record.get("stride")
    if stored_stride is not None and hasattr(model.model[-1], "anchors"):  # a classifier's stride is bookkeeping
        ours = np.asarray(tensor_to_numpy(model.stride), dtype=np.float32)
        if ours.shape != np.asarray(stored_stride).shape or not np.allclose(ours, stored_stride):
            raise CheckpointError(f"{source}: stored stride {np.asarray(stored_stride).tolist()} differs from the "
                                  f"rebuilt model's {ours.tolist()}")
    model = model.float()
    if "training" in record:
        model.train(bool(record["training"]))
    return model
