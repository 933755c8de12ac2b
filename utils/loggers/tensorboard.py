"""TensorBoard event files written with the `tensorboard` package alone, the same on both backends: scalars, images
and the model graph, in the run folder as official YOLOv5 writes them (`tensorboard --logdir runs/train`).

PyTorch's SummaryWriter is not used because OneFlow has none (and tensorboardX would be one more package); the
event protocol is tensorboard's own (EventFileWriter and its protos), which is what that SummaryWriter writes too.
The graph needs a tracer, which only PyTorch has: backend.tensorboard_graph gives the GraphDef or says why not."""
import time
import warnings
from pathlib import Path

import cv2
import numpy as np

from utils import backend
from utils.log import LOGGER, colorstr

PREFIX = colorstr("TensorBoard: ")


def available():
    """Whether the tensorboard package imports (its event writer is all this module needs)."""
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: F401
        return True
    except Exception:
        return False


class EventWriter:
    """add_scalar / add_image / add_graph_def into events.out.tfevents.* under logdir; flush(); close()."""

    def __init__(self, logdir):
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        # flush_secs: written by the package's own thread; flush() each epoch keeps a killed run's scalars
        self._writer = EventFileWriter(str(logdir), max_queue_size=100, flush_secs=30)

    def _add(self, step, **fields):
        self._writer.add_event(self._event(wall_time=time.time(), step=int(step), **fields))

    def add_scalar(self, tag, value, step):
        self._add(step, summary=self._summary(value=[self._summary.Value(tag=tag, simple_value=float(value))]))

    def add_image(self, tag, image, step):
        """image: HWC uint8 RGB array, stored PNG-encoded (lossless)."""
        image = np.ascontiguousarray(image)
        ok, png = cv2.imencode(".png", image[..., ::-1])  # OpenCV encodes BGR
        if not ok:
            raise ValueError(f"could not encode image {tag} as PNG")
        h, w = image.shape[:2]
        img = self._summary.Image(height=h, width=w, colorspace=image.shape[2], encoded_image_string=png.tobytes())
        self._add(step, summary=self._summary(value=[self._summary.Value(tag=tag, image=img)]))

    def add_image_file(self, path, step):
        """An image file (results.png, confusion_matrix.png, ...) as the image `path.stem`, as official names them."""
        im = cv2.imread(str(path))
        if im is None:
            raise ValueError(f"could not read {path}")
        self.add_image(Path(path).stem, im[..., ::-1], step)

    def add_graph_def(self, graph_def):
        self._add(0, graph_def=graph_def.SerializeToString())

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()


def log_graph(writer, model, imgsz):
    """The model graph traced once with a zero image of imgsz (as official; zeros, so nothing in the model can see
    uninitialised memory), in eval mode so BatchNorm statistics are untouched. Where the framework has no tracer, one
    info line. Returns whether a graph was written."""
    imgsz = (imgsz, imgsz) if isinstance(imgsz, int) else tuple(imgsz)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's warnings about Python values in the graph
            graph_def = backend.tensorboard_graph(model, imgsz)
    except NotImplementedError as e:
        LOGGER.info(f"{PREFIX}no model graph: {e}")
        return False
    writer.add_graph_def(graph_def)
    return True
