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

This file parses flags and resolves --resume; the engine (utils/engine/: classify_build.py makes the parts,
TrainLoop runs them with its hooks) trains the CLASSIFY task (utils/tasks/classify.py).
"""
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python classify/train.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("train")

from utils.checkpoint.run_options import CONSENT_OPTIONS, without_consent  # noqa: E402
from utils.cli_flags import (FlagParser, add_amp_flags, add_cache_flag, add_workers_flag, image_size,  # noqa: E402
                             positive_int, run_from_defaults)
from utils.distributed import DistContext, process_group  # noqa: E402
from utils.distributed.launch import training_device  # noqa: E402
from utils.engine.classify_build import (build_classification_training, check_model_arg, dataset_splits,  # noqa: E402
                                         split_classes)
from utils.engine.errors import TrainingError  # noqa: E402
from utils.engine.run import train  # noqa: E402
from utils.engine.saved_options import check_saved_options, read_resumed_checkpoint  # noqa: E402
from utils.engine.seeding import process_seed  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.paths import RunDirError, increment_path  # noqa: E402
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


def resume_opt(opt):
    """The options of the classification run being resumed, from its last.pt, with --weights pointing at it."""
    last, ckpt, saved = read_resumed_checkpoint(opt)
    model = ckpt.get("model") if isinstance(ckpt, dict) else None
    kind = str(model.get("class", "")) if hasattr(model, "get") else ""
    if not isinstance(saved, dict) or ckpt.get("optimizer") is None or not kind.endswith("ClassificationModel"):
        raise TrainingError(f"--resume: {last} is a finished (stripped) or foreign checkpoint; it cannot be resumed. "
                            "Use it as --model to start a new run.")
    saved = without_consent(saved)
    new = parse_opt(True, args=[])
    check_saved_options({k: v for k, v in saved.items() if k != "optimizer"}, vars(new), last)  # + RMSProp:
    if saved.get("optimizer") not in OPTIMIZERS:
        raise TrainingError(f"--resume: {last}: its saved option optimizer={saved.get('optimizer')!r} is not one of "
                            f"{', '.join(OPTIMIZERS)}; the checkpoint was edited or damaged.")
    vars(new).update({k: v for k, v in saved.items() if k in vars(new)})
    for k in CONSENT_OPTIONS:
        if hasattr(opt, k):
            setattr(new, k, getattr(opt, k))
    new.resume, new.weights, new.save_dir = True, str(last), str(last.parent.parent)
    LOGGER.info(f"Resuming from {last}")
    return new


def main(opt):
    dist = DistContext.from_env()
    process_seed(opt.seed, dist)  # a --seed numpy cannot take stops here, before any folder is made
    if opt.resume:
        opt = resume_opt(opt)
    else:
        opt.data, opt.model, opt.project = str(opt.data), str(opt.model), str(opt.project)
        opt.weights = ""
        split_classes(*dataset_splits(opt.data)[1:])  # bad --data or --model: one line, before any run folder
        check_model_arg(opt.model)
        try:  # making the folder is the claim; only rank 0 writes to it
            opt.save_dir = str(increment_path(Path(opt.project) / opt.name, exist_ok=opt.exist_ok,
                                              mkdir=dist.is_main))
        except RunDirError as e:
            raise TrainingError(str(e)) from e
        opt.resume = False
    # the launch checks read detection's flags too: classification has no SyncBN, --evolve or --image-weights
    launch = SimpleNamespace(**vars(opt), sync_bn=False, evolve=None, image_weights=False)
    if opt.batch_size == -1:
        raise TrainingError("--batch-size -1: AutoBatch is not supported for classification (as official); give a "
                            "batch size.")
    device = training_device(launch, dist)
    process_group.start(dist, device)
    if dist.distributed:
        signals.on_stop(process_group.finish)
    results = train(None, opt, device, dist, task_plugin=CLASSIFY, build=build_classification_training)
    process_group.finish()
    if dist.is_main:
        best = Path(opt.save_dir) / "weights" / "best.pt"
        LOGGER.info(f"\nPredict:         python classify/predict.py --weights {best} --source im.jpg"
                    f"\nValidate:        python classify/val.py --weights {best} --data {opt.data}"
                    f"\nExport:          python export.py --weights {best} --include onnx")
    return results


def run(**kwargs):
    """Python entry point: run(data='../datasets/mnist', imgsz=64, model='yolov5n.yaml', epochs=3). Returns opt,
    with opt.results the final (top1, top5, val loss)."""
    return run_from_defaults(main, parse_opt, kwargs)  # never the caller's sys.argv


if __name__ == "__main__":
    with exit_on_user_error("train"):
        main(parse_opt())
    leave_quickly()
