"""The one way entry points load a model for inference: DetectMultiBackend (every format, device, fp16, stride,
class names), checked to be a model of the script's task, and the image size rounded to its stride."""
from models.from_record import build_any_model
from models.from_record import build_model as build_detection_model
from utils.inference.format_loader import DetectMultiBackend
from utils.backend import select_device, torch
from utils.export.task_outputs import check_task
from utils.img_size import check_img_size


def load_model(weights, device="", half=False, dnn=False, data=None, imgsz=640, batch_size=0, task_plugin=None,
               build_model=None, task="detect"):
    """-> (DetectMultiBackend, imgsz as a multiple of its stride). device: a device or a --device string ('' is the
    first GPU, else the CPU; batch_size is checked against the GPUs it names); imgsz: an int (square) or [h, w],
    returned in the same form; task_plugin: the utils.tasks.Task whose model builder reads .pt files (None:
    detection's); build_model: the model builder itself, where no task plug-in exists yet (segment/, classify/);
    task: what the calling script runs ('detect', 'segment', 'classify'): a model of another task, in any format, is
    one line naming the scripts that run it (detection's builder names the other tasks' .pt files itself)."""
    if not isinstance(device, torch.device):  # a device's own str() is no --device string under OneFlow ('cpu:0')
        device = select_device("" if device is None else device, batch_size=batch_size)
    builder = build_model or (task_plugin.build_model if task_plugin is not None else None)
    if builder is None:  # detection's builder names the other tasks' checkpoints as it reads them
        builder = build_detection_model if task == "detect" else build_any_model
    model = DetectMultiBackend(weights, device=device, dnn=dnn, data=data, fp16=half, build_model=builder)
    check_task(model.w, model.task, task)
    return model, check_img_size(imgsz, s=model.stride)


def model_class_count(model):
    """The class count a loaded DetectMultiBackend was trained for, as the model itself records it: a .pt model's
    nc (or its YAML's), an export's stored class names (ONNX, OpenVINO, TorchScript metadata). None when it records
    none (an export without metadata, whose names come from --data): val scripts compare it with the data's nc."""
    if model.pt:
        m = model.model
        nc = getattr(m, "nc", None) or (m.yaml.get("nc") if isinstance(getattr(m, "yaml", None), dict) else None)
        return int(nc) if nc else None
    return model.stored_nc
