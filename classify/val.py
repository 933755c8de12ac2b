"""Validate a trained YOLOv5 classification model on an ImageFolder dataset (the flags and output of
ultralytics/yolov5's classify/val.py).

Usage:
    python classify/val.py --weights yolov5s-cls.pt --data ../datasets/imagenet --img 224

--data is the dataset folder; its test/ split is used when present, else val/.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python classify/val.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":
    signals.install("val")

from utils.backend import inference_mode  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from utils.classify.dataset import ClassificationDataError, create_classification_dataloader  # noqa: E402
from utils.data.files import WARN  # noqa: E402
from utils.classify.evaluate import ClassificationSteps, log_accuracy_table  # noqa: E402
from utils.cli_flags import FlagParser, add_workers_flag, image_size, positive_int  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.evaluation.loop import validation_pass  # noqa: E402
from utils.log import LOGGER, colorstr  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from utils.inference import load_model  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


def test_split(data):
    """data/test if it exists, else data/val (as official)."""
    data = Path(data)
    if not data.is_dir():
        raise ClassificationDataError(f"--data {data}: not a folder; pass an ImageFolder dataset root holding "
                                      "train/ and val/ (or test/)")
    return data / "test" if (data / "test").exists() else data / "val"


def model_classes(names, weights):
    """(class list, source) that the test split's folders are labelled with, by name: the model's class names. A
    model that carries none (an export without metadata gets class0, class1, ...) leaves the folders' sorted order
    (official), with a warning."""
    names = dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names or {})
    if not names or all(str(v) == f"class{k}" for k, v in names.items()):
        LOGGER.warning(f"{WARN} {weights}: the model carries no class names; labelling the images by the sorted order "
                       "of the class folders")
        return None, None
    classes = [str(names.get(i, "")) for i in range(max(names) + 1)]
    return classes, f"the model {weights} ({len(names)} class names)"


@inference_mode()
def run(data=ROOT / "../datasets/mnist", weights=ROOT / "yolov5s-cls.pt", batch_size=128, imgsz=224, device="",
        workers=8, verbose=False, project=ROOT / "runs/val-cls", name="exp", exist_ok=False, half=False, dnn=False,
        model=None, dataloader=None, criterion=None, pbar=None):
    """Returns (top1, top5, loss) as official classify/val.run. With model= and dataloader= (the official trainer's
    call) an in-memory model is validated in fp32 with no progress bar; criterion(logits, labels) adds the loss."""
    training = model is not None
    if training:
        half, save_dir = False, None
        model.float()
    else:
        model, dataloader, save_dir, half = _model_and_loader(data, weights, batch_size, imgsz, device, workers,
                                                              project, name, exist_ok, half, dnn)
    model.eval()
    steps = ClassificationSteps(model, None if criterion is None else (lambda y, labels: float(criterion(y, labels))),
                                half=half)
    action = "validating" if dataloader.dataset.root.stem == "val" else "testing"
    profiles = validation_pass(model, dataloader, steps, desc=action, progress=not training)
    acc, targets, loss = steps.accuracy(len(dataloader))
    top1, top5 = (float(v) for v in acc.mean(0))
    if pbar:
        pbar.desc = f"{pbar.desc[:-36]}{loss:>12.3g}{top1:>12.3g}{top5:>12.3g}"
    if verbose:
        log_accuracy_table(acc, targets, getattr(model, "names", None))
        t = tuple(x.t / max(len(dataloader.dataset), 1) * 1e3 for x in profiles)
        LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms post-process per image at shape "
                    f"{(1, 3, imgsz, imgsz)}" % t)
        if not training:
            LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}")
    return top1, top5, loss


def _model_and_loader(data, weights, batch_size, imgsz, device, workers, project, name, exist_ok, half, dnn):
    """classify/val.py's own run: (the loaded model, the test split's loader, the run folder, fp16)."""
    device = select_and_log_device(device, batch_size=batch_size)  # the official 'YOLOv5 🚀 ...' line
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, imgsz=imgsz, task="classify")
    if not (model.pt or model.jit):
        batch_size = 1
        LOGGER.info(f"Forcing --batch-size 1 square inference (1,3,{imgsz},{imgsz}) for non-PyTorch models")
    classes, source = model_classes(model.names, weights[0] if isinstance(weights, (list, tuple)) else weights)
    # in folder order (official shuffles: the figures do not depend on the order; a rerun reads the same batches)
    dataloader = create_classification_dataloader(test_split(data), imgsz=imgsz, batch_size=batch_size,
                                                  augment=False, shuffle=False, workers=workers, classes=classes,
                                                  source=source)
    return model, dataloader, save_dir, model.fp16


def parse_opt(argv=None):
    parser = FlagParser()
    parser.add_argument("--data", type=str, default=ROOT / "../datasets/mnist", help="dataset path")
    parser.add_argument("--weights", nargs="+", type=str, default=ROOT / "yolov5s-cls.pt", help="model.pt path(s)")
    parser.add_argument("--batch-size", type=positive_int, default=128, help="batch size")
    parser.add_argument("--imgsz", "--img", "--img-size", type=image_size, default=224, help="inference size (pixels)")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    add_workers_flag(parser)
    parser.add_argument("--verbose", nargs="?", const=True, default=True, help="verbose output")
    parser.add_argument("--project", default=ROOT / "runs/val-cls", help="save to project/name")
    parser.add_argument("--name", default="exp", help="save to project/name")
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    parser.add_argument("--half", action="store_true", help="use FP16 half-precision inference")
    parser.add_argument("--dnn", action="store_true", help="accepted for compatibility; ignored")
    opt = parser.parse_args(argv)
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("val"):
        main(parse_opt())
    leave_quickly()
