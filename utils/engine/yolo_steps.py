"""The YOLO detector trainer's own steps (train.py; segment/train.py uses them too), for the TrainerSteps a task
leaves None: the --hyp file, the data YAML, the model from --cfg / --weights, a stride-multiple image size, the
detection loaders and the loss gains scaled to the head. build_training() calls them in its one order."""
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from utils import backend
from utils.checkpoint.run_options import official_opt
from utils.data import EarlyStartLoader
from utils.dataset_config import check_dataset
from utils.distributed.collectives import main_process_first
from utils.engine.errors import TrainingError
from utils.engine.hyp import load_hyp, scale_hyp
from utils.engine.initial_model import initial_model
from utils.engine.resume import check_resumed_classes
from utils.img_size import check_img_size
from utils.log import colorstr
from utils.tasks.task import TrainData, TrainerSteps, TrainInputs
from utils.torch_utils import de_parallel


@dataclass(frozen=True)
class DetectorInputs(TrainInputs):
    """The flags the detector's steps read besides the build's own (train.py's and segment/train.py's)."""
    cfg: str = ""
    freeze: Any = field(default_factory=lambda: [0])  # layer indices, or [n]: the first n layers
    single_cls: bool = False
    label_smoothing: float = 0.0
    allow_download_scripts: bool = False  # consent: the data YAML's download script may run


def hyperparameters(inputs, hyp):
    return load_hyp(hyp)  # a --hyp path or a resumed run's dict, every key checked


def settings_files(flags, hyp):
    """hyp.yaml, and opt.yaml as official --resume reads it (also every checkpoint's 'opt')."""
    return {"hyp.yaml": hyp, "opt.yaml": official_opt(flags, hyp)}


def read_data(inputs, dist):
    """The data YAML (--allow-download-scripts: its download script may run); --single-cls makes one class."""
    with main_process_first(dist):
        data = check_dataset(inputs.data, allow_scripts=inputs.allow_download_scripts)
    nc = 1 if inputs.single_cls else int(data["nc"])
    names = {0: "item"} if inputs.single_cls and len(data["names"]) != 1 else data["names"]
    return TrainData(data=data, nc=nc, names=names, train=data["train"], val=data["val"])


def start_model(task, inputs, hyp, data, device, ckpt, dist):
    """A resumed run's model (its classes checked against the data's first), or --weights / --cfg, --freeze."""
    if ckpt is not None:  # the same classes as the run being resumed, or one line before anything is trained
        check_resumed_classes(ckpt, data.nc, data.names, inputs.data, name=inputs.weights)
    return initial_model(inputs.weights, inputs.cfg, inputs.freeze, hyp, data.nc, device, ckpt, task.model_class,
                         task.check_pretrained)


def input_size(model, imgsz):
    gs = max(int(model.stride.max()), 32)  # grid size (max stride)
    return check_img_size(imgsz, gs, floor=gs * 2), gs


def loaders(task, inputs, options, hyp, data, imgsz, gs, batch_size, dist):
    """(train loader, train dataset, val loader or None on other ranks). batch_size is the total over ranks."""
    bs = batch_size // dist.world_size
    with main_process_first(dist):  # DDP: local rank 0 scans labels and writes the .cache first; the others read it
        train_loader, dataset = task.build_dataloader(
            data.train, imgsz, bs, gs, options.single_cls, hyp=hyp, augment=True,
            cache=None if inputs.cache == "val" else inputs.cache, rect=options.rect, dist=dist,
            workers=options.workers, image_weights=options.image_weights, quad=options.quad,
            prefix=colorstr("train: "), shuffle=True, seed=inputs.seed, nc=data.nc)  # nc: a class id >= nc stops there
    val_loader = None
    if dist.is_main:
        val_loader = EarlyStartLoader(task.build_dataloader(
            data.val, imgsz, bs * 2, gs, options.single_cls, hyp=hyp, cache=None if options.noval else inputs.cache,
            rect=True, rank=-1, workers=options.workers * 2, pad=0.5, prefix=colorstr("val: "), nc=data.nc)[0])
    return EarlyStartLoader(train_loader), dataset, val_loader


def loss(task, inputs, model, hyp, data, dataset, imgsz, device, fast, dist):
    """The task's loss with the hyp file's gains scaled to the head, classes and image size; the model carries nc,
    hyp, names and the class weights for the EMA and the checkpoints, as official models do."""
    hyp = scale_hyp(hyp, de_parallel(model).model[-1].nl, data.nc, imgsz, inputs.label_smoothing)
    model.nc, model.hyp, model.names = data.nc, hyp, data.names
    weights = task.class_weights(dataset.labels, data.nc)
    model.class_weights = backend.from_numpy(weights).float().to(device) * data.nc
    return task.build_loss(model, hyp, fast.fused_iou), hyp


DETECTOR_STEPS = TrainerSteps(inputs=DetectorInputs, hyperparameters=hyperparameters, settings_files=settings_files,
                              read_data=read_data, start_model=start_model, input_size=input_size, loaders=loaders,
                              loss=loss)


def steps_of(task):
    """The task's trainer steps, the YOLO detector's where it names none."""
    own = task.trainer
    return dataclasses.replace(own, **{f.name: getattr(DETECTOR_STEPS, f.name) for f in dataclasses.fields(own)
                                       if getattr(own, f.name) is None and f.name != "nominal_batch"})
