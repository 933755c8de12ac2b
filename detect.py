"""Run YOLOv5 detection on images, folders, globs, .txt lists and video files (ultralytics flags and outputs).

Usage:
    python detect.py --weights yolov5s.pt --source img.jpg            # image
                                                   path/              # folder
                                                   'path/*.jpg'       # glob
                                                   list.txt           # list of paths
                                                   vid.mp4            # video
Outputs go to runs/detect/exp*: annotated images/videos, labels/*.txt (--save-txt), crops/ (--save-crop),
predictions.csv (--save-csv). Unreadable images are reported and skipped. For a Python call that returns boxes,
see utils/inference.py (Detector).
"""
import argparse
import csv
import sys
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("detect")

from utils.backend import inference_mode, select_device, wait_for_work  # noqa: E402
from utils.errors import exit_on_user_error  # noqa: E402
from utils.general import (LOGGER, check_img_size, colorstr, increment_path, non_max_suppression,  # noqa: E402
                           xyxy2xywh)
from utils.inference import preprocess, to_original  # noqa: E402
from utils.plots import Annotator, colors, save_one_box  # noqa: E402


class _Timer:
    def __init__(self, device):
        self.t, self.dt, self.device = 0.0, 0.0, device

    def __enter__(self):
        wait_for_work(self.device)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *args):
        wait_for_work(self.device)
        self.dt = time.perf_counter() - self.start
        self.t += self.dt


def _frames(dataset):
    """Iterate a LoadImages dataset, reporting and skipping images that cannot be read instead of stopping."""
    it = iter(dataset)
    while True:
        try:
            yield next(it)
        except StopIteration:
            return
        except FileNotFoundError as e:  # LoadImages has already moved past the bad file
            LOGGER.warning(f"WARNING: skipping unreadable image: {e}")
            _frames.skipped += 1


