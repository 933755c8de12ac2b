"""Run YOLOv5 instance segmentation on images, folders, globs, .txt lists, videos, cameras and streams (the flags
and outputs of ultralytics/yolov5's segment/predict.py).

Usage:
    python segment/predict.py --weights yolov5s-seg.pt --source img.jpg      # or a folder, glob, video, 0, URL
Outputs go to runs/predict-seg/exp*: images/videos with masks and boxes drawn, labels/*.txt with --save-txt (one
line per instance: class and its polygon x1 y1 x2 y2 ... normalized to 0-1, [conf] with --save-conf).
--retina-masks computes the masks at the original image size (sharper, slower).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":
    signals.install("detect")

import numpy as np  # noqa: E402

from utils.backend import inference_mode, to_numpy  # noqa: E402
from utils.cli_flags import FlagParser, add_predict_flags  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.boxes import scale_boxes  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.nms import non_max_suppression  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from models.from_record import build_any_model  # noqa: E402
from utils.inference import load_model, ms_per_image  # noqa: E402
from utils.inference.outputs import DetectionOutputs, log_saved, source_names  # noqa: E402
from utils.inference.profile import Profile  # noqa: E402
from utils.inference.sources import ReadableFrames, is_stream, open_source  # noqa: E402
from utils.inference.steps import preprocess  # noqa: E402
from utils.plots import colors  # noqa: E402
from utils.segment.masks import (draw_masks, masks2segments, process_mask, process_mask_native,  # noqa: E402
                                 scale_image, scale_segments)
from utils.shutdown import leave_quickly  # noqa: E402


class SegmentOutputs(DetectionOutputs):
    """DetectionOutputs with the masks blended into the drawn image and polygons as --save-txt lines."""

    def write_masks(self, i, p, im0, det, masks, segments, frame, mode):
        if len(det):
            draw_masks(im0, masks, [colors(int(c), True) for c in det[:, 5]])
        if getattr(self, "save_polygons", False):  # the file written whole: a rerun replaces it (write_labels)
            lines = []
            for j in range(len(det) - 1, -1, -1):  # lowest confidence first, as the official file
                seg = segments[j].reshape(-1)
                line = (int(det[j, 5]), *seg, det[j, 4]) if self.save_conf else (int(det[j, 5]), *seg)
                lines.append(("%g " * len(line)).rstrip() % line)
            self.write_labels(i, p, frame, mode, lines)


@inference_mode()
def run(weights=ROOT / "yolov5s-seg.pt", source=ROOT / "data/images", data=ROOT / "data/coco128.yaml",
        imgsz=(640, 640), conf_thres=0.25, iou_thres=0.45, max_det=1000, device="", view_img=False, save_txt=False,
        save_conf=False, save_crop=False, nosave=False, classes=None, agnostic_nms=False, augment=False,
        visualize=False, update=False, project=ROOT / "runs/predict-seg", name="exp", exist_ok=False,
        line_thickness=3, hide_labels=False, hide_conf=False, half=False, dnn=False, vid_stride=1,
        retina_masks=False):
    """Returns the run folder (Path)."""
    source = str(source)
    stream = is_stream(source)
    save_img = not nosave and not source.endswith(".txt")
    imgsz = list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz]
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz,
                              task="segment")
    dataset = open_source(source, stream, imgsz, stride=model.stride, auto=model.pt, vid_stride=vid_stride)
    bs = len(dataset) if stream else 1
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    # labels are written here as polygons, so DetectionOutputs' own box lines are off
    outputs = SegmentOutputs(save_dir, model.names, save_img, False, 0, save_conf, save_crop, False, view_img,
                             line_thickness, hide_labels, hide_conf, n_sources=bs,
                             sources=source_names(dataset, stream), stream=stream)
    outputs.save_polygons = save_txt
    model.warmup(imgsz=(1 if model.pt else bs, 3, *imgsz))
    profiles = Profile(model.device), Profile(model.device), Profile(model.device)
    frames = ReadableFrames(dataset)
    try:
        with outputs:  # videos are renamed into place on the way out
            seen = _predict(model, dataset, frames, outputs, profiles, stream, conf_thres, iou_thres, classes,
                            agnostic_nms, max_det, augment, retina_masks)
    finally:
        if stream:
            dataset.close()
    t = ms_per_image(profiles, seen)
    LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {(1, 3, *imgsz)}" % t)
    log_saved(outputs, save_dir, save_txt)
    if update:
        from utils.checkpoint.training import strip_optimizer
        strip_optimizer(weights[0] if isinstance(weights, (list, tuple)) else weights,
                        build_model=build_any_model)
    return save_dir


def _predict(model, dataset, frames, outputs, profiles, stream, conf_thres, iou_thres, classes, agnostic_nms,
             max_det, augment, retina_masks):
    """Every frame through the model, NMS and the masks, written by outputs; returns the images seen."""
    seen = 0
    for path, im, im0s, vid_cap, s in frames:
        signals.check()
        with profiles[0]:
            x = preprocess(im, model.device, model.fp16)
        with profiles[1]:
            out = model(x, augment=augment) if augment else model(x)
            pred, proto = out[0], out[1]
        with profiles[2]:
            pred = non_max_suppression(pred, conf_thres, iou_thres, classes, agnostic_nms, max_det=max_det, nm=32)
        proto = to_numpy(proto).astype(np.float32)
        for i, det in enumerate(pred):
            seen += 1
            if stream:
                p, im0, frame = Path(path[i]), im0s[i].copy(), dataset.count
                s += f"{i}: "
            else:
                p, im0, frame = Path(path), im0s.copy(), getattr(dataset, "frame", 0)
            s += "%gx%g " % tuple(x.shape[2:])
            det = to_numpy(det).astype(np.float32)
            in_hw = tuple(x.shape[2:])
            masks, segments = np.zeros((0, *im0.shape[:2]), bool), []
            if len(det):
                if retina_masks:
                    scale_boxes(in_hw, det[:, :4], im0.shape)
                    det[:, :4] = det[:, :4].round()
                    masks = process_mask_native(proto[i], det[:, 6:], det[:, :4], im0.shape[:2])
                    segments = [scale_segments(im0.shape, sg, im0.shape, normalize=True)
                                for sg in masks2segments(masks)]
                else:
                    masks_in = process_mask(proto[i], det[:, 6:], det[:, :4], in_hw, upsample=True)
                    scale_boxes(in_hw, det[:, :4], im0.shape)
                    det[:, :4] = det[:, :4].round()
                    segments = [scale_segments(in_hw, sg, im0.shape, normalize=True)
                                for sg in masks2segments(masks_in)]
                    masks = scale_image(in_hw, masks_in.transpose(1, 2, 0).astype(np.float32),
                                        im0.shape).transpose(2, 0, 1) > 0.5
            outputs.write_masks(i, p, im0, det, masks, segments, frame, dataset.mode)
            s += outputs.write(i, p, im0, det[:, :6], frame, dataset.mode, vid_cap)
        LOGGER.info(f"{s}{'' if len(det) else '(no detections), '}{profiles[1].dt * 1e3:.1f}ms")
    return seen


def parse_opt(argv=None):
    parser = FlagParser()
    add_predict_flags(parser, weights=ROOT / "yolov5s-seg.pt", data=ROOT / "data/coco128.yaml", imgsz=640,
                      project=ROOT / "runs/predict-seg")
    parser.add_argument("--retina-masks", action="store_true", help="whether to plot masks in native resolution")
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("predict"):
        main(parse_opt())
    leave_quickly()
