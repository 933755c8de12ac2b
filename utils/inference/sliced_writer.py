"""detect.py --slice in the one predict loop (utils/inference/predict.py): the source read at its own size (no
letterbox), each frame predicted tile by tile by a SlicedPredictor, and the merged boxes, already in the frame's
pixels, handed to the task's own writer (annotated images, labels, crops, CSV as without --slice).

    dataset = open_sliced_source(source, stream)
    writer = SlicedWriter(DetectionWriter(outputs, conf_thres=0.25), SlicedPredictor(model, imgsz, settings))
    predict_source(model, dataset, writer, stream)"""
import numpy as np

from utils.data.media import LoadImages
from utils.errors import UserError


def _as_read(im0):
    return im0  # LoadImages' transforms hook: the frame as read, at its own size


def open_sliced_source(source, stream=False, vid_stride=1):
    """A LoadImages over source that yields each frame as read (its BGR pixels, no letterbox). Streams are refused
    in one line: a stream frame is gone before its tiles are run."""
    if stream:
        raise UserError(f"--slice runs on images and videos, not on the stream {source}: record it to a file first, "
                        "or leave out --slice")
    return LoadImages(str(source), transforms=_as_read, vid_stride=vid_stride)


class WholeFrame:
    """What the loop sees as the model input of one sliced frame: the frame itself, with the (1, 3, h, w) shape the
    log line reports."""

    def __init__(self, im0):
        self.im0 = im0
        self.shape = (1, 3, *im0.shape[:2])


class SlicedWriter:
    """The predict loop's writer for sliced prediction: inner is the task's writer (DetectionWriter; its NMS
    settings are the SlicedPredictor's), sliced a utils.inference.slicing.SlicedPredictor."""

    def __init__(self, inner, sliced):
        self.inner, self.sliced = inner, sliced

    @property
    def outputs(self):
        return self.inner.outputs

    @property
    def save_dir(self):
        return self.inner.save_dir

    def prepare(self, im, model):
        return WholeFrame(np.ascontiguousarray(im))

    def forward(self, model, x, path=None):
        """Every tile (and the full-image pass) of the frame: their boxes in frame pixels, before the merge."""
        return self.sliced.predict_raw(x.im0)

    def postprocess(self, raw):
        return [self.sliced.merge(raw)]

    def write(self, i, p, im0, det, input_hw, frame, mode, vid_cap):
        return self.inner.write(i, p, im0, det, tuple(im0.shape[:2]), frame, mode, vid_cap)  # already in im0 pixels

    def no_result_note(self, det):
        return self.inner.no_result_note(det)
