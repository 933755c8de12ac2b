"""build_classification_training(): the TrainingParts of a classify/train.py run, for the same TrainLoop, hooks,
checkpoint writer, run folder, loggers and resume as detection.

What differs from build_training() (detection), as official classify/train.py has it:
* data: an ImageFolder root with train/ and val/ (or test/); the class list is train/'s visible folders, and val/
  is labelled with it by folder name (a folder val/ lacks: a warning; one train/ lacks: one line, see split_classes);
* model: --model, a classification checkpoint (its head resized to the class count), a detection checkpoint cut
  at --cutoff (default 10) into a ClassificationModel, or (beyond official: offline, from scratch) a detection
  model YAML cut the same way; --pretrained False re-initialises every layer, --dropout sets the head's dropout;
* optimizer: --optimizer (Adam by default), --lr0, momentum 0.9, --decay unscaled (no nominal batch);
* schedule: no warmup, no gradient accumulation (a step per batch), lr linear from lr0 to 0.01 lr0 over the epochs;
* loss: cross-entropy with --label-smoothing; validation: top-1/top-5 of the EMA, fitness top-1;
* run folder: opt.yaml only (vars(opt), as official; no hyp.yaml), results.csv with the official columns.
The order of the steps is build_training's (model before optimizer, EMA before DDP wrapping, RNG restored last).
"""
import dataclasses
import os
from pathlib import Path

from models.experimental import attempt_load
from models.tasks import ClassificationModel, Classify
from models.yolo import DetectionModel
from utils.backend import nn
from utils.classify.dataset import ClassificationDataError, find_classes
from utils.classify.folders import missing_class_folders, quoted
from utils.data import EarlyStartLoader
from utils.distributed import DistContext, ddp
from utils.distributed.collectives import main_process_first
from utils.engine.errors import TrainingError
from utils.engine.parts import FastPaths, Precision, RunOptions, TrainingParts, TrainingState
from utils.engine.resume import read_resume_checkpoint, restore_rng, restore_training_state
from utils.engine.run_folder import prepare_run_folder
from utils.engine.schedule import Schedule, set_param_groups
from utils.engine.seeding import process_seed
from utils.log import LOGGER
from utils.plot_jobs import PlotJobs
from utils.precision import training_precision
from utils.tasks.classify import CLASSIFY, LRF
from utils.torch_utils import ModelEMA, set_seed, smart_optimizer

MOMENTUM = 0.9  # official classify/train.py: smart_optimizer(..., momentum=0.9, ...)
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


def classification_model(opt, nc):
    """The model to train from --model (see the module docstring), on the CPU, every parameter trainable."""
    name = str(opt.model)
    path = Path(name)
    check_model_arg(name)
    if path.suffix in (".yaml", ".yml"):  # a detection YAML: the network, randomly initialised, cut at --cutoff
        try:
            model = ClassificationModel(cfg=name, nc=nc, cutoff=opt.cutoff or DEFAULT_CUTOFF)
        except (OSError, ValueError) as e:
            raise TrainingError(f"--model {name}: {e}") from None
    else:
        model = attempt_load(path, device="cpu", fuse=False)
        if isinstance(model, DetectionModel):
            LOGGER.warning("WARNING ⚠️ pass YOLOv5 classifier model with '-cls' suffix, i.e. "
                           "'--model yolov5s-cls.pt'")
            model = ClassificationModel(model=model, nc=nc, cutoff=opt.cutoff or DEFAULT_CUTOFF)
        elif not isinstance(model, ClassificationModel):
            raise TrainingError(f"--model {name} holds a {type(model).__name__}, not a YOLOv5 classification or "
                                "detection model.")
        reshape_classifier_output(model, nc)
    pretrained = str(opt.pretrained).lower() == "true"
    for m in model.modules():
        if not pretrained and hasattr(m, "reset_parameters"):
            m.reset_parameters()
        if isinstance(m, nn.Dropout) and opt.dropout is not None:
            m.p = opt.dropout
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def reshape_classifier_output(model, nc):
    """A Classify head with another class count gets a new linear layer for nc classes (official)."""
    head = model.model[-1]
    if isinstance(head, Classify) and head.linear.out_features != nc:
        head.linear = nn.Linear(head.linear.in_features, nc)
    model.nc = nc


def recorded_options(opt):
    """vars(opt) as plain data: what opt.yaml and the checkpoints' 'opt' hold (official: vars(opt))."""
    out = {}
    for k, v in vars(opt).items():
        if k.startswith("_") or k == "results":
            continue
        out[k] = str(v) if isinstance(v, Path) else v
    return out


