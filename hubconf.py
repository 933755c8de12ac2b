"""Model entry points for PyTorch Hub, with the official names and arguments.

    import torch
    model = torch.hub.load(".", "yolov5n", source="local")                               # ./yolov5n.pt
    model = torch.hub.load(".", "custom", path="runs/train/exp/weights/best.pt", source="local")
    results = model("data/images/still_life.jpg")                                        # utils/inference/autoshape.py
    results.print()

Under OneFlow (which has no torch.hub) the same functions are called directly:

    import hubconf
    model = hubconf.custom(path="runs/train/exp/weights/best.pt")

Weights are never downloaded. A named model (yolov5n, yolov5s, ..., yolov5x6) reads <name>.pt from the working
folder or this repository's root; when it is in neither, the error says where to put it. `pretrained=False` builds
an untrained model from models/<name>.yaml instead.

    python hubconf.py --model yolov5n    # runs the model on data/images and saves the results to runs/detect/exp
"""
import argparse
import logging
import sys
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent
# torch.hub.load puts the repository on sys.path only while it builds the model, but a model imports a few project
# modules later, on first use (test-time augmentation, plotting): keep the root on the path for good.
if str(ROOT) not in sys.path[1:]:
    sys.path.append(str(ROOT))
# torch.hub callers hand the model PyTorch tensors: when PyTorch is already loaded and no backend was chosen,
# the project must not pick OneFlow for them (it would where both are installed).
from utils import settings  # noqa: E402

if "torch" in sys.modules and "utils.backend" not in sys.modules:
    settings.BACKEND.set_default("torch")

from utils.checkpoint import CheckpointError, ModelRecord, load_any  # noqa: E402
from utils.errors import UserError  # noqa: E402
from utils.log import LOGGER, colorstr  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402

dependencies = ["numpy", "yaml", "cv2", "PIL"]  # torch.hub checks these import before calling an entry point

OFFICIAL_MODELS = ("yolov5n", "yolov5s", "yolov5m", "yolov5l", "yolov5x",
                   "yolov5n6", "yolov5s6", "yolov5m6", "yolov5l6", "yolov5x6")
RELEASES_URL = "https://github.com/ultralytics/yolov5/releases"


class WeightsNotFoundError(UserError, FileNotFoundError):
    """The weights a hub entry point was asked for are not on disk (they are never downloaded)."""


def find_weights(path):
    """The weights for `path`, a checkpoint or any export (a file, or a folder such as *_openvino_model/): as given
    (relative to the working folder), else relative to the repository root. Raises WeightsNotFoundError saying where
    to put it."""
    p = Path(path)
    places = [p] if p.is_absolute() else list(dict.fromkeys([Path.cwd() / p, ROOT / p]))
    for candidate in places:
        if candidate.is_file() or (candidate.is_dir() and _is_export_folder(candidate)):
            return candidate
    where = " or ".join(str(c.parent) for c in places)
    if p.suffix == ".pt" and p.stem in OFFICIAL_MODELS and len(p.parts) == 1:
        raise WeightsNotFoundError(
            f"{p.name} not found in {where}: weights are never downloaded here; put the official {p.name} "
            f"({RELEASES_URL}) in one of those folders, or pass pretrained=False for an untrained model built from "
            f"models/{p.stem}.yaml")
    raise WeightsNotFoundError(f"weights file not found: {path} (looked in {where}); pass the path of a .pt checkpoint "
                               "or of an export.py output (.torchscript, .onnx, *_openvino_model/, ...)")


def _is_export_folder(path):
    """A folder export.py writes (*_openvino_model/, *_saved_model/, ...), told by its name as ultralytics does."""
    from utils.export.formats import model_type
    return not model_type(path)["pt"]


def _inference_model(weights, device, fuse):
    """The multi-format loader (it also runs .torchscript/.onnx exports), for any task's model as official."""
    from models.from_record import build_any_model  # framework choice: on the first model built
    from utils.inference.format_loader import DetectMultiBackend  # framework choice: on the first model built
    return DetectMultiBackend(weights, device=device, fuse=fuse, build_model=build_any_model)


_NOT_AUTOSHAPE = {  # models AutoShape cannot wrap (it post-processes detections): returned unwrapped, as official
    "classify": "YOLOv5 classification models are not AutoShape compatible: the model itself is returned; pass it "
                "float tensors of shape (b, 3, h, w), e.g. (1, 3, 224, 224), and read its logits (b, nc).",
    "segment": "YOLOv5 segmentation models are not AutoShape compatible: the model itself is returned (predictions "
               "and prototypes); segment/predict.py draws their masks.",
}


def _model_config(name):
    cfg = next(iter(sorted((ROOT / "models").rglob(f"{name}.yaml"))), None)
    if cfg is None:
        raise UserError(f"no model config {name}.yaml under {ROOT / 'models'}: pass pretrained=True with a "
                        "checkpoint, or one of " + ", ".join(OFFICIAL_MODELS))
    return cfg


