"""Train a YOLOv5 segmentation model on a polygon-label dataset, on OneFlow or PyTorch (YOLO_BACKEND=oneflow|torch):
the flags and defaults of ultralytics/yolov5's segment/train.py, on the same engine as train.py (the SEGMENT task of
utils/tasks/segment.py: masks in the batches, the box + mask loss, box and mask metrics, results.csv's official
segmentation columns, best.pt by 0.1 mAP50 + 0.9 mAP50-95 of boxes and masks).

Usage:
    $ python segment/train.py --data coco128-seg.yaml --weights yolov5s-seg.pt --img 640
    $ python segment/train.py --data coco128-seg.yaml --cfg yolov5n-seg.yaml --weights '' --img 320 --epochs 3
    $ python segment/train.py --resume                 # continue the most recent runs/train-seg run
DDP as train.py (python -m torch.distributed.run / oneflow.distributed.launch --nproc_per_node N segment/train.py).

Beyond official: train.py's flags (--bbox_iou_optim, --multi_tensor_optimizer, --amp/--no-amp, --evolve_population,
--resume_evolve...). --evolve N runs train.py's search with the segmentation columns and fitness (runs/evolve-seg).
Not here: --quad (refused in one line: official segment/train.py --quad uses detection's quad collate, which cannot
take the masks, and fails on its first batch).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ROOT first: `import train` below is the detection trainer at ROOT, not this file (Python puts the folder of the
# script it runs first on sys.path)
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))

from utils import plot_jobs, signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("train")
    plot_jobs.fork_early(sys.argv[1:])  # the plot helpers, while this process is small (utils/plot_jobs.py)

import train as detection_train  # noqa: E402  (the flags and new-run checks, shared with train.py)
from utils.cli_flags import run_from_defaults  # noqa: E402
from utils.engine import run as run_main  # noqa: E402  (the one main() of the training scripts)
from utils.engine.errors import TrainingError  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.tasks.segment import segment_task  # noqa: E402


def parse_opt(known=False, args=None):
    parser = detection_train.make_parser()
    parser.set_defaults(weights=str(ROOT / "yolov5s-seg.pt"), data=str(ROOT / "data/coco128-seg.yaml"),
                        project=str(ROOT / "runs/train-seg"))
    # Instance segmentation arguments (official)
    parser.add_argument("--mask-ratio", type=int, default=4, help="Downsample the truth masks to save memory")
    parser.add_argument("--no-overlap", action="store_true", help="Overlap masks train faster at slightly less mAP")
    return parser.parse_known_args(args)[0] if known else parser.parse_args(args)


def task_for(opt):
    """The SEGMENT task of these options (a resumed run's are its last.pt's)."""
    ratio = int(opt.mask_ratio)  # a resumed detection last.pt lacks it: parse_opt's default filled it in
    if ratio < 1:
        raise TrainingError(f"--mask-ratio {ratio}: give a downsample ratio of 1 or more (official default 4).")
    return segment_task(mask_ratio=ratio, overlap=not opt.no_overlap)


def main(opt, callbacks=None):
    """Train, or with --evolve search the hyperparameters as official segment/train.py (runs/evolve-seg; evolve.csv
    with the box and mask metrics and val losses, rows ranked by the segmentation fitness). callbacks: a
    utils.callbacks.Callbacks called at the training events."""
    if opt.quad:  # before the run folder is made
        raise TrainingError("--quad is not available for segmentation (official segment/train.py --quad fails on its "
                            "first batch: detection's quad collate cannot take the masks); train without --quad.")
    return run_main.main(opt, detection_train.script(parse=parse_opt, task_for=task_for, name="segment/train.py",
                                                     evolve_project=ROOT / "runs/evolve-seg"), callbacks=callbacks)


def run(**kwargs):
    """Python entry point: run(data='coco128-seg.yaml', imgsz=320, weights='yolov5n-seg.pt', epochs=3). Returns opt,
    with opt.results the final (box P, R, mAP50, mAP50-95, mask P, R, mAP50, mAP50-95, val box, seg, obj, cls)."""
    return run_from_defaults(main, parse_opt, kwargs)  # never the caller's sys.argv


if __name__ == "__main__":
    with exit_on_user_error("train"):
        main(parse_opt())
    leave_quickly()
