"""The one predict loop, of detect.py, segment/predict.py and classify/predict.py: every frame of a source through
the task's pre-process, the model and the task's post-process, each image's result written by the task's writer,
with one log line per frame (or per batch of stream frames).

    writer = DetectionWriter(outputs, conf_thres=0.25)     # or SegmentationWriter, ClassificationWriter
    seen, profiles, skipped = predict_source(model, dataset, writer, stream)

A writer (utils/inference/detect_writer.py, classify_writer.py, utils/segment/predict_writer.py) holds what differs by task:
prepare(im, model) -> the network's input; forward(model, x, path) -> the raw output; postprocess(raw) -> one
prediction per image; write(i, p, im0, pred, input_hw, frame, mode, vid_cap) -> the image's text for the log line;
no_result_note(pred) -> what the line says when the last image has no result; save_dir. predict_batch is the one
place the model runs on predict's images: a step that changes how an image is run (tiles) wraps it.
"""
from pathlib import Path

from utils import signals
from utils.errors import UserError
from utils.inference.outputs import log_saved
from utils.inference.profile import Profile, ms_per_image
from utils.inference.sources import ReadableFrames
from utils.log import LOGGER


def predict_and_report(model, dataset, writer, source, stream, imgsz, save_txt, last_stage="NMS"):
    """A predict script's run after its model, source and writer are made: the model warmed up, every frame
    predicted and written (videos and predictions.csv renamed into place at the end, a stream closed), unreadable
    sources reported (none of source readable: a UserError), then the Speed and 'Results saved' lines. last_stage:
    what the Speed line calls the post-process. Returns the images seen."""
    model.warmup(imgsz=(1 if model.pt else (len(dataset) if stream else 1), 3, *imgsz))
    try:
        with writer.outputs:
            seen, profiles, skipped = predict_source(model, dataset, writer, stream)
    finally:
        if stream:
            dataset.close()
    if skipped:
        LOGGER.warning(f"WARNING: {skipped} unreadable image(s) or video(s) skipped")
        if not seen:  # nothing read at all: a failed run (exit 1), not an empty result
            raise UserError(f"none of the {skipped} image(s) or video(s) in {source} could be read "
                            "(each is named above): check the files, or give --source the right path")
    t = ms_per_image(profiles, seen)
    LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms {last_stage} per image at shape "
                f"{(1, 3, *imgsz)}" % t)
    log_saved(writer.outputs, writer.save_dir, save_txt)
    return seen


def predict_source(model, dataset, writer, stream=False):
    """model: a DetectMultiBackend; dataset: what utils.inference.sources.open_source returns (stream tells which),
    or a LoadImages / LoadStreams with the task's transforms; writer: the task's writer (module docstring).
    Returns (images seen, the (pre-process, inference, post-process) Profiles, unreadable images skipped)."""
    profiles = Profile(device=model.device), Profile(device=model.device), Profile(device=model.device)
    frames, seen = ReadableFrames(dataset), 0
    signals.describe_on_disk(lambda: f"{writer.save_dir} holds the results of the {seen} images done so far")
    for path, im, im0s, vid_cap, s in frames:
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with profiles[0]:
            x = writer.prepare(im, model)
        preds = predict_batch(model, x, writer, profiles, path)
        for i, pred in enumerate(preds):
            seen += 1
            p, im0, frame, s = _frame(dataset, stream, path, im0s, i, s)
            s += "%gx%g " % tuple(x.shape[2:])
            s += writer.write(i, p, im0, pred, tuple(x.shape[2:]), frame, dataset.mode, vid_cap)
        LOGGER.info(f"{s}{writer.no_result_note(pred)}{profiles[1].dt * 1e3:.1f}ms")
    return seen, profiles, frames.skipped


def predict_batch(model, x, task, profiles, path=None):
    """One frame's input x (or one batch of stream frames) through the model (timed by profiles[1]) and the task's
    post-process (profiles[2]); returns one prediction per image, in the input's pixels. path: the frame's source
    (the feature-map folder of --visualize is named after it)."""
    with profiles[1]:
        out = task.forward(model, x, path)
    with profiles[2]:
        return task.postprocess(out)


def _frame(dataset, stream, path, im0s, i, s):
    """Image i of a frame: (its source file, a copy of its original pixels to draw on, its frame number, the log
    line so far): a stream frame holds one image per source, each named by its number in the line."""
    if stream:
        return Path(path[i]), im0s[i].copy(), dataset.count, s + f"{i}: "
    return Path(path), im0s.copy(), getattr(dataset, "frame", 0), s
