"""The weights are checked before every save: a NaN or Inf that got into the model or its EMA (a NaN learning rate
trains on without a non-finite loss until the next step reads one, and the epoch's save comes first) must never
replace the last good checkpoint. A few kernels and one host sync per save (backend.all_finite), never per step;
only when it fails are the tensors searched one by one for the name to report."""
from utils import backend, signals
from utils.engine.errors import NonFiniteWeightsError
from utils.torch_utils import de_parallel


def _float_tensors(parts):
    """(label, state dict) of what a checkpoint stores: the model (fp32 copy) and the EMA (the saved `model`)."""
    yield "model", de_parallel(parts.model).state_dict()
    if parts.ema is not None:
        yield "ema", parts.ema.ema.state_dict()


def first_non_finite(parts):
    """'ema: model.24.m.0.weight' of the first tensor holding NaN/Inf, or None (slow: one sync per tensor)."""
    for label, sd in _float_tensors(parts):
        for name, t in sd.items():
            if not backend.all_finite([t]):
                return f"{label}: {name}"
    return None


def check_weights_before_save(parts, epoch):
    """Raise NonFiniteWeightsError (naming the first bad tensor and what is on disk) unless every float tensor of
    the model and the EMA is finite."""
    tensors = [t for _, sd in _float_tensors(parts) for t in sd.values()]
    if backend.all_finite(tensors):  # SYNC: one per save
        return
    where = first_non_finite(parts) or "a weight"
    on_disk = signals.checkpoint_status(parts.run.last) if parts.run is not None else "nothing was saved"
    raise NonFiniteWeightsError(epoch, where, on_disk)
