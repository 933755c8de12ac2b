"""val.py's and segment/val.py's run from the command line: a weights file of any format and a dataset YAML made
into a model, a loader and the task's evaluator, then the one validation loop (run_validation)."""
from pathlib import Path

from utils import signals
from utils.backend import select_device
from utils.dataset_config import check_dataset
from utils.errors import UserError
from utils.evaluation.detection_steps import DetectionSteps
from utils.evaluation.loop import run_validation
from utils.evaluation.runner import model_names
from utils.inference import load_model
from utils.inference.loading import model_class_count
from utils.log import LOGGER, colorstr
from utils.paths import increment_path


class ClassCountMismatch(UserError, AssertionError):  # ultralytics asserts here: `except AssertionError` still works
    pass


def validate_weights(weights, data, build_loader, build_evaluator, steps=DetectionSteps, model_task="detect",
                     batch_size=32, imgsz=640, task="val", device="", workers=8, single_cls=False, verbose=False,
                     save_txt=False, save_conf=False, save_json=False, project="runs/val", name="exp",
                     exist_ok=False, half=False, dnn=False, plots=True, allow_scripts=False, validation=run_validation,
                     **options):
    """Validate weights on data's split task ('speed': square batches, as for benchmarks and exports).
    build_loader: (path, imgsz, batch_size, stride, single_cls, pad=, rect=, workers=, prefix=, nc=) -> (loader,
    dataset); build_evaluator: evaluator_for_dataset's signature; steps, model_task: the task's loop steps and the
    model kind load_model expects; validation: run_validation or a wrapper of it; options: its keyword arguments
    (thresholds, augment, save_hybrid, the steps' own).
    Returns what run_validation returns; the run folder holds the plots, labels and JSON."""
    device = select_device(device, batch_size=batch_size)
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)  # one line if unwritable
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz, task=model_task)
    pt, half = model.pt, model.fp16
    if not (pt or model.jit):  # exported files hold one input shape: square images one at a time, as ultralytics
        batch_size = 1
        LOGGER.info(f"Forcing --batch-size 1 square inference (1,3,{imgsz},{imgsz}) for non-PyTorch models")
    data = check_dataset(data, allow_scripts=allow_scripts)
    model.eval()
    nc = 1 if single_cls else int(data["nc"])
    ncm = None if single_cls else model_class_count(model)  # a .pt's own count, an export's stored class names
    if ncm is not None and ncm != nc:
        raise ClassCountMismatch(f"{weights} ({ncm} classes) trained on different --data than what you passed "
                                 f"({nc} classes). Pass correct combination of --weights and --data.")
    model.warmup(imgsz=(1 if pt else batch_size, 3, imgsz, imgsz))
    pad, rect = (0.0, False) if task == "speed" else (0.5, pt)  # square batches for benchmarks and exports
    task = task if task in ("train", "val", "test") else "val"
    dataloader = build_loader(data[task], imgsz, batch_size, model.stride, single_cls, pad=pad, rect=rect,
                              workers=workers, prefix=colorstr(f"{task}: "), nc=nc)[0]
    evaluator = build_evaluator(data, model_names(model), save_dir, single_cls=single_cls, plots=plots,
                                verbose=verbose or nc < 50, task=task, save_txt=save_txt, save_conf=save_conf,
                                save_json=save_json, weights=weights)
    signals.describe_on_disk(lambda: f"no metrics were computed; {save_dir} holds what the batches so far wrote")
    results = validation(model, dataloader, evaluator, half=half, steps=steps,
                             speed_shape=(batch_size, 3, imgsz, imgsz), **options)
    s = f"\n{len(list(save_dir.glob('labels/*.txt')))} labels saved to {save_dir / 'labels'}" if save_txt else ""
    LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    return results