def build_classification_training(opt, hyp, device, dist=None, task_plugin=CLASSIFY):
    """The TrainingParts of one classification run. opt: classify/train.py's options (opt.save_dir claimed;
    opt.weights the last.pt to resume when opt.resume); hyp: unused (the flags carry the hyperparameters; kept for
    utils.engine.run.train's signature)."""
    dist = dist or DistContext()
    fast = FastPaths.from_opt(opt)
    set_seed(process_seed(opt.seed, dist), deterministic=True)  # official: seed + 1 + RANK
    root, train_dir, val_dir = dataset_splits(opt.data)
    task = dataclasses.replace(task_plugin, val_split=val_dir.name)  # results.csv's val/loss or test/loss
    names, source = split_classes(train_dir, val_dir)
    nc = len(names)
    hyp = {"lr0": float(opt.lr0), "lrf": LRF, "momentum": MOMENTUM, "weight_decay": float(opt.decay),
           "label_smoothing": float(opt.label_smoothing)}
    recorded = recorded_options(opt)
    run, loggers = prepare_run_folder(opt, hyp, dist, task.results_keys(), settings_files={"opt.yaml": recorded})

    ckpt = read_resume_checkpoint(opt.weights, task.build_model) if opt.resume else None
    if ckpt is not None:
        model = ckpt["model"]
        check_resumed_classes(model, names, opt.weights)
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        with main_process_first(dist):
            model = classification_model(opt, nc)
    model = model.to(device)
    model.names, model.nc = list(names), nc  # official: the train folder's classes, as a list
    if dist.is_main:
        model.info()  # GFLOPs at 640 px, as official model_info prints them
        if opt.verbose:
            LOGGER.info(model)

    batch_size = opt.batch_size
    if batch_size < 1:
        raise TrainingError(f"--batch-size {batch_size}: give a positive batch size (AutoBatch is not supported for "
                            "classification, as official).")
    if dist.distributed and batch_size % dist.world_size:
        raise TrainingError(f"--batch-size {batch_size} must be a multiple of the world size {dist.world_size}: "
                            "it is the total over all processes.")
    optimizer = smart_optimizer(model, opt.optimizer, opt.lr0, MOMENTUM, opt.decay, fused=fast.multi_tensor)
    for g in optimizer.param_groups:  # what a LambdaLR records; the schedule scales it
        g["initial_lr"] = g["lr"]
    amp_dtype, channels_last, scaler = training_precision(device, getattr(opt, "amp", None))

    bs = batch_size // dist.world_size
    workers = max(min((os.cpu_count() or 1) - 1, opt.workers), 0)  # official: min(os.cpu_count() - 1, workers)
    with main_process_first(dist):
        train_loader, dataset = task.build_dataloader(
            train_dir, imgsz=opt.imgsz, batch_size=bs, augment=True, cache=opt.cache, workers=workers,
            shuffle=True, seed=opt.seed, rank=dist.rank if dist.distributed else 0, world_size=dist.world_size,
            classes=names, source=source)
    train_loader = EarlyStartLoader(train_loader)
    val_loader = None
    if dist.is_main:
        val_loader = EarlyStartLoader(task.build_dataloader(val_dir, imgsz=opt.imgsz, batch_size=bs * 2,
                                                            augment=False, cache=opt.cache, workers=workers,
                                                            classes=names, source=source)[0])
    if ckpt is None and not dist.distributed:  # epoch 0's order is settled: its first batches load during set-up
        train_loader.sampler.set_epoch(0)
        train_loader.start()
    if val_loader is not None:
        val_loader.start()
    plots = PlotJobs(processes=None if dist.is_main else False, warm_matplotlib=False)  # its pictures: OpenCV

    ema = ModelEMA(model, fused=fast.multi_tensor) if dist.is_main else None  # ORDER: before DDP wrapping
    state = TrainingState()
    if ckpt is not None:
        state = restore_training_state(ckpt, optimizer, scaler, ema, device, opt.epochs, name=opt.weights)
    # no warmup (warmup_iters -1), one optimizer step per batch (the nominal batch is the batch)
    schedule = Schedule(base_lrs=tuple(g["initial_lr"] for g in optimizer.param_groups), epochs=opt.epochs,
                        lrf=LRF, warmup_iters=-1, warmup_bias_lr=0.0, warmup_momentum=MOMENTUM, momentum=MOMENTUM,
                        batch_size=bs, nominal_batch=bs)
    if ckpt is None or ckpt.get("optimizer") is None:
        set_param_groups(optimizer, schedule.epoch_lrs(state.start_epoch))
    compute_loss = task.build_loss(model, {**hyp, "world_size": dist.world_size}, False)
    model = ddp.wrap_model(model, dist, device, sync_bn=False)
    if dist.is_main:
        LOGGER.info(f"Training {opt.model} on {root} dataset with {nc} classes")
    if ckpt is not None:
        restore_rng(ckpt, name=opt.weights)  # ORDER: last, see restore_rng
    options = RunOptions(workers=workers, nosave=bool(opt.nosave), noplots=bool(getattr(opt, "noplots", False)),
                         patience=0)  # official classification has no early stopping
    data = {"path": str(root), "train": str(train_dir), "val": str(val_dir), "nc": nc,
            "names": dict(enumerate(names))}
    return TrainingParts(
        task=task, model=model, optimizer=optimizer, compute_loss=compute_loss, train_loader=train_loader,
        schedule=schedule, device=device, epochs=opt.epochs, ema=ema, scaler=scaler,
        precision=Precision(dtype=amp_dtype, channels_last=channels_last), dist=dist, imgsz=opt.imgsz, gs=32,
        fast=fast, state=state, options=options, recorded_opt=recorded, hyp=hyp, opt_hyp=hyp, data=data, nc=nc,
        names=list(names), dataset=dataset, val_loader=val_loader, run=run, loggers=loggers, plots=plots)

