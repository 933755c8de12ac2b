"""detect.py's loop: every frame of a source through pre-process, model, NMS and scale-back, written out by
DetectionOutputs, with one log line per frame (or per batch of stream frames)."""
from pathlib import Path

from utils import signals
from utils.inference.profile import Profile
from utils.inference.sources import ReadableFrames
from utils.inference.steps import preprocess, to_original
from utils.log import LOGGER
from utils.nms import non_max_suppression
from utils.paths import increment_path


def predict_source(model, dataset, outputs, stream=False, conf_thres=0.25, iou_thres=0.45, classes=None,
                   agnostic=False, max_det=1000, augment=False, visualize=False):
    """model: a DetectMultiBackend; dataset: what utils.inference.sources.open_source returns (stream tells which).
    visualize: draw every layer's feature maps into <save_dir>/<image stem>/ (.pt models; ultralytics' --visualize).
    Returns (images seen, the (pre-process, inference, NMS) Profiles, unreadable images skipped)."""
    profiles = Profile(model.device), Profile(model.device), Profile(model.device)
    frames, seen = ReadableFrames(dataset), 0
    signals.describe_on_disk(lambda: f"{outputs.save_dir} holds the results of the {seen} images done so far")
    for path, im, im0s, vid_cap, s in frames:
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with profiles[0]:
            x = preprocess(im, model.device, model.fp16)
        with profiles[1]:
            maps_dir = _feature_map_dir(outputs.save_dir, path) if visualize else False
            pred = model(x, augment=augment, visualize=maps_dir)
        with profiles[2]:
            pred = non_max_suppression(pred, conf_thres, iou_thres, classes, agnostic, max_det=max_det)
        for i, det in enumerate(pred):
            seen += 1
            if stream:  # one image per source
                p, im0, frame = Path(path[i]), im0s[i].copy(), dataset.count
                s += f"{i}: "
            else:
                p, im0, frame = Path(path), im0s.copy(), getattr(dataset, "frame", 0)
            s += "%gx%g " % tuple(x.shape[2:])
            det = to_original(det, x.shape[2:], im0.shape)
            s += outputs.write(i, p, im0, det, frame, dataset.mode, vid_cap)
        LOGGER.info(f"{s}{'' if len(det) else '(no detections), '}{profiles[1].dt * 1e3:.1f}ms")
    return seen, profiles, frames.skipped


def _feature_map_dir(save_dir, path):
    """<save_dir>/<image stem>, numbered when the name is taken (frames of a video: stem, stem2, ...)."""
    first = path[0] if isinstance(path, (list, tuple)) else path
    return increment_path(Path(save_dir) / Path(str(first)).stem, mkdir=True)
