"""The official device line (`YOLOv5 🚀 <version> Python-<x.y.z> torch-<version> CPU`, or one `CUDA:<id> (<name>,
<MiB>MiB)` per GPU) for the device a script selected: what official select_device logs as it selects. Here
utils.backend's select_device stays silent (library code selects devices too: the line would repeat), and the entry
scripts log the line once, where official prints it. The text itself is utils/run_header.py's device_line."""
from utils.backend import BACKEND, VERSION, is_cuda, select_device, torch
from utils.errors import UserError
from utils.log import LOGGER
from utils.run_header import device_line


class DeviceError(UserError, ValueError):
    """--device names a GPU that is not there (or a batch size the GPUs cannot share): one line, not a traceback.
    Still a ValueError, what select_device raises, for callers that catch that."""


def gpu_ids(device, spec=""):
    """The GPU ids the line lists: every id --device names (a DDP run's '0,1' lists both, as official), else the
    selected device's own index."""
    spec = str(spec).strip().lower().replace("cuda:", "").replace("none", "")
    ids = [s.strip() for s in spec.split(",") if s.strip()]
    own = str(device).rpartition(":")[2]  # 'cuda:1' -> '1' (the text form both frameworks print)
    return ids or [own if own.isdigit() else "0"]


def log_device(device, spec=""):
    """Log the device line for device (what select_device returned for --device spec); returns device."""
    gpus = ()
    if is_cuda(device):  # without CUDA_VISIBLE_DEVICES set from --device (official sets it), an id is the GPU's index
        gpus = [(d, torch.cuda.get_device_properties(int(d))) for d in gpu_ids(device, spec)]
    LOGGER.info(device_line(f"{BACKEND}-{VERSION}", gpus))
    return device


def select_and_log_device(spec="", batch_size=0):
    """Official select_device: the device for --device spec, its line logged; a GPU that is not there is one line
    (DeviceError)."""
    try:
        device = select_device(spec, batch_size=batch_size)
    except ValueError as e:
        raise DeviceError(str(e)) from None
    return log_device(device, spec)
