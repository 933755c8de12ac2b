"""Train a YOLOv5 model on a detection dataset, on OneFlow or PyTorch (YOLO_BACKEND=oneflow|torch).

Usage - single process (CPU or one GPU):
    $ python train.py --data data/shapes.yaml --cfg yolov5n.yaml --weights '' --img 256 --epochs 30 --allow-download-scripts
    $ python train.py --data coco128.yaml --weights yolov5n.pt --img 320 --epochs 3
    $ python train.py --resume                      # continue the most recent run from its last.pt
Usage - DDP (one process per GPU; --batch-size is the total):
    $ python -m torch.distributed.run --nproc_per_node 2 train.py --data coco128.yaml --batch-size 64 --device 0,1
    $ python -m oneflow.distributed.launch --nproc_per_node 2 train.py --data coco128.yaml --batch-size 64 --device 0,1

This file parses flags and checks a new run's model flags; the engine's main() (utils/engine/run.py, the same for
segment/train.py and classify/train.py) resolves resume/evolve, reads who this process is, picks its device and
trains (build_training() makes the parts for the task, TrainLoop runs them with its hooks).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import plot_jobs, signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("train")
    plot_jobs.fork_early(sys.argv[1:])  # the plot helpers, while this process is small (utils/plot_jobs.py)

from utils.cli_flags import (FlagParser, add_amp_flags, add_cache_flag, image_size, nonnegative_int,  # noqa: E402
                             positive_int, run_from_defaults, train_batch_size)
from utils.engine import run as run_main  # noqa: E402
from utils.engine.errors import TrainingError  # noqa: E402
from utils.engine.run import TrainScript  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.tasks.detect import DETECT  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


def make_parser():
    """train.py's flags (segment/train.py adds its own to these)."""
    parser = FlagParser()
    parser.add_argument("--weights", type=str, default=str(ROOT / "yolov5s.pt"), help="initial weights path")
    parser.add_argument("--cfg", type=str, default="", help="model.yaml path")
    parser.add_argument("--data", type=str, default=str(ROOT / "data/coco128.yaml"), help="dataset.yaml path")
    parser.add_argument("--hyp", type=str, default=str(ROOT / "data/hyps/hyp.scratch-low.yaml"), help="hyperparameters path")
    parser.add_argument("--epochs", type=positive_int, default=100, help="total training epochs")
    parser.add_argument("--batch-size", type=train_batch_size, default=16,
                        help="total batch size for all GPUs, -1 for autobatch")
    parser.add_argument("--imgsz", "--img", "--img-size", type=image_size, default=640,
                        help="train, val image size (pixels)")
    parser.add_argument("--rect", action="store_true", help="rectangular training")
    parser.add_argument("--resume", nargs="?", const=True, default=False, help="resume most recent training")
    parser.add_argument("--nosave", action="store_true", help="only save final checkpoint")
    parser.add_argument("--noval", action="store_true", help="only validate final epoch")
    parser.add_argument("--noautoanchor", action="store_true", help="disable AutoAnchor")
    parser.add_argument("--noplots", action="store_true", help="save no plot files")
    parser.add_argument("--evolve", type=int, nargs="?", const=300, help="evolve hyperparameters for x generations")
    parser.add_argument("--evolve_population", type=str, default=str(ROOT / "data/hyps"),
                        help="location for loading population")
    parser.add_argument("--resume_evolve", type=str, default=None, help="resume evolve from last generation")
    parser.add_argument("--bucket", type=str, default="", help="gsutil bucket")
    add_cache_flag(parser, "image --cache ram/disk")
    parser.add_argument("--image-weights", action="store_true", help="use weighted image selection for training")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--multi-scale", action="store_true", help="vary img-size +/- 50%%")
    parser.add_argument("--single-cls", action="store_true", help="train multi-class data as single-class")
    parser.add_argument("--optimizer", type=str, choices=["SGD", "Adam", "AdamW"], default="SGD", help="optimizer")
    parser.add_argument("--sync-bn", action="store_true", help="use SyncBatchNorm, only available in DDP mode")
    parser.add_argument("--workers", type=nonnegative_int, default=8,
                        help="max dataloader workers (per RANK in DDP mode)")
    parser.add_argument("--project", default=str(ROOT / "runs/train"), help="save to project/name")
    parser.add_argument("--name", default="exp", help="save to project/name")
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    parser.add_argument("--quad", action="store_true", help="quad dataloader")
    parser.add_argument("--cos-lr", action="store_true", help="cosine LR scheduler")
    parser.add_argument("--label-smoothing", type=float, default=0.0, help="Label smoothing epsilon")
    parser.add_argument("--patience", type=int, default=100, help="EarlyStopping patience (epochs without improvement)")
    parser.add_argument("--freeze", nargs="+", type=int, default=[0], help="Freeze layers: backbone=10, first3=0 1 2")
    parser.add_argument("--save-period", type=int, default=-1, help="Save checkpoint every x epochs (disabled if < 1)")
    parser.add_argument("--seed", type=int, default=0, help="Global training seed")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="Automatic DDP Multi-GPU argument, do not modify")
    # Logger arguments (W&B, Comet, ClearML as official when installed and configured; utils/loggers/)
    parser.add_argument("--entity", default=None, help="Entity")
    parser.add_argument("--upload_dataset", nargs="?", const=True, default=False, help='Upload data, "val" option')
    parser.add_argument("--bbox_interval", type=int, default=-1, help="Set bounding-box image logging interval")
    parser.add_argument("--artifact_alias", type=str, default="latest", help="Version of dataset artifact to use")
    parser.add_argument("--ndjson-console", action="store_true", help="Log ndjson to console")
    parser.add_argument("--ndjson-file", action="store_true", help="Log ndjson to file")
    # This project's speed-ups: fused CIoU in the loss, fused EMA/optimizer updates.
    parser.add_argument("--bbox_iou_optim", action="store_true", help="fused bbox_iou (CIoU) in the loss")
    parser.add_argument("--multi_tensor_optimizer", action="store_true", help="fused multi-tensor EMA and optimizer update")
    add_amp_flags(parser)
    parser.add_argument("--allow-download-scripts", action="store_true",
                        help="let the data YAML's 'download:' (a zip URL or code) run (as YOLO_ALLOW_DOWNLOAD_SCRIPTS=1)")
    return parser


