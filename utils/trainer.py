"""The training loop behind train.py, split into small steps: set-up (run folder, data, model, optimizer, resume),
one epoch, one optimizer step, validation, checkpointing, the final evaluation.

Behaviour follows the official YOLOv5 trainer: nominal batch 64 with gradient accumulation and weight-decay
scaling, warmup of lr (bias group from warmup_bias_lr) and momentum by np.interp, linear or cosine lr lambda,
loss gains scaled for image size, classes and levels, ModelEMA, gradient clipping at 10, AMP on CUDA under
PyTorch, fitness = 0.1 mAP50 + 0.9 mAP50-95, early stopping, last.pt every epoch and best.pt on improvement.

Checkpoints are official ultralytics ones (utils/checkpoint/training.py): model and EMA in fp16, the optimizer in
PyTorch's layout, opt with hyp inline. Exact resume: last.pt also holds fp32 copies of model and EMA, the python/numpy/
framework RNG states taken after the epoch's validation, last_opt_step, maps and best_epoch (the lr schedule is a
pure function of the epoch), so that with --workers 0 a resumed run replays the remaining epochs bit for bit. An
official last.pt resumes too, from its fp16 weights and without RNG states.
"""
import math
import random
import time
from functools import partial
from pathlib import Path

import numpy as np
import yaml

from utils import backend, signals
from utils.backend import F
from utils.distributed import DistContext
from utils.distributed.collectives import broadcast_flag, main_process_first
from utils.errors import UserError
from utils.general import LOGGER, ROOT, check_img_size, colorstr, find_repo_file
from utils.loggers import Loggers
from utils.loss_readback import LossReadback
from utils.metrics import fitness
from utils.torch_utils import EarlyStopping, ModelEMA, de_parallel, intersect_dicts, set_seed, smart_optimizer

NBS = 64  # nominal batch size: gradients are accumulated up to it, weight decay is scaled to it


class TrainingError(UserError, RuntimeError):
    """A failure whose message is meant for the user (train.py prints it and exits 1, no traceback)."""


class NonFiniteLossError(TrainingError):
    def __init__(self, epoch, iteration, loss_items):
        super().__init__(f"Non-finite loss at epoch {epoch}, iteration {iteration} (box, obj, cls = {loss_items}); "
                         "training stopped, last.pt is left as it was after the previous epoch. Lower --hyp lr0, "
                         "check the labels, or resume from last.pt.")
        self.epoch, self.iteration = epoch, iteration


# ----------------------------------------------------------------------------------------------------------------
# Pure helpers (unit-tested)
def one_cycle(y1=0.0, y2=1.0, steps=100):
    """Cosine ramp from y1 to y2 over `steps` (https://arxiv.org/pdf/1812.01187.pdf)."""
    return lambda x: ((1 - math.cos(x * math.pi / steps)) / 2) * (y2 - y1) + y1


def lr_lambda(epochs, lrf, cos_lr=False):
    """Learning-rate multiplier per epoch: linear from 1 to lrf, or cosine (--cos-lr)."""
    if cos_lr:
        return one_cycle(1, lrf, epochs)
    return lambda x: (1 - x / epochs) * (1.0 - lrf) + lrf


def scale_hyp(hyp, nl, nc, imgsz, label_smoothing=0.0):
    """Loss gains in hyp files are tuned for 3 levels, 80 classes and 640 px: rescale them (returns a copy)."""
    hyp = dict(hyp)
    hyp["box"] *= 3 / nl
    hyp["cls"] *= nc / 80 * 3 / nl
    hyp["obj"] *= (imgsz / 640) ** 2 * 3 / nl
    hyp["label_smoothing"] = label_smoothing
    return hyp


def labels_to_class_weights(labels, nc=80):
    """Inverse class frequency weights (normalised to sum 1) from a list of (n, 5) label arrays."""
    if not len(labels) or labels[0] is None:
        return np.ones(nc) / nc
    lab = np.concatenate([np.asarray(l).reshape(-1, 5) for l in labels], 0)
    classes = lab[:, 0].astype(int)
    weights = np.bincount(classes, minlength=nc).astype(np.float64)
    weights[weights == 0] = 1  # absent classes: weight as if seen once
    weights = 1 / weights
    return weights / weights.sum()