def _transfer_weights(model, weights, classes):
    """Copy every checkpoint tensor whose name and shape match into model (not the anchors, which belong to the
    new config), and the class names when the class count is the same."""
    from utils.backend import from_numpy  # framework choice: on the first model built, not when hub lists us
    ckpt = load_any(weights)
    record = next((ckpt[k] for k in ("ema", "model") if isinstance(ckpt.get(k), ModelRecord)), None)
    if record is None:
        raise CheckpointError(f"{weights}: no model in checkpoint (keys: {sorted(ckpt)})")
    own = model.state_dict()
    matched = {k: from_numpy(np.asarray(v)).to(own[k].dtype) for k, v in record["state_dict"].items()
               if k in own and "anchors" not in k and tuple(np.shape(v)) == tuple(own[k].shape)}
    model.load_state_dict(matched, strict=False)
    names = record.get("names")
    if names is not None and len(names) == classes:
        model.names = dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names)
    return len(matched)


def _create(name, pretrained=True, channels=3, classes=80, autoshape=True, verbose=True, device=None):
    """A model by official name ('yolov5s') or checkpoint path ('path/to/best.pt').

    pretrained with 3 channels and 80 classes: the checkpoint as it is, wrapped in AutoShape when autoshape (paths,
    PIL images and arrays in, Detections out) and a detection model; segmentation and classification models (any
    format) come back as the DetectMultiBackend itself, with a warning, as official. Otherwise: an untrained
    DetectionModel from models/<name>.yaml with `channels` and `classes`, given the checkpoint's matching weights
    when pretrained (no AutoShape, as in the official hubconf: such a model is meant for training)."""
    from utils.device_header import select_and_log_device  # framework choice: on the first model built, not on listing
    previous_level = LOGGER.level
    if not verbose:
        LOGGER.setLevel(logging.WARNING)
    try:
        device = select_and_log_device("" if device is None else device)  # official: the 'YOLOv5 🚀 ...' line
        name = Path(name)
        # 'yolov5s' means yolov5s.pt; an export folder's name ('yolov5s_openvino_model') is kept as it is
        path = name.with_suffix(".pt") if name.suffix == "" and not _is_export_folder(name) else name
        if pretrained and channels == 3 and classes == 80:
            model = _inference_model(find_weights(path), device, fuse=autoshape)
            if autoshape and model.task in _NOT_AUTOSHAPE:
                LOGGER.warning(f"WARNING ⚠️ {_NOT_AUTOSHAPE[model.task]}")
            elif autoshape:
                from utils.inference.autoshape import AutoShape  # framework choice: on the first model built
                model = AutoShape(model, verbose=verbose)
        else:
            from models.yolo import DetectionModel  # framework choice: on the first model built
            model = DetectionModel(_model_config(path.stem), channels, classes)
            if pretrained:
                _transfer_weights(model, find_weights(path), classes)
        return model.to(device)
    finally:
        LOGGER.setLevel(previous_level)


def custom(path="path/to/model.pt", autoshape=True, _verbose=True, device=None):
    """A model from a checkpoint file (this project's or an official one) or an export, wrapped in AutoShape when
    autoshape and a detection model (segmentation and classification models: the model itself, as official)."""
    return _create(path, autoshape=autoshape, verbose=_verbose, device=device)


def _official_entry(name):
    def entry(pretrained=True, channels=3, classes=80, autoshape=True, _verbose=True, device=None):
        return _create(name, pretrained, channels, classes, autoshape, _verbose, device)

    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = (f"{name}: weights from {name}.pt in the working folder or the repository root (never "
                     f"downloaded); pretrained=False builds it untrained from models/{name}.yaml. channels/classes "
                     "other than 3/80 give a DetectionModel for training (matching weights copied in).")
    return entry


yolov5n = _official_entry("yolov5n")
yolov5s = _official_entry("yolov5s")
yolov5m = _official_entry("yolov5m")
yolov5l = _official_entry("yolov5l")
yolov5x = _official_entry("yolov5x")
yolov5n6 = _official_entry("yolov5n6")
yolov5s6 = _official_entry("yolov5s6")
yolov5m6 = _official_entry("yolov5m6")
yolov5l6 = _official_entry("yolov5l6")
yolov5x6 = _official_entry("yolov5x6")


def main(argv=None):
    """Load --model, run it on the sample images given in every input form at once, print and save the results."""
    parser = argparse.ArgumentParser(description="Run a hub model on the sample images in data/images")
    parser.add_argument("--model", type=str, default="yolov5s", help="model name")
    opt = parser.parse_args(argv)
    LOGGER.info(colorstr("hubconf: ") + ", ".join(f"{k}={v}" for k, v in vars(opt).items()))

    model = _create(name=opt.model, pretrained=True, channels=3, classes=80, autoshape=True, verbose=True)
    images = ROOT / "data" / "images"
    imgs = [
        str(images / "still_life.jpg"),  # file name
        images / "landscape.jpg",  # Path
        cv2.imread(str(images / "skyline.jpg"))[:, :, ::-1],  # OpenCV image, BGR -> RGB
        Image.open(images / "still_life.jpg"),  # PIL
        np.zeros((320, 640, 3)),  # numpy
    ]
    results = model(imgs, size=320)  # one batch
    results.print()
    results.save()
    return results


if __name__ == "__main__":
    with exit_on_user_error("hubconf"):
        main()
