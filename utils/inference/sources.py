"""What detect.py reads: files, folders, globs, .txt lists and videos (LoadImages) or cameras and network streams
(LoadStreams), and the frames they yield with unreadable images reported and skipped."""
from utils.data.files import IMG_FORMATS, VID_FORMATS
from utils.data.media import LoadImages
from utils.log import LOGGER
from utils.streams import LoadStreams, is_stream_source


def is_stream(source):
    """True for a camera index, a *.streams list or a stream URL; raises StreamError for a file URL."""
    return is_stream_source(str(source), IMG_FORMATS + VID_FORMATS)


def open_source(source, stream, imgsz, stride=32, auto=True, vid_stride=1):
    """A LoadStreams (stream) or LoadImages over source, letterboxing to imgsz [h, w] (minimal padding with auto)."""
    if stream:
        return LoadStreams(str(source), img_size=imgsz, stride=stride, auto=auto, vid_stride=vid_stride)
    return LoadImages(str(source), img_size=imgsz, stride=stride, auto=auto, vid_stride=vid_stride)


class ReadableFrames:
    """Iterates a dataset like LoadImages, reporting and skipping the images that cannot be read instead of
    stopping; .skipped counts them."""

    def __init__(self, dataset):
        self.dataset, self.skipped = dataset, 0

    def __iter__(self):
        it = iter(self.dataset)
        while True:
            try:
                yield next(it)
            except StopIteration:
                return
            except FileNotFoundError as e:  # LoadImages has already moved past the bad file
                LOGGER.warning(f"WARNING: skipping {e}")
                self.skipped += 1