@inference_mode()
def run(weights=ROOT / "yolov5s.pt", source=ROOT / "data/images", data=None, imgsz=(640, 640), conf_thres=0.25,
        iou_thres=0.45, max_det=1000, device="", view_img=False, save_txt=False, save_csv=False, save_conf=False,
        save_crop=False, nosave=False, classes=None, agnostic_nms=False, augment=False, visualize=False, update=False,
        project=ROOT / "runs/detect", name="exp", exist_ok=False, line_thickness=3, hide_labels=False,
        hide_conf=False, half=False, dnn=False, vid_stride=1):
    """Returns the run folder (Path)."""
    from models.experimental import attempt_load
    from utils.dataloaders import LoadImages
    source = str(source)
    save_img = not nosave and not source.endswith(".txt")  # ultralytics: .txt sources save labels only
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)  # one line if unwritable
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)

    device = select_device(device)
    half = bool(half) and "cuda" in str(device)
    model = attempt_load(weights, device=device, fuse=True)
    model.half() if half else model.float()
    stride = int(max(float(model.stride.max()), 32))
    names = getattr(model, "names", None) or [str(i) for i in range(int(model.yaml["nc"]))]
    names = dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names)
    imgsz = check_img_size(list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz], s=stride)

    dataset = LoadImages(source, img_size=imgsz, stride=stride, auto=True, vid_stride=vid_stride)
    vid_path, vid_writer = None, None
    seen, dt = 0, (_Timer(device), _Timer(device), _Timer(device))
    csv_path = save_dir / "predictions.csv"
    _frames.skipped = 0
    signals.describe_on_disk(lambda: f"{save_dir} holds the results of the {seen} images done so far")
    for path, im, im0s, vid_cap, s in _frames(dataset):
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with dt[0]:
            x = preprocess(im, device, half)
        with dt[1]:
            pred = model(x, augment=True) if augment else model(x)
        with dt[2]:
            det = non_max_suppression(pred, conf_thres, iou_thres, classes, agnostic_nms, max_det=max_det)[0]

        seen += 1
        p, im0, frame = Path(path), im0s.copy(), getattr(dataset, "frame", 0)
        save_path = str(save_dir / p.name)
        txt_path = str(save_dir / "labels" / p.stem) + ("" if dataset.mode == "image" else f"_{frame}")
        s += "%gx%g " % tuple(x.shape[2:])
        gn = np.array(im0.shape, dtype=np.float64)[[1, 0, 1, 0]]  # normalization gain whwh
        imc = im0.copy() if save_crop else im0
        annotator = Annotator(im0, line_width=line_thickness, example=str(names))
        det = to_original(det, x.shape[2:], im0.shape)
        if len(det):
            det[:, :4] = det[:, :4].round()
            for c in np.unique(det[:, 5]):
                n = int((det[:, 5] == c).sum())
                s += f"{n} {names[int(c)]}{'s' * (n > 1)}, "
            for *xyxy, conf, cls in reversed(det.tolist()):
                c = int(cls)
                label = names[c] if hide_conf else f"{names[c]}"
                if save_csv:
                    new = not csv_path.is_file()
                    with open(csv_path, "a", newline="") as f:
                        w = csv.DictWriter(f, fieldnames=["Image Name", "Prediction", "Confidence"])
                        if new:
                            w.writeheader()
                        w.writerow({"Image Name": p.name, "Prediction": label, "Confidence": f"{conf:.2f}"})
                if save_txt:
                    xywh = (xyxy2xywh(np.array(xyxy, dtype=np.float64).reshape(1, 4)) / gn).reshape(-1).tolist()
                    line = (cls, *xywh, conf) if save_conf else (cls, *xywh)
                    with open(f"{txt_path}.txt", "a") as f:
                        f.write(("%g " * len(line)).rstrip() % line + "\n")
                if save_img or save_crop or view_img:
                    label = None if hide_labels else (names[c] if hide_conf else f"{names[c]} {conf:.2f}")
                    annotator.box_label(xyxy, label, color=colors(c, True))
                if save_crop:
                    save_one_box(xyxy, imc, file=save_dir / "crops" / names[c] / f"{p.stem}.jpg", BGR=True)
        im0 = annotator.result()

        if save_img:
            if dataset.mode == "image":
                cv2.imwrite(save_path, im0)
            else:  # one writer per video; a new source path starts a new file
                if vid_path != save_path:
                    vid_path = save_path
                    if isinstance(vid_writer, cv2.VideoWriter):
                        vid_writer.release()
                    if vid_cap:
                        fps = vid_cap.get(cv2.CAP_PROP_FPS) or 30
                        w, h = int(vid_cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(vid_cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
                    else:
                        fps, w, h = 30, im0.shape[1], im0.shape[0]
                    save_path = str(Path(save_path).with_suffix(".mp4"))  # force *.mp4 suffix on results videos
                    vid_writer = cv2.VideoWriter(save_path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
                vid_writer.write(im0)

        LOGGER.info(f"{s}{'' if len(det) else '(no detections), '}{dt[1].dt * 1e3:.1f}ms")

    if isinstance(vid_writer, cv2.VideoWriter):
        vid_writer.release()  # finalize the last video file
    if _frames.skipped:
        LOGGER.warning(f"WARNING: {_frames.skipped} unreadable image(s) skipped")
    t = tuple(x.t / max(seen, 1) * 1e3 for x in dt)
    LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {(1, 3, *imgsz)}" % t)
    if save_txt or save_img:
        s = f"\n{len(list(save_dir.glob('labels/*.txt')))} labels saved to {save_dir / 'labels'}" if save_txt else ""
        LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    return save_dir


def parse_opt(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model path(s)")
    parser.add_argument("--source", type=str, default=ROOT / "data/images", help="file/dir/glob/.txt list/video")
    parser.add_argument("--data", type=str, default=None, help="(optional) dataset.yaml path")
    parser.add_argument("--imgsz", "--img", "--img-size", nargs="+", type=int, default=[640], help="inference size h,w")
    parser.add_argument("--conf-thres", type=float, default=0.25, help="confidence threshold")
    parser.add_argument("--iou-thres", type=float, default=0.45, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=1000, help="maximum detections per image")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--view-img", action="store_true", help="accepted for compatibility; results are saved")
    parser.add_argument("--save-txt", action="store_true", help="save results to *.txt")
    parser.add_argument("--save-csv", action="store_true", help="save results in CSV format")
    parser.add_argument("--save-conf", action="store_true", help="save confidences in --save-txt labels")
    parser.add_argument("--save-crop", action="store_true", help="save cropped prediction boxes")
    parser.add_argument("--nosave", action="store_true", help="do not save images/videos")
    parser.add_argument("--classes", nargs="+", type=int, help="filter by class: --classes 0, or --classes 0 2 3")
    parser.add_argument("--agnostic-nms", action="store_true", help="class-agnostic NMS")
    parser.add_argument("--augment", action="store_true", help="augmented inference")
    parser.add_argument("--visualize", action="store_true", help="accepted for compatibility; ignored")
    parser.add_argument("--update", action="store_true", help="accepted for compatibility; ignored")
    parser.add_argument("--project", default=ROOT / "runs/detect", help="save results to project/name")
    parser.add_argument("--name", default="exp", help="save results to project/name")
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    parser.add_argument("--line-thickness", default=3, type=int, help="bounding box thickness (pixels)")
    parser.add_argument("--hide-labels", default=False, action="store_true", help="hide labels")
    parser.add_argument("--hide-conf", default=False, action="store_true", help="hide confidences")
    parser.add_argument("--half", action="store_true", help="use FP16 half-precision inference")
    parser.add_argument("--dnn", action="store_true", help="accepted for compatibility; ignored")
    parser.add_argument("--vid-stride", type=int, default=1, help="video frame-rate stride")
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1  # expand
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("detect"):
        main(parse_opt())
