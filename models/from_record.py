"""A float32 DetectionModel rebuilt from a :class:`~utils.checkpoint.ModelRecord` (what every checkpoint reader
returns for a stored model, whatever wrote the file): yaml -> model, then the weights, names, hyp and class weights.
The checkpoint package reads and writes records only; its readers and writer take this function as their model
builder (``load_checkpoint(path, build_models=build_model)``)."""
import copy
import numbers
from pathlib import Path

import numpy as np

from models.tasks import model_from_record
from models.yolo import DetectionModel
from utils.checkpoint.kind import check_detection_record
from utils.checkpoint.records import (DAMAGED_REMEDY, MODEL_ATTRS, CheckpointError, from_numpy, load_record_state_dict,
                                      tensor_to_numpy)
from utils.errors import UserError


def build_model(record, source="checkpoint"):
    """A float32 DetectionModel from a record (any format): yaml -> model, weights, names, hyp, class weights, and
    the train/eval mode it was saved in. Every stored value is checked where it is used: a damaged or foreign one is
    a CheckpointError naming the file."""
    check_detection_record(record, source)
    return _finish(_detection_model(record, source), record, source)


def build_any_model(record, source="checkpoint"):
    """build_model for every task's checkpoint: detection, and the SegmentationModel and ClassificationModel of
    segment/ and classify/ (official classifiers keep no yaml: their module tree rebuilds them)."""
    task_class = str(record.get("class", "")).rsplit(".", 1)[-1]
    if task_class not in ("SegmentationModel", "ClassificationModel"):
        return build_model(record, source)
    try:
        model = model_from_record(record)
    except (ValueError, KeyError, TypeError, UserError) as e:
        raise CheckpointError(f"{source}: cannot rebuild its {task_class} ({e}); {DAMAGED_REMEDY}") from None
    return _finish(model, record, source)


def _finish(model, record, source):
    """The record's weights, attributes and train/eval mode on a built model; its stride checked."""
    sd = record.get("state_dict")
    if not isinstance(sd, dict):
        raise CheckpointError(f"{source}: the stored model has no state dict ({type(sd).__name__}); {DAMAGED_REMEDY}")
    load_record_state_dict(model, sd, source)
    try:
        _set_model_attrs(model, record)
        stored_stride = record.get("stride")
        same = stored_stride is None or _same_stride(model, stored_stride)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source}: a stored model attribute is malformed ({e}); {DAMAGED_REMEDY}") from None
    if not same and hasattr(model.model[-1], "anchors"):  # a classifier's stride is bookkeeping
        raise CheckpointError(f"{source}: stored stride {np.asarray(stored_stride).tolist()} differs from the "
                              f"rebuilt model's {tensor_to_numpy(model.stride).tolist()}")
    model = model.float()
    if "training" in record:
        model.train(bool(record["training"]))
    return model


def _detection_model(record, source):
    cfg = record.get("yaml")
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{source}: the stored model has no yaml dict, cannot rebuild it")
    cfg = copy.deepcopy(cfg)
    nc = record.get("nc") or cfg.get("nc")
    if not isinstance(nc, numbers.Integral) or isinstance(nc, bool):
        raise CheckpointError(f"{source}: the stored model's nc {str(nc)[:40]!r} is not a class count; "
                              f"{DAMAGED_REMEDY}")
    try:
        return DetectionModel(cfg, ch=cfg.get("ch", 3), nc=int(nc))
    except UserError as e:  # the stored yaml fails the model YAML checks: name the checkpoint it came from
        raise CheckpointError(f"{source}: its stored model cannot be rebuilt ({e})") from None


def _set_model_attrs(model, record):
    """names, nc, hyp and class weights of the stored model, set on the rebuilt one as official training sets them,
    and the name of the YAML file it was built from."""
    for k in MODEL_ATTRS:
        v = record.get(k)
        if v is None:
            continue
        if k == "names" and isinstance(v, (list, tuple)):
            v = dict(enumerate(v))
        if k == "class_weights":
            v = from_numpy(np.asarray(v, dtype=np.float32))
        setattr(model, k, v)
    yaml_file = record.get("yaml_file")
    if isinstance(yaml_file, str) and yaml_file:  # the model's name in its summary line ('YOLOv5n summary: ...')
        model.yaml_file = Path(yaml_file).name


def _same_stride(model, stored):
    ours = np.asarray(tensor_to_numpy(model.stride), dtype=np.float32)
    stored = np.asarray(stored, dtype=np.float32)
    return ours.shape == stored.shape and np.allclose(ours, stored)
