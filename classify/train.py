"""Train a YOLOv5 classifier on an ImageFolder dataset, on OneFlow or PyTorch (YOLO_BACKEND=oneflow|torch), with
the flags and defaults of ultralytics/yolov5's classify/train.py.

Usage - single process (CPU or one GPU):
    $ python classify/train.py --model yolov5s-cls.pt --data ../datasets/imagenette160 --epochs 5 --img 224
    $ python classify/train.py --model yolov5n.pt --data ../datasets/coco128-cls --img 128
    $ python classify/train.py --model yolov5n.yaml --data ../datasets/shapes-cls --img 64   # from scratch
    $ python classify/train.py --resume                  # continue the most recent run from its last.pt
Usage - DDP (one process per GPU; --batch-size is the total):
    $ python -m torch.distributed.run --nproc_per_node 2 classify/train.py --model yolov5s-cls.pt --data ... \
          --device 0,1

--data is an ImageFolder root holding train/<class>/<image> and val/<class>/<image> (or test/); this project
downloads nothing. --model is a classification checkpoint, a detection checkpoint (cut at --cutoff into a
classifier, as official) or, beyond official, a detection model YAML (the same cut, from scratch). Beyond official:
--resume continues a run exactly (optimizer, EMA, epoch, random streams), and --multi_tensor_optimizer.

This file parses flags and checks a new run's --data and --model; the engine's main() (utils/engine/run.py, train.py's
too) resolves --resume, launches and trains the CLASSIFY task (utils/tasks/classify.py: its trainer steps) with
build_training() and TrainLoop, as it trains detection.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python classify/train.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("train")

from utils.classify.training import check_model_arg, dataset_splits, split_classes  # noqa: E402
from utils.cli_flags import (FlagParser, add_amp_flags, add_cache_flag, add_workers_flag, image_size,  # noqa: E402
                             positive_int, run_from_defaults)
from utils.engine import run as run_main  # noqa: E402
from utils.engine.errors import TrainingError  # noqa: E402
from utils.engine.parts import RunOptions  # noqa: E402
from utils.engine.run import TrainScript  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.tasks.classify import CLASSIFY  # noqa: E402

OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSProp")


def parse_opt(known=False, args=None):
    parser = FlagParser()
    parser.add_argument("--model", type=str, default="yolov5s-cls.pt", help="initial weights path")
    parser.add_argument("--data", type=str, default="imagenette160", help="cifar10, cifar100, mnist, imagenet, ...")
    parser.add_argument("--epochs", type=positive_int, default=10, help="total training epochs")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="total batch size for all GPUs")
    parser.add_argument("--imgsz", "--img", "--img-size", type=image_size, default=224,
                        help="train, val image size (pixels)")
    parser.add_argument("--nosave", action="store_true", help="only save final checkpoint")
    add_cache_flag(parser, '--cache images in "ram" (default) or "disk"')
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    add_workers_flag(parser)
    parser.add_argument("--project", default=str(ROOT / "runs/train-cls"), help="save to project/name")
    parser.add_argument("--name", default="exp", help="save to project/name")
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    parser.add_argument("--pretrained", nargs="?", const=True, default=True, help="start from i.e. --pretrained False")
    parser.add_argument("--optimizer", choices=list(OPTIMIZERS), default="Adam", help="optimizer")
    parser.add_argument("--lr0", type=float, default=0.001, help="initial learning rate")
    parser.add_argument("--decay", type=float, default=5e-5, help="weight decay")
    parser.add_argument("--label-smoothing", type=float, default=0.1, help="Label smoothing epsilon")
    parser.add_argument("--cutoff", type=int, default=None, help="Model layer cutoff index for Classify() head")
    parser.add_argument("--dropout", type=float, default=None, help="Dropout (fraction)")
    parser.add_argument("--verbose", action="store_true", help="Verbose mode")
    parser.add_argument("--seed", type=int, default=0, help="Global training seed")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1,
                        help="Automatic DDP Multi-GPU argument, do not modify")
    # Beyond official: exact resume, and this project's fused multi-tensor optimizer/EMA update
    parser.add_argument("--resume", nargs="?", const=True, default=False, help="resume most recent training")
    parser.add_argument("--multi_tensor_optimizer", action="store_true",
                        help="fused multi-tensor EMA and optimizer update")
    add_amp_flags(parser)
    return parser.parse_known_args(args)[0] if known else parser.parse_args(args)


def run_options(opt):
    """The RunOptions of classification: official min(os.cpu_count() - 1, --workers) loader workers, no early stop;
    the detection flags it lacks (--rect, --sync-bn, --evolve, --image-weights...) keep RunOptions' defaults."""
    workers = max(min((os.cpu_count() or 1) - 1, opt.workers), 0)
    return RunOptions(workers=workers, nosave=bool(opt.nosave), patience=0)  # official classification: no patience


def check_new_run(opt):
    """Bad --data or --model: one line, before any run folder. A new run starts from --model, not --weights."""
    opt.weights = ""
    split_classes(*dataset_splits(opt.data)[1:])
    check_model_arg(opt.model)


def check_batch_size(opt):
    if opt.batch_size == -1:
        raise TrainingError("--batch-size -1: AutoBatch is not supported for classification (as official); give a "
                            "batch size.")


def print_next_steps(opt):
    best = Path(opt.save_dir) / "weights" / "best.pt"
    LOGGER.info(f"\nPredict:         python classify/predict.py --weights {best} --source im.jpg"
                f"\nValidate:        python classify/val.py --weights {best} --data {opt.data}"
                f"\nExport:          python export.py --weights {best} --include onnx")


SCRIPT = TrainScript(name="classify/train.py", parse=parse_opt, task_for=lambda opt: CLASSIFY, run_options=run_options,
                     start_flag="--model", model_kind="ClassificationModel", optimizers=OPTIMIZERS,
                     check_new_run=check_new_run, check=check_batch_size, after_training=print_next_steps)


def resume_opt(opt):
    """The options of the classification run being resumed, from its last.pt, with --weights pointing at it."""
    return run_main.resume_opt(opt, SCRIPT)


def main(opt, callbacks=None):
    """Train with opt; callbacks: a utils.callbacks.Callbacks called at the training events (official's trainer takes
    none here; the engine's events are the same for every task)."""
    return run_main.main(opt, SCRIPT, callbacks=callbacks)


def run(**kwargs):
    """Python entry point: run(data='../datasets/mnist', imgsz=64, model='yolov5n.yaml', epochs=3). Returns opt,
    with opt.results the final (top1, top5, val loss)."""
    return run_from_defaults(main, parse_opt, kwargs)  # never the caller's sys.argv


if __name__ == "__main__":
    with exit_on_user_error("train"):
        main(parse_opt())
    leave_quickly()
