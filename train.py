"""Train a YOLOv5 model on a detection dataset, on OneFlow or PyTorch (YOLO_BACKEND=oneflow|torch).

Usage - single process (CPU or one GPU):
    $ python train.py --data data/shapes.yaml --cfg yolov5n.yaml --weights '' --img 256 --epochs 30 --allow-download-scripts
    $ python train.py --data coco128.yaml --weights yolov5n.pt --img 320 --epochs 3
    $ python train.py --resume                      # continue the most recent run from its last.pt
Usage - DDP (one process per GPU; --batch-size is the total):
    $ python -m torch.distributed.run --nproc_per_node 2 train.py --data coco128.yaml --batch-size 64 --device 0,1
    $ python -m oneflow.distributed.launch --nproc_per_node 2 train.py --data coco128.yaml --batch-size 64 --device 0,1

This file parses flags, resolves resume/evolve, reads who this process is (utils/distributed: one DistContext, passed down),
picks its device and hands over to the engine (utils/engine/:
build_training() makes the parts, TrainLoop runs them with its hooks).
"""
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("train")

from utils.checkpoint.run_options import CONSENT_OPTIONS, without_consent  # noqa: E402
from utils.cli_flags import (FlagParser, add_amp_flags, add_cache_flag, image_size, nonnegative_int,  # noqa: E402
                             positive_int, run_from_defaults, train_batch_size)
from utils.distributed import DistContext, process_group  # noqa: E402
from utils.distributed.launch import training_device  # noqa: E402
from utils.engine.errors import TrainingError  # noqa: E402
from utils.engine.hyp import load_hyp  # noqa: E402
from utils.engine.run import train  # noqa: E402
from utils.engine.saved_options import check_saved_options, read_resumed_checkpoint  # noqa: E402
from utils.engine.seeding import process_seed  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.tasks.detect import DETECT  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402
from utils.evolve import EvolveColumns, evolve  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.paths import RunDirError, increment_path  # noqa: E402


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


def resume_opt(opt, parse=parse_opt):
    """The options of the run being resumed (from its last.pt: this project's or an official ultralytics run's),
    pointing --weights at that last.pt. Flags the saved options lack take the defaults of parse (the script's
    parse_opt). Consent flags (--allow-download-scripts) come from this command line only, never from the file."""
    last, ckpt, saved = read_resumed_checkpoint(opt)
    if not isinstance(saved, dict) or ckpt.get("optimizer") is None:
        raise TrainingError(f"--resume: {last} is a finished (stripped) or foreign checkpoint; it cannot be resumed. "
                            "Use it as --weights to start a new run.")
    saved = without_consent(saved)
    save_dir = last.parent.parent
    new = parse(True, args=[])
    check_saved_options(saved, vars(new), last)
    vars(new).update(saved)
    for k in CONSENT_OPTIONS:  # the person resuming decides, as when the run started
        setattr(new, k, getattr(opt, k, False))
    new.resume, new.weights, new.cfg, new.save_dir = True, str(last), "", str(save_dir)
    hyp_yaml = save_dir / "hyp.yaml"
    new.hyp = str(hyp_yaml) if hyp_yaml.is_file() else saved.get("hyp")
    LOGGER.info(f"Resuming from {last}")
    return new


def main(opt, task_for=lambda opt: DETECT, parse=parse_opt, script="train.py", evolve_project=ROOT / "runs/evolve"):
    """Train (or --evolve) with opt. task_for: opt -> the utils.tasks.Task trained, asked once the options are final
    (a resumed run's are its last.pt's); parse: the script's parse_opt (its defaults: --resume, evolve's folder);
    script: the entry script, as --evolve's closing line names it; evolve_project: --evolve's folder when --project
    is the script's default (official: runs/evolve, segmentation's runs/evolve-seg)."""
    dist = DistContext.from_env()  # who this process is, decided once here and passed down
    process_seed(opt.seed, dist)  # a --seed numpy cannot take stops here, before any folder is made
    if opt.resume and not opt.evolve:
        opt = resume_opt(opt, parse)
    else:
        opt.data, opt.cfg, opt.hyp, opt.weights, opt.project = (str(x) for x in (opt.data, opt.cfg, opt.hyp,
                                                                                  opt.weights, opt.project))
        if not (opt.cfg or opt.weights):
            raise TrainingError("Either --cfg or --weights must be specified")
        if opt.evolve:
            if opt.project == str(parse(True, args=[]).project):
                opt.project = str(evolve_project)
            opt.exist_ok, opt.resume = opt.resume, False
        if opt.name == "cfg" and opt.cfg:  # official: --name cfg names the run after the model YAML
            opt.name = Path(opt.cfg).stem
        # Making the folder is the claim (two runs started at once get exp and exp2). Only rank 0 claims: the other
        # DDP ranks never write to the run folder (utils/engine/run_folder.py), so their unclaimed name is never used.
        try:
            opt.save_dir = str(increment_path(Path(opt.project) / opt.name, exist_ok=opt.exist_ok,
                                              mkdir=dist.is_main))
        except RunDirError as e:
            raise TrainingError(str(e)) from e
        opt.resume = False

    device = training_device(opt, dist)  # launch checks, and this rank's GPU under DDP
    process_group.start(dist, device)  # DDP: process group with its timeout (YOLO_DDP_TIMEOUT), the rank's watchdog
    if dist.distributed:  # a rank stopped by Ctrl-C/SIGTERM is not a crash: its peers got the signal too (launchers
        signals.on_stop(process_group.finish)  # forward it) and stop on their own; their watchdogs must not fail them
    task = task_for(opt)
    if opt.evolve:
        evolve(load_hyp(opt.hyp), opt, device, functools.partial(train, dist=dist, task_plugin=task),
               columns=EvolveColumns.of(task), script=script)
        return None
    results = train(opt.hyp, opt, device, dist, task_plugin=task)
    process_group.finish()  # a goodbye to the peers' watchdogs: this rank's exit from here on is not a crash
    return results


def run(**kwargs):
    """Python entry point: run(data='coco128.yaml', imgsz=320, weights='yolov5n.pt', epochs=3). Returns opt, with
    opt.results the final (P, R, mAP50, mAP50-95, val box, obj, cls)."""
    return run_from_defaults(main, parse_opt, kwargs)  # never the caller's sys.argv


if __name__ == "__main__":
    with exit_on_user_error("train"):
        main(parse_opt())
    leave_quickly()  # the work is done and written: skip the interpreter's teardown (utils/shutdown.py)
