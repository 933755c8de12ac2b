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

import numpy as np  # noqa: E402

from utils.backend import from_numpy, inference_mode, to_numpy  # noqa: E402
from utils.cli_flags import FlagParser, add_predict_flags  # noqa: E402
from utils.classify.dataset import classify_transform  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from models.from_record import build_any_model  # noqa: E402
from utils.inference import load_model, ms_per_image  # noqa: E402
from utils.inference.outputs import DetectionOutputs, log_saved, source_names  # noqa: E402
from utils.inference.profile import Profile  # noqa: E402
from utils.inference.sources import ReadableFrames, is_stream  # noqa: E402
from utils.plots import Annotator  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


def softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def top5_text(prob, names):
    """The 5 most probable classes, highest first: ['0.93 person', ...] (ties keep class order)."""
    top = np.argsort(-prob, kind="stable")[:5]
    return [(int(j), f"{prob[j]:.2f} {names[int(j)]}") for j in top]


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
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz,
                              task="classify")
    transform = partial(classify_transform, size=imgsz[0])
    if stream:
        from utils.streams import LoadStreams
        dataset = LoadStreams(source, img_size=imgsz, transforms=transform, vid_stride=vid_stride)
    else:
        from utils.dataloaders import LoadImages
        dataset = LoadImages(source, img_size=imgsz, transforms=transform, vid_stride=vid_stride)
    bs = len(dataset) if stream else 1
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    writer = DetectionOutputs(save_dir, model.names, save_img, n_sources=bs, sources=source_names(dataset, stream),
                              stream=stream)  # its image/video and label writers and their names
    model.warmup(imgsz=(1 if model.pt else bs, 3, *imgsz))
    profiles = Profile(model.device), Profile(model.device), Profile(model.device)
    try:
        with writer:  # videos are renamed into place on the way out
            seen = _predict(model, dataset, ReadableFrames(dataset), writer, profiles, stream, save_img, save_txt,
                            view_img)
    finally:
        if stream:
            dataset.close()
    t = ms_per_image(profiles, seen)
    LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms post-process per image at shape "
                f"{(1, 3, *imgsz)}" % t)
    log_saved(writer, save_dir, save_txt)
    if update:
        from utils.checkpoint.training import strip_optimizer
        strip_optimizer(weights[0] if isinstance(weights, (list, tuple)) else weights,
                        build_model=build_any_model)
    return save_dir


def _predict(model, dataset, frames, writer, profiles, stream, save_img, save_txt, view_img):
    """Every frame through the model: its top-5 printed, drawn on the saved image and (save_txt) written to its
    label file, whole (a rerun replaces it). Returns the images seen."""
    seen = 0
    for path, im, im0s, vid_cap, s in frames:
        signals.check()
        with profiles[0]:
            x = from_numpy(np.ascontiguousarray(im, dtype=np.float32)).to(model.device)
            x = x[None] if x.ndim == 3 else x
            x = x.half() if model.fp16 else x
        with profiles[1]:
            logits = model(x)
        with profiles[2]:
            prob = softmax(to_numpy(logits.float()).astype(np.float64))
        for i, pr in enumerate(prob):
            seen += 1
            if stream:
                p, im0, frame = Path(path[i]), im0s[i].copy(), dataset.count
                s += f"{i}: "
            else:
                p, im0, frame = Path(path), im0s.copy(), getattr(dataset, "frame", 0)
            s += "%gx%g " % tuple(x.shape[2:])
            top = top5_text(pr, model.names)
            s += f"{', '.join(f'{model.names[j]} {pr[j]:.2f}' for j, _ in top)}, "
            annotator = Annotator(im0, example=str(model.names))
            if save_img or view_img:
                for k, (_, t) in enumerate(top):  # one line each: cv2 draws no line breaks
                    annotator.text([32, 32 + k * int(annotator.fs * 30 + 6)], t, txt_color=(255, 255, 255))
            if save_txt:
                writer.write_labels(i, p, frame, dataset.mode, [t for _, t in top])
            if save_img:
                writer.save_image(i, p, annotator.result(), dataset.mode, vid_cap)
        LOGGER.info(f"{s}{profiles[1].dt * 1e3:.1f}ms")
    return seen


def parse_opt(argv=None):
    parser = FlagParser()
    add_predict_flags(parser, weights=ROOT / "yolov5s-cls.pt", data=ROOT / "data/coco128.yaml", imgsz=224,
                      project=ROOT / "runs/predict-cls", boxes=False, tta=False)
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("predict"):
        main(parse_opt())
    leave_quickly()
