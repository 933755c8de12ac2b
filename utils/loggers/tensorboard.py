"""TensorBoard event files written with the `tensorboard` package alone, the same on both backends: scalars, images
and the model graph, in the run folder as official YOLOv5 writes them (`tensorboard --logdir runs/train`).

PyTorch's SummaryWriter is not used because OneFlow has none (and tensorboardX would be one more package); the
event protocol is tensorboard's own (EventFileWriter and its protos), which is what that SummaryWriter writes too.
The graph needs a tracer, which only PyTorch has: backend.tensorboard_graph gives the GraphDef or says why not.

TensorFlow is never imported for these files: the tensorboard package's file layer (`tensorboard.compat.tf`)
imports tensorflow when it is installed, and TensorFlow's bundled LLVM then collides with Triton's, which PyTorch's
DistributedDataParallel imports (through torch._dynamo): every DDP rank aborted with "LLVM ERROR: inconsistency in
registered CommandLine options" in an environment that holds both. The package's own stub writes local files the
same way (and rank 0 no longer spends seconds and hundreds of MB importing TensorFlow)."""
import sys
import time
import types
import warnings
from pathlib import Path

import cv2
import numpy as np

from utils import backend
from utils.atomic_files import log_file_opened
from utils.log import LOGGER, colorstr

PREFIX = colorstr("TensorBoard: ")


def _use_tensorboards_own_file_layer():
    """Make tensorboard.compat.tf resolve to tensorboard's TensorFlow stub, as the package's own no-TensorFlow build
    does: that build ships an empty module tensorboard.compat.notf, whose presence is what the package checks. Only
    until something resolves tensorboard.compat.tf: a process that already holds tensorflow keeps it."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))


def _c_record_checksums():
    """Every event record carries two CRC32C checksums, which tensorboard's own writer computes in pure Python: 0.17
    s of CPU a MB on a 2-core machine, and a short run's event file holds 3 MB (the graph, the result figures), the
    figures' part while the run's closing waits. google-crc32c's C implementation gives the same values where it is
    installed (requirements.txt); without it, or with only its pure-Python fallback, tensorboard's own stays."""
    try:
        import google_crc32c
        from tensorboard.summary.writer import record_writer
    except ImportError:
        return False
    if getattr(google_crc32c, "implementation", "") != "c":
        return False

    def masked_crc32c(data):  # the TFRecord mask: rotate right by 15 bits, add a constant
        x = google_crc32c.value(bytes(data))
        return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    record_writer.masked_crc32c = masked_crc32c
    return True


def available():
    """Whether the tensorboard package imports (its event writer is all this module needs)."""
    _use_tensorboards_own_file_layer()
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: F401
        return True
    except Exception:
        return False


class EventWriter:
    """add_scalar / add_image / add_graph_def into events.out.tfevents.* under logdir; flush(); close()."""

    def __init__(self, logdir):
        _use_tensorboards_own_file_layer()
        _c_record_checksums()
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        # flush_secs: written by the package's own thread; flush() each epoch keeps a killed run's scalars
        self._writer = EventFileWriter(str(logdir), max_queue_size=100, flush_secs=30)
        # the package made its file: announce it to the write module (the one output written around it)
        log_file_opened(getattr(self._writer, "_file_name", Path(logdir) / "events.out.tfevents"))

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
        """An image file (results.png, confusion_matrix.png, ...) as the image `path.stem`, as official names them.
        A PNG goes in as its own bytes (an image summary holds an encoded PNG): decoding and encoding the six result
        figures again took 0.8 s at the end of a 2-core run. Other files are decoded and stored as PNG."""
        data = Path(path).read_bytes()
        header = _png_header(data)
        if header is not None:
            w, h, channels = header
            img = self._summary.Image(height=h, width=w, colorspace=channels, encoded_image_string=data)
            self._add(step, summary=self._summary(value=[self._summary.Value(tag=Path(path).stem, image=img)]))
            return
        im = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if im is None:
            raise ValueError(f"could not read {path}")
        self.add_image(Path(path).stem, im[..., ::-1], step)

    def add_graph_def(self, graph_def):
        self._add(0, graph_def=graph_def.SerializeToString())

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # IHDR colour type -> channels (palette PNGs are decoded instead)


def _png_header(data):
    """(width, height, channels) of PNG bytes whose first chunk is a well-formed IHDR, else None."""
    if len(data) < 33 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    channels = _PNG_CHANNELS.get(data[25])
    return (w, h, channels) if channels and w > 0 and h > 0 else None


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