def parse_opt(known=False, args=None):
    parser = make_parser()
    return parser.parse_known_args(args)[0] if known else parser.parse_args(args)


def check_new_run(opt):
    """train.py's own checks of a new run's options, before its folder is claimed."""
    if not (opt.cfg or opt.weights):
        raise TrainingError("Either --cfg or --weights must be specified")
    if opt.name == "cfg" and opt.cfg:  # official: --name cfg names the run after the model YAML
        opt.name = Path(opt.cfg).stem


def script(parse=parse_opt, task_for=lambda opt: DETECT, name="train.py", evolve_project=ROOT / "runs/evolve"):
    """train.py as the engine's main() runs it; segment/train.py is the same with its parse, task and names."""
    return TrainScript(name=name, parse=parse, task_for=task_for, check_new_run=check_new_run,
                       evolve_project=evolve_project)


def resume_opt(opt, parse=parse_opt):
    """The options of the run being resumed (from its last.pt: this project's or an official ultralytics run's),
    pointing --weights at that last.pt (utils.engine.run.resume_opt)."""
    return run_main.resume_opt(opt, script(parse))


def main(opt, callbacks=None):
    """Train, or with --evolve search the hyperparameters (official: runs/evolve, evolve.csv ranked by fitness).
    callbacks: a utils.callbacks.Callbacks whose actions are called at the official training events."""
    return run_main.main(opt, script(), callbacks=callbacks)


def run(**kwargs):
    """Python entry point: run(data='coco128.yaml', imgsz=320, weights='yolov5n.pt', epochs=3). Returns opt, with
    opt.results the final (P, R, mAP50, mAP50-95, val box, obj, cls)."""
    return run_from_defaults(main, parse_opt, kwargs)  # never the caller's sys.argv


if __name__ == "__main__":
    with exit_on_user_error("train"):
        main(parse_opt())
    leave_quickly()  # the work is done and written: skip the interpreter's teardown (utils/shutdown.py)
