"""Run YOLOv5 detection on images, folders, globs, .txt lists, videos, cameras and streams (ultralytics flags and
outputs).

Usage:
    python detect.py --weights yolov5s.pt --source img.jpg            # image
                                                   path/              # folder
                                                   'path/*.jpg'       # glob
                                                   list.txt           # list of paths
                                                   vid.mp4            # video
                                                   0                  # camera 0
                                                   list.streams       # one camera index or stream URL a line
                                                   'rtsp://example.com/media.mp4'  # RTSP, RTMP, HTTP stream
    --weights also takes yolov5s.torchscript, yolov5s.onnx, yolov5s_openvino_model (export.py writes them).
Outputs go to runs/detect/exp*: annotated images/videos, labels/*.txt (--save-txt; --save-format 0 YOLO
class x y w h, 1 Pascal-VOC class x1 y1 x2 y2, both normalized to 0-1), crops/ (--save-crop), predictions.csv
(--save-csv). Unreadable images are reported and skipped. For a Python call that returns boxes, see
utils/inference.py (Detector).
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

from utils.backend import inference_mode, select_device, wait_for_work  # noqa: E402
from utils.errors import UserError, exit_on_user_error  # noqa: E402
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
        iou_thres=0.45, max_det=1000, device="", view_img=False, save_txt=False, save_format=0, save_csv=False,
        save_conf=False, save_crop=False, nosave=False, classes=None, agnostic_nms=False, augment=False,
        visualize=False, update=False, project=ROOT / "runs/detect", name="exp", exist_ok=False, line_thickness=3,
        hide_labels=False, hide_conf=False, half=False, dnn=False, vid_stride=1):
    """Returns the run folder (Path)."""
    from models.multibackend import DetectMultiBackend
    from utils.dataloaders import IMG_FORMATS, VID_FORMATS, LoadImages
    from utils.streams import LoadStreams, is_stream_source
    source = str(source)
    if save_format not in (0, 1):
        raise UserError(f"--save-format {save_format}: use 0 (YOLO: class x y w h) or 1 (Pascal-VOC: class x1 y1 x2 "
                        "y2)")
    webcam = is_stream_source(source, IMG_FORMATS + VID_FORMATS)
    save_img = not nosave and not source.endswith(".txt")  # ultralytics: .txt sources save labels only

    device = select_device(device)
    model = DetectMultiBackend(weights, device=device, dnn=dnn, data=data, fp16=half)
    stride, names, pt = model.stride, model.names, model.pt
    imgsz = check_img_size(list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz], s=stride)
    if webcam:
        dataset = LoadStreams(source, img_size=imgsz, stride=stride, auto=pt, vid_stride=vid_stride)
    else:
        dataset = LoadImages(source, img_size=imgsz, stride=stride, auto=pt, vid_stride=vid_stride)
    bs = len(dataset) if webcam else 1
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok)  # after the source opened: no empty folders
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    out = _Outputs(save_dir, names, save_img, save_txt, save_format, save_conf, save_crop, save_csv, view_img,
                   line_thickness, hide_labels, hide_conf, bs)

    model.warmup(imgsz=(1 if pt else bs, 3, *imgsz))
    seen, dt = 0, (_Timer(device), _Timer(device), _Timer(device))
    _frames.skipped = 0
    try:
        for path, im, im0s, vid_cap, s in _frames(dataset):
            with dt[0]:
                x = preprocess(im, model.device, model.fp16)
            with dt[1]:
                pred = model(x, augment=augment)
            with dt[2]:
                pred = non_max_suppression(pred, conf_thres, iou_thres, classes, agnostic_nms, max_det=max_det)
            for i, det in enumerate(pred):
                seen += 1
                if webcam:  # one image per source
                    p, im0, frame = Path(path[i]), im0s[i].copy(), dataset.count
                    s += f"{i}: "
                else:
                    p, im0, frame = Path(path), im0s.copy(), getattr(dataset, "frame", 0)
                s += "%gx%g " % tuple(x.shape[2:])
                det = to_original(det, x.shape[2:], im0.shape)
                s += out.write(i, p, im0, det, frame, dataset.mode, vid_cap)
            LOGGER.info(f"{s}{'' if len(det) else '(no detections), '}{dt[1].dt * 1e3:.1f}ms")
    finally:
        out.close()
        if webcam:
            dataset.close()

    if _frames.skipped:
        LOGGER.warning(f"WARNING: {_frames.skipped} unreadable image(s) skipped")
    t = tuple(x.t / max(seen, 1) * 1e3 for x in dt)
    LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {(1, 3, *imgsz)}" % t)
    if save_txt or save_img:
        s = f"\n{len(list(save_dir.glob('labels/*.txt')))} labels saved to {save_dir / 'labels'}" if save_txt else ""
        LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    return save_dir


class _Outputs:
    """What detect.py writes for each image or frame: annotated images and videos (one writer per source), label
    files, crops and predictions.csv."""

    def __init__(self, save_dir, names, save_img, save_txt, save_format, save_conf, save_crop, save_csv, view_img,
                 line_thickness, hide_labels, hide_conf, n_sources):
        self.save_dir, self.names = save_dir, names
        self.save_img, self.save_txt, self.save_format, self.save_conf = save_img, save_txt, save_format, save_conf
        self.save_crop, self.save_csv, self.view_img = save_crop, save_csv, view_img
        self.line_thickness, self.hide_labels, self.hide_conf = line_thickness, hide_labels, hide_conf
        self.vid_path, self.vid_writer = [None] * n_sources, [None] * n_sources
        self.csv_path = save_dir / "predictions.csv"

    def write(self, i, p, im0, det, frame, mode, vid_cap):
        """One image's detections (n, 6) in original pixels; returns the summary text for the log line."""
        names, s = self.names, ""
        txt_path = str(self.save_dir / "labels" / p.stem) + ("" if mode == "image" else f"_{frame}")
        gn = np.array(im0.shape, dtype=np.float64)[[1, 0, 1, 0]]  # normalization gain whwh
        imc = im0.copy() if self.save_crop else im0
        annotator = Annotator(im0, line_width=self.line_thickness, example=str(names))
        if len(det):
            det[:, :4] = det[:, :4].round()
            for c in np.unique(det[:, 5]):
                n = int((det[:, 5] == c).sum())
                s += f"{n} {names[int(c)]}{'s' * (n > 1)}, "
            for *xyxy, conf, cls in reversed(det.tolist()):
                c = int(cls)
                if self.save_csv:
                    self._csv_row(p.name, names[c], f"{conf:.2f}")
                if self.save_txt:
                    box = np.array(xyxy, dtype=np.float64).reshape(1, 4)
                    coords = ((xyxy2xywh(box) if self.save_format == 0 else box) / gn).reshape(-1).tolist()
                    line = (cls, *coords, conf) if self.save_conf else (cls, *coords)
                    with open(f"{txt_path}.txt", "a") as f:
                        f.write(("%g " * len(line)).rstrip() % line + "\n")
                if self.save_img or self.save_crop or self.view_img:
                    label = None if self.hide_labels else (names[c] if self.hide_conf else f"{names[c]} {conf:.2f}")
                    annotator.box_label(xyxy, label, color=colors(c, True))
                if self.save_crop:
                    save_one_box(xyxy, imc, file=self.save_dir / "crops" / names[c] / f"{p.stem}.jpg", BGR=True)
        if self.save_img:
            self._save(i, str(self.save_dir / p.name), annotator.result(), mode, vid_cap)
        return s

    def _csv_row(self, image_name, prediction, confidence):
        new = not self.csv_path.is_file()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["Image Name", "Prediction", "Confidence"])
            if new:
                w.writeheader()
            w.writerow({"Image Name": image_name, "Prediction": prediction, "Confidence": confidence})

    def _save(self, i, save_path, im0, mode, vid_cap):
        if mode == "image":
            cv2.imwrite(save_path, im0)
            return
        if self.vid_path[i] != save_path:  # a new video or stream: a new writer
            self.vid_path[i] = save_path
            if isinstance(self.vid_writer[i], cv2.VideoWriter):
                self.vid_writer[i].release()
            if vid_cap:  # a video file: its own rate and size
                fps = vid_cap.get(cv2.CAP_PROP_FPS) or 30
                w, h = int(vid_cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(vid_cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            else:  # a stream
                fps, w, h = 30, im0.shape[1], im0.shape[0]
            save_path = str(Path(save_path).with_suffix(".mp4"))  # results videos are always *.mp4
            self.vid_writer[i] = cv2.VideoWriter(save_path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        self.vid_writer[i].write(im0)

    def close(self):
        for w in self.vid_writer:
            if isinstance(w, cv2.VideoWriter):
                w.release()  # finalizes the file


def parse_opt(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model path(s)")
    parser.add_argument("--source", type=str, default=ROOT / "data/images",
                        help="file/dir/glob/.txt list/video/URL/.streams/0 (camera)")
    parser.add_argument("--data", type=str, default=None, help="(optional) dataset.yaml path")
    parser.add_argument("--imgsz", "--img", "--img-size", nargs="+", type=int, default=[640], help="inference size h,w")
    parser.add_argument("--conf-thres", type=float, default=0.25, help="confidence threshold")
    parser.add_argument("--iou-thres", type=float, default=0.45, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=1000, help="maximum detections per image")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--view-img", action="store_true", help="accepted for compatibility; results are saved")
    parser.add_argument("--save-txt", action="store_true", help="save results to *.txt")
    parser.add_argument("--save-format", type=int, default=0,
                        help="--save-txt box format: 0 YOLO (class x y w h), 1 Pascal-VOC (class x1 y1 x2 y2), "
                             "both normalized to 0-1")
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
    parser.add_argument("--dnn", action="store_true", help="use OpenCV DNN for ONNX inference")
    parser.add_argument("--vid-stride", type=int, default=1, help="video frame-rate stride")
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1  # expand
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("detect"):
        main(parse_opt())
