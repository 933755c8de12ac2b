"""The model a training starts from: a resumed last.pt's, pretrained weights transferred into --cfg (or the
checkpoint's own yaml), or --cfg from scratch; then the --freeze'd layers."""
from pathlib import Path

import numpy as np

from models.yolo import Model
from utils import backend
from utils.checkpoint import load_any
from utils.checkpoint.kind import check_detection_record, pick_model_record
from utils.engine.errors import TrainingError
from utils.errors import UserError
from utils.log import LOGGER
from utils.torch_utils import intersect_dicts


def initial_model(weights, cfg, frozen, hyp, nc, device, ckpt=None, model_class=Model,
                  check_record=check_detection_record):
    """The model on `device`, frozen layers set. weights, cfg, frozen: --weights, --cfg and --freeze; ckpt: the
    loaded last.pt of a resumed run (exact fp32 weights from this project's files, fp16 ones from official files);
    model_class: the task's network (Task.model_class); check_record: refuses a --weights model the task does not
    train from (Task.check_pretrained)."""
    weights = str(weights or "")
    if ckpt is not None:
        model = ckpt["model"]
    elif weights:
        model = pretrained_model(weights, cfg, nc, hyp.get("anchors"), model_class, check_record)
    else:
        model = model_class(cfg, ch=3, nc=nc, anchors=hyp.get("anchors"))
    model = model.to(device)
    freeze(model, frozen)
    return model


def pretrained_model(weights, cfg, nc, anchors=None, model_class=Model, check_record=check_detection_record):
    """A model from cfg (or the checkpoint's yaml) with every matching pretrained tensor transferred."""
    if not Path(weights).is_file():
        raise TrainingError(f"--weights {weights} not found (this project downloads nothing): give a path to a "
                            "yolov5*.pt file (the official ones are on the ultralytics/yolov5 releases page), or "
                            "--weights '' to train from scratch.")
    ck = load_any(weights)
    rec = pick_model_record(ck, weights)
    check_record(rec, weights)
    if not cfg and not isinstance(rec.get("yaml"), dict):
        raise TrainingError(f"--weights {weights}: the stored model has no yaml to rebuild it from; give --cfg too.")
    try:
        model = model_class(cfg or rec["yaml"], ch=3, nc=nc, anchors=anchors)
    except UserError as e:
        raise TrainingError(f"--weights {weights}: {e}" if not cfg else str(e)) from None
    exclude = ["anchor"] if (cfg or anchors) else []  # keep the yaml's/hyp's anchors
    own = model.state_dict()
    sd = rec.get("state_dict")
    if not isinstance(sd, dict):
        raise TrainingError(f"--weights {weights}: the stored model has no state dict; re-download or re-export it.")
    arrays = {k: np.asarray(v) for k, v in sd.items() if isinstance(k, str) and k in own}
    csd = {k: backend.from_numpy(a.astype(np.float32) if a.dtype.kind == "f" else a)
           for k, a in arrays.items() if a.dtype.kind in "biuf"}  # only numbers transfer: a damaged entry is left out
    csd = intersect_dicts(csd, own, exclude=exclude)
    own.update({k: v.to(own[k].dtype) for k, v in csd.items()})
    model.load_state_dict(own)
    LOGGER.info(f"Transferred {len(csd)}/{len(model.state_dict())} items from {weights}")
    return model


def freeze(model, layers):
    """--freeze 10 freezes layers 0-9 (the backbone); --freeze 0 1 2 freezes those layers."""
    layers = list(layers or [0])
    names = [f"model.{x}." for x in (layers if len(layers) > 1 else range(layers[0]))]
    for k, v in model.named_parameters():
        v.requires_grad_(not any(x in k for x in names))
        if names and any(x in k for x in names):
            LOGGER.info(f"freezing {k}")
