"""Run YOLOv5 classification on images, folders, globs, .txt lists, videos, cameras and streams (the flags and
outputs of ultralytics/yolov5's classify/predict.py).

Usage:
    python classify/predict.py --weights yolov5s-cls.pt --source img.jpg      # or a folder, glob, video, 0, URL
Each image's top-5 classes and probabilities are printed, written on the saved image (runs/predict-cls/exp*) and,
with --save-txt, to labels/<image>.txt ("0.93 person" lines).
"""
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":
    signals.install("detect")

from utils.backend import inference_mode  # noqa: E402
from utils.cli_flags import FlagParser, add_predict_flags  # noqa: E402
from utils.classify.dataset import classify_transform  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from models.from_record import build_any_model  # noqa: E402
from utils.inference import load_model  # noqa: E402
from utils.inference.classify_writer import ClassificationWriter  # noqa: E402
from utils.inference.outputs import DetectionOutputs, source_names  # noqa: E402
from utils.inference.predict import predict_and_report  # noqa: E402
from utils.inference.sources import is_stream  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


@inference_mode()
def run(weights=ROOT / "yolov5s-cls.pt", source=ROOT / "data/images", data=ROOT / "data/coco128.yaml",
        imgsz=(224, 224), device="", view_img=False, save_txt=False, nosave=False, augment=False, visualize=False,
        update=False, project=ROOT / "runs/predict-cls", name="exp", exist_ok=False, half=False, dnn=False,
        vid_stride=1):
    """Returns the run folder (Path)."""
    source = str(source)
    stream = is_stream(source)
    save_img = not nosave and not source.endswith(".txt")
    imgsz = list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz]
    device = select_and_log_device(device)  # the official 'YOLOv5 🚀 ...' line, before the model loads
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz,
                              task="classify")
    transform = partial(classify_transform, size=imgsz[0])
    if stream:
        from utils.streams import LoadStreams
        dataset = LoadStreams(source, img_size=imgsz, transforms=transform, vid_stride=vid_stride)
    else:
        from utils.dataloaders import LoadImages
        dataset = LoadImages(source, img_size=imgsz, transforms=transform, vid_stride=vid_stride)
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    outputs = DetectionOutputs(save_dir, model.names, save_img, n_sources=len(dataset) if stream else 1,
                               sources=source_names(dataset, stream), stream=stream)  # its image and label writers
    writer = ClassificationWriter(outputs, model.names, save_img, save_txt, view_img)
    predict_and_report(model, dataset, writer, source, stream, imgsz, save_txt, last_stage="post-process")
    if update:
        from utils.checkpoint.training import strip_optimizer
        strip_optimizer(weights[0] if isinstance(weights, (list, tuple)) else weights,
                        build_model=build_any_model)
    return save_dir


def parse_opt(argv=None):
    parser = FlagParser()
    add_predict_flags(parser, weights=ROOT / "yolov5s-cls.pt", data=ROOT / "data/coco128.yaml", imgsz=224,
                      project=ROOT / "runs/predict-cls", boxes=False, tta=False)
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("predict"):
        main(parse_opt())
    leave_quickly()
