"""What a classification training starts from, as official classify/train.py has it: the ImageFolder splits and their
one class list, the model --model names, and the options the run folder and checkpoints record. The engine's
build_training() calls these through the CLASSIFY task's trainer steps (utils/tasks/classify.py).

* data: an ImageFolder root with train/ and val/ (or test/); the class list is train/'s visible folders, and val/
  is labelled with it by folder name (a folder val/ lacks: a warning; one train/ lacks: one line, see split_classes);
* model: --model, a classification checkpoint (its head resized to the class count), a detection checkpoint cut
  at --cutoff (default 10) into a ClassificationModel, or (beyond official: offline, from scratch) a detection
  model YAML cut the same way; --pretrained False re-initialises every layer, --dropout sets the head's dropout;
* run folder: opt.yaml only (vars(opt), as official; no hyp.yaml).
"""
from pathlib import Path

from models.experimental import attempt_load
from models.tasks import ClassificationModel
from models.yolo import DetectionModel
from utils.backend import nn
from utils.classifier_output import reshape_classifier_output
from utils.classify.dataset import ClassificationDataError, find_classes
from utils.classify.folders import missing_class_folders, quoted
from utils.errors import TrainingError
from utils.log import LOGGER

DEFAULT_CUTOFF = 10  # the backbone of the YOLOv5 detection models


def dataset_splits(data):
    """(root, train dir, val dir) of an ImageFolder dataset; val dir is test/ when it exists, else val/."""
    root = Path(data)
    if not root.is_dir():
        raise TrainingError(f"--data {data}: not a folder (this project downloads nothing): give an ImageFolder "
                            "dataset root holding train/<class>/<image> and val/<class>/<image> (or test/).")
    train = root / "train"
    val = root / "test" if (root / "test").exists() else root / "val"
    for split in (train, val):
        if not split.is_dir():
            raise TrainingError(f"--data {data}: no {split.name}/ folder inside; an ImageFolder dataset root holds "
                                "train/<class>/<image> and val/<class>/<image> (or test/).")
    return root, train, val


def split_classes(train_dir, val_dir):
    """(names, source): the run's one class list, train/'s visible folders, and how messages name it. val_dir's
    folders are labelled by name with it; a folder there that train/ lacks stops here with one line (a missing one is
    the val dataset's warning)."""
    try:
        names = find_classes(train_dir)
        source = f"train/ ({train_dir})"
        missing_class_folders(val_dir, names, source)
    except ClassificationDataError as e:
        raise TrainingError(str(e)) from None
    return names, source


def check_resumed_classes(model, names, weights):
    """A resumed run's head was trained on its checkpoint's classes: train/ must still hold exactly those, in that
    order, or every label would be scored against another class."""
    saved = getattr(model, "names", None)
    if isinstance(saved, dict):
        saved = [saved[k] for k in sorted(saved)]
    if saved is None or [str(n) for n in saved] == [str(n) for n in names]:
        return
    gone = [n for n in saved if n not in set(names)]
    new = [n for n in names if n not in set(saved)]
    what = "; ".join(x for x in (f"gone: {quoted(gone)}" if gone else "", f"new: {quoted(new)}" if new else "") if x)
    raise TrainingError(f"--resume: {weights} was trained on {len(saved)} classes and train/ now holds {len(names)} "
                        f"({what or 'same names, another order'}); resume needs the same class folders; start a new "
                        "run with --model instead.")


def check_model_arg(name):
    """TrainingError unless --model names a checkpoint file or a model YAML (checked before the run folder is made)."""
    path = Path(str(name))
    if path.suffix in (".yaml", ".yml"):
        return
    if not path.is_file():
        raise TrainingError(f"--model {name} not found (this project downloads nothing): give a path to a "
                            "yolov5*-cls.pt or yolov5*.pt file, or a detection model YAML such as yolov5n.yaml "
                            "to train from scratch; torchvision models are not available here.")


def classification_model(inputs, nc):
    """The model to train from --model (see the module docstring), on the CPU, every parameter trainable. inputs: the
    run's ClassifierInputs (model, cutoff, pretrained, dropout)."""
    name = str(inputs.model)
    check_model_arg(name)
    if Path(name).suffix in (".yaml", ".yml"):  # a detection YAML: the network, randomly initialised, cut at --cutoff
        try:
            model = ClassificationModel(cfg=name, nc=nc, cutoff=inputs.cutoff or DEFAULT_CUTOFF)
        except (OSError, ValueError) as e:
            raise TrainingError(f"--model {name}: {e}") from None
    else:
        model = _checkpoint_classifier(name, nc, inputs.cutoff or DEFAULT_CUTOFF)
    pretrained = str(inputs.pretrained).lower() == "true"
    for m in model.modules():
        if not pretrained and hasattr(m, "reset_parameters"):
            m.reset_parameters()
        if isinstance(m, nn.Dropout) and inputs.dropout is not None:
            m.p = inputs.dropout
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def _checkpoint_classifier(name, nc, cutoff):
    """A classifier from a checkpoint: a classification model as it is, a detection model cut at cutoff; the head
    resized to nc classes."""
    model = attempt_load(Path(name), device="cpu", fuse=False)
    if isinstance(model, DetectionModel):
        LOGGER.warning("WARNING ⚠️ pass YOLOv5 classifier model with '-cls' suffix, i.e. "
                       "'--model yolov5s-cls.pt'")
        model = ClassificationModel(model=model, nc=nc, cutoff=cutoff)
    elif not isinstance(model, ClassificationModel):
        raise TrainingError(f"--model {name} holds a {type(model).__name__}, not a YOLOv5 classification or "
                            "detection model.")
    reshape_classifier_output(model, nc)
    return model


def recorded_options(flags):
    """The run's flags (RecordedFlags) as plain data: what opt.yaml and the checkpoints' 'opt' hold (official:
    vars(opt))."""
    out = {}
    for k, v in flags.items():
        if k.startswith("_") or k == "results":
            continue
        out[k] = str(v) if isinstance(v, Path) else v
    return out
