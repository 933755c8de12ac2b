"""Resume: the state a last.pt carries put back into a freshly built run (the file is read by utils/checkpoint/).

This project's last.pt resumes exactly: fp32 model and EMA, optimizer, scaler, last_opt_step, maps, best epoch and
the python/numpy/framework RNG states taken after that epoch's validation, so with --workers 0 the remaining epochs
replay bit for bit. Under the other backend everything but the framework's own RNG state is restored (restore_rng).
An official ultralytics last.pt resumes from its fp16 weights and optimizer, without RNG states.
The lr schedule is a pure function of the epoch and iteration, so nothing else is needed.
"""
import numpy as np

from utils import backend
from utils.backend_choice import BACKEND_NAMES
from utils.checkpoint import load_checkpoint, optimizer_state_for_backend
from utils.checkpoint.training import best_fitness_value, set_rng_states
from utils.engine.errors import TrainingError
from utils.engine.parts import TrainingState
from utils.log import LOGGER


def read_resume_checkpoint(weights, build_model):
    """last.pt with its models rebuilt by the task's model builder (Task.build_model)."""
    return load_checkpoint(weights, map_location="cpu", build_models=build_model)


def _name_list(names):
    """A class list as a list of str in index order ({0: 'person', ...} or ['person', ...]); None when absent."""
    if isinstance(names, dict):
        try:
            return [str(names[k]) for k in sorted(names, key=int)]
        except (TypeError, ValueError):
            return [str(v) for v in names.values()]
    if isinstance(names, (list, tuple)):
        return [str(x) for x in names]
    return None


def _class_difference(old, new):
    """The first difference between two class lists, in a few words."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return f"class {i} is '{a}' there and '{b}' here"
    i = min(len(old), len(new))
    extra = (old if len(old) > len(new) else new)[i]
    return f"class {i} ('{extra}') is only {'there' if len(old) > len(new) else 'here'}"


def check_resumed_classes(ckpt, nc, names, data, name="last.pt"):
    """Raise TrainingError when the data's classes (nc, names as the run will train them) are not those the
    checkpoint's model was trained for: resuming would train the old head against the new labels and save a
    last.pt whose head and class count disagree. Called before anything is trained."""
    model = ckpt.get("model")
    head = getattr(model, "model", None)
    head = head[-1] if head is not None and len(head) else None
    saved_nc = getattr(head, "nc", None)
    saved_nc = int(saved_nc if saved_nc is not None else getattr(model, "nc", nc))
    saved, here = _name_list(getattr(model, "names", None)), _name_list(names)
    if saved_nc == int(nc) and (saved is None or here is None or saved == here):
        return
    what = _class_difference(saved, here) if saved is not None and here is not None and saved != here else ""
    raise TrainingError(f"--resume: {name} was trained for {saved_nc} classes and the data {data} now has {nc}"
                        f"{f' ({what})' if what else ''}: the data's class list changed since the run started. "
                        f"Restore the data YAML's names to resume, or start a new run with --weights {name}.")


def restore_training_state(ckpt, optimizer, scaler, ema, device, epochs, name="last.pt"):
    """Load optimizer, scaler and EMA from ckpt in place; returns the TrainingState to continue from. Raises
    TrainingError when the checkpoint has already finished its epochs."""
    if ckpt.get("optimizer") is not None:
        optimizer.load_state_dict(optimizer_state_for_backend(ckpt["optimizer"]))
    if ckpt.get("scaler"):
        scaler.load_state_dict(ckpt["scaler"])
    if ema is not None and ckpt.get("ema") is not None:
        ema.ema.load_state_dict(ckpt["ema"].to(device).state_dict())
        ema.updates = int(ckpt["updates"])
    last_opt_step = ckpt.get("last_opt_step")
    state = TrainingState(start_epoch=int(ckpt["epoch"]) + 1,
                          last_opt_step=int(last_opt_step) if last_opt_step is not None else -1,
                          best_fitness=best_fitness_value(ckpt.get("best_fitness")),
                          best_epoch=int(ckpt.get("best_epoch") or 0),
                          maps=np.asarray(ckpt["maps"], dtype=np.float64) if ckpt.get("maps") is not None else None,
                          resumed=True)
    if state.start_epoch >= epochs:
        raise TrainingError(f"{name} has finished its {epochs} epochs; nothing to resume. "
                            "Start a new run with --weights pointing at it to train more.")
    LOGGER.info(f"Resuming training from {name} from epoch {state.start_epoch} to {epochs} total epochs")
    return state


def restore_rng(ckpt, name="last.pt"):
    """The RNG streams as the checkpointed run left them. Called last in building: set-up consumes random numbers
    (model initialisation, AutoAnchor) that the first run drew too, before the epoch the checkpoint ends.
    A checkpoint from the other backend gives back its Python and numpy streams; the framework's generator state
    cannot cross (other size and layout), so that stream goes on from where this run's --seed put it, and one line
    says so."""
    if ckpt.get("rng") is None:
        return
    writer = set_rng_states(ckpt["rng"])
    if writer is not None:
        here = BACKEND_NAMES.get(backend.BACKEND, backend.BACKEND)
        there = BACKEND_NAMES.get(writer, writer)
        LOGGER.warning(f"WARNING ⚠️ {name} was written under {there} and this run uses {here}: weights, optimizer, "
                       f"EMA and the Python and numpy random streams are restored, but {here}'s own random stream "
                       f"restarts (from --seed; {there}'s generator state does not fit {here}'s), so the resumed "
                       "epochs are not bit-identical to an uninterrupted run.")