def labels_to_image_weights(labels, nc=80, class_weights=np.ones(80)):
    """Per-image sampling weight: sum of its labels' class weights (--image-weights)."""
    counts = np.array([np.bincount(np.asarray(l)[:, 0].astype(int), minlength=nc) for l in labels])
    return (class_weights.reshape(1, nc) * counts).sum(1)


def _fitness(results):
    """0.1 mAP50 + 0.9 mAP50-95 of one results tuple (P, R, mAP50, mAP50-95, ...)."""
    return float(fitness(np.asarray(results, dtype=np.float64)))


def save_ckpt(ckpt, path):
    """Atomic save with a clear message for a full disk or an unwritable folder."""
    from utils.checkpoint import save_checkpoint
    try:
        save_checkpoint(ckpt, path)
    except OSError as e:
        raise TrainingError(f"Could not write checkpoint {path}: {e.strerror or e} "
                            "(disk full or folder not writable?); the previous checkpoint is unchanged.") from e


def strip_optimizer(f="best.pt", s=""):
    """The official final checkpoint (utils/checkpoint/training.py), saved with save_ckpt's clear disk errors."""
    from utils.checkpoint.training import strip_optimizer as strip
    strip(f, s, save=save_ckpt)


# ----------------------------------------------------------------------------------------------------------------
class Trainer:
    """Holds the training state; fit() runs it. Only rank 0 (or the single process) validates, logs and saves.
    dist: the job's DistContext (train.py reads it once); a single process by default."""

    def __init__(self, hyp, opt, device, dist=None):
        self.opt, self.device = opt, device
        self.dist = dist or DistContext()
        self.world_size = self.dist.world_size
        self.main = self.dist.is_main
        self.hyp = self._load_hyp(hyp)
        self.opt_hyp = dict(self.hyp)  # as loaded: what opt.yaml and checkpoints record (official resume reads it)
        self.epochs = opt.epochs
        self.start_epoch, self.best_fitness, self.best_epoch = 0, 0.0, 0
        self.last_opt_step = -1
        self.results = (0, 0, 0, 0, 0, 0, 0)  # P, R, mAP50, mAP50-95, val box, obj, cls
        self.ckpt = None

    # ---------------------------------------------------------------------------------------------------- set-up
    @staticmethod
    def _load_hyp(hyp):
        if isinstance(hyp, (str, Path)):  # a path, or a bare name found in data/hyps/ ('hyp.scratch-high.yaml')
            with open(find_repo_file(hyp, what="--hyp", prefer=(ROOT / "data" / "hyps",)), errors="ignore") as f:
                hyp = yaml.safe_load(f)
        return dict(hyp)

    def setup_run_dir(self):
        opt = self.opt
        self.save_dir = Path(opt.save_dir)
        self.wdir = self.save_dir / "weights"
        self.last, self.best = self.wdir / "last.pt", self.wdir / "best.pt"
        signals.describe_on_disk(partial(signals.checkpoint_status, self.last) if self.main else None)  # DDP: rank 0
        if not self.main:
            return
        try:
            self.wdir.mkdir(parents=True, exist_ok=True)
            probe = self.save_dir / ".write_test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as e:
            raise TrainingError(f"Run folder {self.save_dir} is not writable: {e.strerror or e}. "
                                "Choose another --project/--name or free some disk space.") from e
        if not opt.resume:  # a new run in an existing folder (--exist-ok) starts its own results.csv
            (self.save_dir / "results.csv").unlink(missing_ok=True)
        LOGGER.info(colorstr("hyperparameters: ") + ", ".join(f"{k}={v}" for k, v in self.hyp.items()))
        if not opt.evolve:
            with open(self.save_dir / "hyp.yaml", "w") as f:
                yaml.safe_dump(self.hyp, f, sort_keys=False)
            from utils.checkpoint.run_options import official_opt
            with open(self.save_dir / "opt.yaml", "w") as f:  # official train.py --resume reads this file
                yaml.safe_dump(official_opt(opt, self.opt_hyp), f, sort_keys=False)
        self.loggers = Loggers(self.save_dir, opt, self.hyp) if not opt.evolve else None

    def setup_data(self):
        from utils.dataset_config import check_dataset
        opt = self.opt
        with main_process_first(self.dist):
            self.data = check_dataset(opt.data)
        self.nc = 1 if opt.single_cls else int(self.data["nc"])
        names = self.data["names"]
        self.names = {0: "item"} if opt.single_cls and len(names) != 1 else names
        self.is_coco = str(self.data.get("val", "")).endswith("coco/val2017.txt")

    def setup_model(self):
        opt, hyp = self.opt, self.hyp
        from models.yolo import Model
        weights = str(opt.weights or "")
        if opt.resume:
            from utils.checkpoint import load_checkpoint
            self.ckpt = load_checkpoint(weights, map_location="cpu")
            model = self.ckpt["model"]  # exact fp32 weights from this project's files, fp16 ones from official files
        elif weights:
            model = self._pretrained_model(weights)
        else:
            model = Model(opt.cfg, ch=3, nc=self.nc, anchors=hyp.get("anchors"))
        self.model = model.to(self.device)
        self._freeze(opt.freeze)
        self.gs = max(int(self.model.stride.max()), 32)
        self.imgsz = check_img_size(opt.imgsz, self.gs, floor=self.gs * 2)
        self.nl = de_parallel(self.model).model[-1].nl

    def _pretrained_model(self, weights):
        """A model from --cfg (or the checkpoint's yaml) with every matching pretrained tensor transferred."""
        from models.yolo import Model
        from utils.checkpoint import load_any
        opt, hyp = self.opt, self.hyp
        if not Path(weights).is_file():
            raise TrainingError(f"--weights {weights} not found (this project downloads nothing): give a path to a "
                                "yolov5*.pt file, e.g. ../shared/weights/yolov5n.pt, or --weights '' to train from scratch.")
        ck = load_any(weights)
        rec = ck.get("model") or ck.get("ema")
        model = Model(opt.cfg or rec["yaml"], ch=3, nc=self.nc, anchors=hyp.get("anchors"))
        exclude = ["anchor"] if (opt.cfg or hyp.get("anchors")) else []  # keep the yaml's/hyp's anchors
        own = model.state_dict()
        csd = {k: backend.from_numpy(np.asarray(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f" else v)
               for k, v in rec["state_dict"].items()}
        csd = intersect_dicts(csd, own, exclude=exclude)
        own.update({k: v.to(own[k].dtype) for k, v in csd.items()})
        model.load_state_dict(own)
        LOGGER.info(f"Transferred {len(csd)}/{len(model.state_dict())} items from {weights}")
        return model

    def _freeze(self, freeze):
        """--freeze 10 freezes layers 0-9 (the backbone); --freeze 0 1 2 freezes those layers."""
        freeze = list(freeze or [0])
        names = [f"model.{x}." for x in (freeze if len(freeze) > 1 else range(freeze[0]))]
        for k, v in self.model.named_parameters():
            v.requires_grad_(not any(x in k for x in names))
            if names and any(x in k for x in names):
                LOGGER.info(f"freezing {k}")

    def setup_optimizer(self):
        opt, hyp = self.opt, self.hyp
        self.batch_size = opt.batch_size
        if self.batch_size == -1:  # AutoBatch; train.py refuses -1 under DDP, as the official trainer does
            from utils.autobatch import check_train_batch_size
            self.batch_size = check_train_batch_size(self.model, self.imgsz, amp=backend.has_amp(self.device))
        self.accumulate = max(round(NBS / self.batch_size), 1)
        hyp["weight_decay"] *= self.batch_size * self.accumulate / NBS  # decay per nominal batch, not per step
        self.optimizer = smart_optimizer(self.model, opt.optimizer, hyp["lr0"], hyp["momentum"],
                                         hyp["weight_decay"], fused=opt.multi_tensor_optimizer)
        self.lf = lr_lambda(self.epochs, hyp["lrf"], opt.cos_lr)
        for g in self.optimizer.param_groups:  # what a LambdaLR would record: the schedule scales initial_lr
            g["initial_lr"] = g["lr"]
            g["lr"] = g["initial_lr"] * self.lf(0)

    def set_epoch_lr(self, epoch):
        """The scheduler step: lr = initial_lr * lf(epoch). Kept as a pure function of the epoch so resume needs
        no scheduler state beyond the epoch number."""
        for g in self.optimizer.param_groups:
            g["lr"] = g["initial_lr"] * self.lf(epoch)

    def resume_state(self):
        """Restore optimizer, EMA, best fitness and epoch from the loaded last.pt (RNG states come right before
        the first resumed epoch, in fit())."""
        from utils.checkpoint.training import best_fitness_value
        ck = self.ckpt
        if ck.get("optimizer") is not None:
            from utils.checkpoint import optimizer_state_for_backend
            self.optimizer.load_state_dict(optimizer_state_for_backend(ck["optimizer"]))
        if ck.get("scaler"):
            self.scaler.load_state_dict(ck["scaler"])
        if self.ema is not None and ck.get("ema") is not None:
            self.ema.ema.load_state_dict(ck["ema"].to(self.device).state_dict())
            self.ema.updates = int(ck["updates"])
        self.best_fitness = best_fitness_value(ck.get("best_fitness"))
        self.best_epoch = int(ck.get("best_epoch") or 0)
        self.last_opt_step = int(ck.get("last_opt_step", -1) if ck.get("last_opt_step") is not None else -1)
        self.start_epoch = int(ck["epoch"]) + 1
        if self.start_epoch >= self.epochs:
            raise TrainingError(f"{self.opt.weights} has finished its {self.epochs} epochs; nothing to resume. "
                                "Start a new run with --weights pointing at it to train more.")
        LOGGER.info(f"Resuming training from {self.opt.weights} from epoch {self.start_epoch} to {self.epochs} "
                    "total epochs")
        self.set_epoch_lr(self.start_epoch) if ck.get("optimizer") is None else None

    def setup_precision(self):
        """--amp/--no-amp: autocast dtype, input layout and loss scaler (utils/precision.py)."""
        from utils.precision import training_precision
        self.amp_dtype, self.channels_last, self.scaler = training_precision(self.device, getattr(self.opt, "amp", None))
        self.amp = self.amp_dtype is not None

    def setup_loaders(self):
        from utils.dataloaders import create_dataloader
        opt, hyp = self.opt, self.hyp
        if self.world_size > 1 and self.batch_size % self.world_size:
            raise TrainingError(f"--batch-size {self.batch_size} must be a multiple of the world size "
                                f"{self.world_size}: it is the total over all processes.")
        bs = self.batch_size // self.world_size
        with main_process_first(self.dist):  # DDP: local rank 0 scans labels and writes the .cache first; the
            self.train_loader, self.dataset = create_dataloader(  # others then read it
                self.data["train"], self.imgsz, bs, self.gs, opt.single_cls, hyp=hyp, augment=True,
                cache=None if opt.cache == "val" else opt.cache, rect=opt.rect, dist=self.dist,
                workers=opt.workers, image_weights=opt.image_weights, quad=opt.quad, prefix=colorstr("train: "),
                shuffle=True, seed=opt.seed, nc=self.nc)  # nc: a class id >= nc stops naming the file and line
        labels = np.concatenate([np.asarray(l).reshape(-1, 5) for l in self.dataset.labels], 0)
        self.nb = len(self.train_loader)
        if self.main:
            self.val_loader = create_dataloader(
                self.data["val"], self.imgsz, bs * 2, self.gs, opt.single_cls, hyp=hyp,
                cache=None if opt.noval else opt.cache, rect=True, rank=-1, workers=opt.workers * 2, pad=0.5,
                prefix=colorstr("val: "), nc=self.nc)[0]
            if not opt.resume:
                if not opt.noautoanchor:
                    from utils.autoanchor import check_anchors
                    check_anchors(self.dataset, model=self.model, thr=hyp["anchor_t"], imgsz=self.imgsz)
                if not opt.noplots:
                    self._plot_labels(labels)
        return labels

    def _plot_labels(self, labels):
        try:
            from utils.plots import plot_labels
            plot_labels(labels, self.names, self.save_dir)
        except Exception as e:  # plots never stop a training
            LOGGER.warning(f"WARNING ⚠️ labels.jpg not plotted: {e}")

    def setup_loss(self):
        from utils.loss import ComputeLoss
        hyp = self.hyp = scale_hyp(self.hyp, self.nl, self.nc, self.imgsz, self.opt.label_smoothing)
        m = de_parallel(self.model)
        m.nc, m.hyp, m.names = self.nc, hyp, self.names
        m.class_weights = backend.from_numpy(labels_to_class_weights(self.dataset.labels, self.nc)).float().to(
            self.device) * self.nc
        self.compute_loss = ComputeLoss(m, fused_iou=self.opt.bbox_iou_optim)

    def wrap_ddp(self):
        """SyncBatchNorm (CUDA only) and DistributedDataParallel when launched with several processes
        (utils/distributed/ddp.py; --sync-bn on CPU was refused in train.py before any work), then the outside
        observer YOLO_DDP_PROBE names, if any (utils/distributed/probe.py)."""
        from utils.distributed import ddp, probe
        self.model = ddp.wrap_model(self.model, self.dist, self.device, sync_bn=self.opt.sync_bn)
        probe.attach(self.model, self.train_loader, self.dist)

    def setup(self):
        opt = self.opt
        set_seed(opt.seed + 1 + self.dist.rank, deterministic=True)
        self.setup_run_dir()
        self.setup_data()
        self.setup_model()
        self.setup_optimizer()
        self.setup_precision()
        self.setup_loaders()
        # The EMA starts from the model as AutoAnchor left it (so it never averages stale anchors in).
        # EMA before wrap_ddp: OneFlow's DDP puts collective hooks on the module itself, so a copy made after it
        # would broadcast buffers in every forward of rank 0's validation, which the other ranks never join (hang).
        self.ema = ModelEMA(self.model, fused=opt.multi_tensor_optimizer) if self.main else None
        if self.ckpt is not None:
            self.resume_state()
        self.setup_loss()
        self.wrap_ddp()
        self.stopper = EarlyStopping(patience=opt.patience)
        self.stopper.best_fitness, self.stopper.best_epoch = self.best_fitness, self.best_epoch
        self.maps = np.zeros(self.nc)
        if self.ckpt is not None and self.ckpt.get("maps") is not None:
            self.maps = np.asarray(self.ckpt["maps"], dtype=np.float64)
        if self.ckpt is not None and self.main:
            self.loggers.truncate_csv(self.start_epoch)  # drop rows of an epoch whose checkpoint never landed

    # ---------------------------------------------------------------------------------------------------- training
    def warmup(self, ni, epoch):
        """Ramp lr (bias group from warmup_bias_lr down, others from 0 up), momentum and accumulation over nw."""
        hyp, xi = self.hyp, [0, self.nw]
        self.accumulate = max(1, int(np.interp(ni, xi, [1, NBS / self.batch_size]).round()))
        for j, g in enumerate(self.optimizer.param_groups):
            g["lr"] = float(np.interp(ni, xi, [hyp["warmup_bias_lr"] if j == 0 else 0.0,
                                               g["initial_lr"] * self.lf(epoch)]))
            if "momentum" in g:
                g["momentum"] = float(np.interp(ni, xi, [hyp["warmup_momentum"], hyp["momentum"]]))

    def multi_scale(self, imgs):
        """--multi-scale: resize the batch to a random size in [0.5, 1.5] x imgsz (multiple of the stride)."""
        sz = random.randrange(int(self.imgsz * 0.5), int(self.imgsz * 1.5) + self.gs) // self.gs * self.gs
        sf = sz / max(imgs.shape[2:])
        if sf != 1:
            ns = [math.ceil(x * sf / self.gs) * self.gs for x in imgs.shape[2:]]
            imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)
        return imgs

    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        backend.clip_grad_norm_(self.model.parameters(), 10.0, fused=getattr(self.opt, "multi_tensor_optimizer", False))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        if self.ema is not None:
            self.ema.update(self.model)

    def loss_readback(self):
        if getattr(self, "_readback", None) is None:
            self._readback = LossReadback(self.device)
        return self._readback

    def train_step(self, imgs, targets, epoch, i):
        """Forward, loss, backward and (every `accumulate` iterations) an optimizer step. Returns the epoch's mean
        loss items when this step read them back to the host (see utils/loss_readback.py), else None."""
        ni = i + self.nb * epoch  # integrated batch count since the start of training
        imgs = backend.to_device(imgs, self.device).float() / 255
        if getattr(self, "channels_last", False):
            imgs = backend.to_channels_last(imgs)
        if ni <= self.nw:
            self.warmup(ni, epoch)
        if self.opt.multi_scale:
            imgs = self.multi_scale(imgs)
        with backend.autocast(self.device, enabled=self.amp, dtype=getattr(self, "amp_dtype", None)):
            pred = self.model(imgs)
            loss, loss_items = self.compute_loss(pred, backend.to_device(targets, self.device))
        if self.world_size > 1:
            loss = loss * self.world_size  # DDP averages gradients over ranks; the loss is a per-rank sum
        if self.opt.quad:
            loss = loss * 4.0
        readback, mean = self.loss_readback(), None
        readback.add(i, loss_items, loss)  # on the device
        if readback.due(i, self.nb):  # SYNC: the host waits for the device, every `interval` steps only
            bad = readback.read()
            if bad is not None:  # the first non-finite step, exactly, even if it was a few steps ago
                raise NonFiniteLossError(epoch, *bad)
            mean = readback.mean
        self.scaler.scale(loss).backward()
        if ni - self.last_opt_step >= self.accumulate:
            self.optimizer_step()
            self.last_opt_step = ni
        return mean, imgs

    def train_epoch(self, epoch):
        from tqdm import tqdm
        self.model.train()
        if self.opt.image_weights:
            cw = labels_to_class_weights(self.dataset.labels, self.nc) * self.nc * (1 - self.maps) ** 2 / self.nc
            iw = labels_to_image_weights(self.dataset.labels, nc=self.nc, class_weights=cw)
            self.dataset.indices = random.choices(range(len(self.dataset.labels)), weights=iw, k=len(iw))
        sampler = getattr(self.train_loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)  # a fresh, epoch-seeded shuffle: the same order after a resume
        mloss = np.zeros(3)
        self.loss_readback().reset()
        self.optimizer.zero_grad()
        pbar = enumerate(self.train_loader)
        if self.main:
            LOGGER.info(("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "obj_loss", "cls_loss",
                                               "Instances", "Size"))
            pbar = tqdm(pbar, total=self.nb, bar_format="{l_bar}{bar:10}{r_bar}")
        for i, (imgs, targets, paths, _) in pbar:
            mean, imgs = self.train_step(imgs, targets, epoch, i)
            signals.check()  # a safe point: Ctrl-C / SIGTERM stop here (and between validation batches)
            if mean is not None:
                mloss = mean
            if self.main:
                if mean is not None:
                    mem = f"{backend.memory_reserved_gb(self.device):.3g}G"
                    pbar.set_description(("%11s" * 2 + "%11.4g" * 5) % (f"{epoch}/{self.epochs - 1}", mem, *mloss,
                                                                         targets.shape[0], imgs.shape[-1]))
                ni = i + self.nb * epoch
                if ni < 3 and not self.opt.noplots:
                    self._plot_batch(imgs, targets, paths, self.save_dir / f"train_batch{ni}.jpg")
        return mloss

    def _plot_batch(self, imgs, targets, paths, f):
        try:
            from utils.plots import plot_images
            plot_images(imgs, targets, paths, f)
        except Exception as e:
            LOGGER.warning(f"WARNING ⚠️ {f.name} not plotted: {e}")

    # ---------------------------------------------------------------------------------------------------- validation
    def validate(self, model, plots=False, **kw):
        from utils.evaluation import validate_model
        half = self.amp and backend.is_cuda(self.device)  # CPU bf16 autocast trains in fp32 weights: validate so
        results, maps, _ = validate_model(model, self.val_loader, self.data, single_cls=self.opt.single_cls,
                                          half=half, compute_loss=self.compute_loss, save_dir=self.save_dir,
                                          plots=plots, **kw)  # leaves the model in fp32, where the EMA averages
        return tuple(float(x) for x in results), np.asarray(maps, dtype=np.float64)

    # ---------------------------------------------------------------------------------------------------- saving
    def checkpoint(self, epoch):
        """The ultralytics checkpoint and this project's exact-resume state (utils/checkpoint/training.py)."""
        from utils.checkpoint.training import get_rng_states, training_checkpoint
        extra = {"best_epoch": self.best_epoch, "scaler": self.scaler.state_dict(), "last_opt_step": self.last_opt_step,
                 "maps": self.maps, "rng": get_rng_states(), "hyp": self.hyp, "names": self.names, "nc": self.nc}
        return training_checkpoint(epoch, de_parallel(self.model), self.ema, self.optimizer, self.opt, self.opt_hyp,
                                   self.best_fitness, extra)

    def save(self, epoch, fi):
        ckpt = self.checkpoint(epoch)
        save_ckpt(ckpt, self.last)
        if self.best_fitness == fi:
            save_ckpt(ckpt, self.best)
        if self.opt.save_period > 0 and epoch % self.opt.save_period == 0:
            save_ckpt(ckpt, self.wdir / f"epoch{epoch}.pt")

    # ---------------------------------------------------------------------------------------------------- the loop
    def end_epoch(self, epoch, mloss, lr):
        """Validate (rank 0), log a results.csv row, save checkpoints. Returns the early-stop decision."""
        opt = self.opt
        final_epoch = (epoch + 1 == self.epochs) or self.stopper.possible_stop
        self.ema.update_attr(de_parallel(self.model), include=["yaml", "nc", "hyp", "names", "stride", "class_weights"])
        if not opt.noval or final_epoch:
            self.results, self.maps = self.validate(self.ema.ema)
        fi = _fitness(self.results)
        stop = self.stopper(epoch=epoch, fitness=fi)
        if fi > self.best_fitness:
            self.best_fitness, self.best_epoch = fi, epoch
        if self.loggers is not None:
            self.loggers.on_fit_epoch_end(list(mloss) + list(self.results) + lr, epoch)
        if (not opt.nosave) or (final_epoch and not opt.evolve):
            self.save(epoch, fi)
        return stop

    def fit(self):
        self.setup()
        opt = self.opt
        # Warmup iterations as the official trainer counts them: at least 100, even for warmup_epochs 0.
        self.nw = max(round(self.hyp["warmup_epochs"] * self.nb), 100)
        if self.ckpt is not None and self.ckpt.get("rng") is not None:
            from utils.checkpoint.training import set_rng_states
            set_rng_states(self.ckpt["rng"])  # last: set-up above consumed random numbers the first run also drew
        self.ckpt = None
        t0 = time.time()
        if self.main:
            LOGGER.info(f"Image sizes {self.imgsz} train, {self.imgsz} val\n"
                        f"Using {getattr(self.train_loader, 'num_workers', opt.workers)} dataloader workers\n"
                        f"Logging results to {colorstr('bold', self.save_dir)}\nStarting training for "
                        f"{self.epochs} epochs...")
        for epoch in range(self.start_epoch, self.epochs):
            signals.check()  # a stop during set-up or after the last save lands here
            mloss = self.train_epoch(epoch)
            lr = [float(g["lr"]) for g in self.optimizer.param_groups]
            self.set_epoch_lr(epoch + 1)
            stop = self.end_epoch(epoch, mloss, lr) if self.main else False
            if broadcast_flag(self.dist, stop, self.device):  # every rank follows rank 0's early-stop decision
                break
        if self.main:
            LOGGER.info(f"\n{epoch - self.start_epoch + 1} epochs completed in {(time.time() - t0) / 3600:.3f} hours.")
            self.final_eval()
        return self.results

    def final_eval(self):
        """Strip the optimizer from last.pt and best.pt; validate best.pt with plots and per-class figures."""
        opt = self.opt
        for f in (self.last, self.best):
            signals.check()
            if f.exists():
                strip_optimizer(f)
                if f is self.best and not opt.evolve:
                    from models.experimental import attempt_load
                    LOGGER.info(f"\nValidating {f}...")
                    model = attempt_load(f, self.device, fuse=True)
                    self.results, _ = self.validate(model, plots=not opt.noplots, verbose=True,
                                                    iou_thres=0.65 if self.is_coco else 0.60,
                                                    save_json=self.is_coco)
        if self.loggers is not None:
            self.loggers.on_train_end(plots=not opt.noplots)
        LOGGER.info(f"Results saved to {colorstr('bold', self.save_dir)}")


def train(hyp, opt, device, dist=None):
    """Train once (dist: the job's DistContext, a single process by default); returns the final
    (P, R, mAP50, mAP50-95, val box, obj, cls)."""
    return Trainer(hyp, opt, device, dist).fit()
