"""A checkpoint made ready for tracing, as ultralytics' export does it: fp32 weights loaded (any task's model),
BatchNorm fused, eval mode, Detect in export mode (it returns only the decoded predictions, shape (batch, anchors,
5 + nc); Segment also the prototypes (batch, nm, h/4, w/4); a classifier returns its logits (batch, nc)), grids
rebuilt from the input's shape on every call for --dynamic, two dry runs, then fp16 for --half."""
from dataclasses import dataclass

from models.experimental import attempt_load
from models.tasks import model_task
from models.yolo import Detect
from utils.backend import inference_mode, select_device, torch
from utils.errors import UserError
from utils.img_size import check_img_size


class ExportError(UserError):
    pass


@dataclass
class Prepared:
    model: object  # the DetectionModel, SegmentationModel or ClassificationModel, in export mode
    im: object  # the example input the exporters trace with, zeros of shape (batch, ch, h, w)
    output_shape: tuple
    metadata: dict  # {"stride": int, "names": {i: name}}: what every exported file carries
    task: str = "detect"  # 'detect', 'segment' or 'classify' (utils/export/task_outputs.py)


def check_export_options(device, half, dynamic, optimize):
    """The official constraints, each as one line that says what to do."""
    if half and device.type == "cpu":
        raise ExportError("--half only compatible with GPU export, i.e. use --device 0")
    if half and dynamic:
        raise ExportError("--half not compatible with --dynamic, i.e. use either --half or --dynamic but not both")
    if optimize and device.type != "cpu":
        raise ExportError("--optimize not compatible with cuda devices, i.e. use --device cpu")


def set_export_mode(model, inplace=False, dynamic=False):
    for m in model.modules():
        if isinstance(m, Detect):
            m.inplace = inplace
            m.dynamic = dynamic
            m.export = True


@inference_mode()
def prepare(weights, device="cpu", imgsz=(640, 640), batch_size=1, half=False, inplace=False, dynamic=False,
            optimize=False):
    device = select_device(device)
    check_export_options(device, half, dynamic, optimize)
    model = attempt_load(weights, device=device, inplace=True, fuse=True)
    imgsz = list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz]
    imgsz *= 2 if len(imgsz) == 1 else 1
    gs = int(max(model.stride))
    imgsz = [check_img_size(x, gs) for x in imgsz]
    ch = next(model.parameters()).shape[1]  # the first conv's input channels
    im = torch.zeros(batch_size, ch, *imgsz).to(device)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)  # tracing records no autograd graph
    set_export_mode(model, inplace=inplace, dynamic=dynamic)
    for _ in range(2):  # the first call builds the grids, the second runs as the traced graph will
        y = model(im)
    if half:
        im, model = im.half(), model.half()
    names = model.names if isinstance(model.names, dict) else dict(enumerate(model.names))
    metadata = {"stride": gs, "names": names}
    return Prepared(model, im, tuple((y[0] if isinstance(y, tuple) else y).shape), metadata, model_task(model))
