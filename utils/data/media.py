"""Inference sources for detect.py: images and videos from a file, folder, glob or .txt list.

An image or video that cannot be read (damaged, over OpenCV's pixel limit, a name that is not UTF-8 text for
OpenCV's video reader) raises FileNotFoundError with one line saying why, after the iterator has moved past it,
so detect.py reports it and goes on with the next file (utils/inference/sources.ReadableFrames). Only regular files
are read: a FIFO, socket or device named like an image or video is skipped with a warning when listed, refused in
one line when read (utils/data/files.py), never opened to block.

LoadScreenshots, official's screen-capture source, is here by name only: screen capture is not supported, and
making one says so in one line (the StreamError a 'screen' --source gets from utils/streams.py)."""
import glob
import os
from pathlib import Path

import cv2
import numpy as np

from utils.augmentations import letterbox
from utils.data.files import (IMG_FORMATS, VID_FORMATS, NotRegularFileError, drop_special_files, open_regular_file,
                              special_file_kind)
from utils.streams import StreamError


class LoadImages:
    """Iterating yields (path, im letterboxed CHW RGB uint8, im0 original BGR, video capture or None, info string)."""

    def __init__(self, path, img_size=640, stride=32, auto=True, transforms=None, vid_stride=1):
        files = []
        paths = path if isinstance(path, (list, tuple)) else [path]
        for p in paths:
            p = str(Path(p).resolve()) if not any(c in str(p) for c in "*?[") else str(p)
            if str(p).endswith(".txt") and os.path.isfile(p):
                text = Path(p).read_text(errors="surrogateescape")  # names in another encoding stay the OS's bytes
                files += [x.strip() for x in text.splitlines() if x.strip() and "\0" not in x]
            elif any(c in p for c in "*?["):
                files += sorted(glob.glob(p, recursive=True))
            elif os.path.isdir(p):
                files += sorted(glob.glob(os.path.join(p, "*.*")))
            elif os.path.isfile(p):
                files.append(p)
            else:
                raise FileNotFoundError(f"{p} does not exist")
        files = drop_special_files(files)  # a FIFO named x.jpg or x.mp4 would block its first read for good
        images = [x for x in files if x.split(".")[-1].lower() in IMG_FORMATS]
        videos = [x for x in files if x.split(".")[-1].lower() in VID_FORMATS]
        ni, nv = len(images), len(videos)
        self.img_size = img_size
        self.stride = stride
        self.files = images + videos
        self.nf = ni + nv
        self.video_flag = [False] * ni + [True] * nv
        self.mode = "image"
        self.auto = auto
        self.transforms = transforms
        self.vid_stride = vid_stride
        self.cap = None
        if any(videos):
            self._new_video(videos[0])
        if self.nf == 0:
            raise FileNotFoundError(f"No images or videos found in {path}. Supported formats are: "
                                    f"images {IMG_FORMATS}, videos {VID_FORMATS}")

    def __iter__(self):
        self.count = 0
        return self

    def __next__(self):
        if self.count == self.nf:
            raise StopIteration
        path = self.files[self.count]
        if self.video_flag[self.count]:
            self.mode = "video"
            while True:
                if not self.cap.isOpened():  # moved past before raising: the caller skips it and goes on
                    self._next_file()
                    raise FileNotFoundError(f"video {path} cannot be opened ({video_problem(path)})")
                for _ in range(self.vid_stride):
                    self.cap.grab()
                ret_val, im0 = self.cap.retrieve()
                if ret_val:
                    break
                self._next_file()  # this video ended
                if self.count == self.nf:
                    raise StopIteration
                path = self.files[self.count]
            self.frame += 1
            s = f"video {self.count + 1}/{self.nf} ({self.frame}/{self.frames}) {path}: "
        else:
            self.count += 1
            im0 = read_image(path)
            s = f"image {self.count}/{self.nf} {path}: "
        if self.transforms:
            im = self.transforms(im0)
        else:
            im = letterbox(im0, self.img_size, stride=self.stride, auto=self.auto)[0]
            im = np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])  # HWC BGR -> CHW RGB
        return path, im, im0, self.cap, s

    def _next_file(self):
        self.cap.release()
        self.count += 1
        if self.count < self.nf:
            self._new_video(self.files[self.count])

    def _new_video(self, path):
        self.frame = 0
        try:
            if special_file_kind(path):  # became a FIFO or device after the listing: never opened to block
                raise cv2.error("not a regular file")
            self.cap = cv2.VideoCapture(path)
        except (UnicodeEncodeError, cv2.error):  # a file name OpenCV cannot take: reported when its turn comes
            self.cap = cv2.VideoCapture()
        self.frames = int(max(self.cap.get(cv2.CAP_PROP_FRAME_COUNT), 0) / self.vid_stride)

    def __len__(self):
        return self.nf


def video_problem(path):
    kind = special_file_kind(path)
    if kind:
        return f"it is {kind}, not a regular file"
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8 text, which OpenCV's video reader needs: rename it"
    return "not a video OpenCV/FFmpeg can decode, or damaged; check it plays, or convert it to .mp4"


def read_image(path, flags=cv2.IMREAD_COLOR):
    """An image file decoded to BGR (EXIF orientation applied, like cv2.imread), read by Python so that any file
    name the OS gives (non-ASCII, not UTF-8) opens. Raises FileNotFoundError naming the file and why (a FIFO or
    device named like an image is refused, never read)."""
    try:
        with open_regular_file(path) as f:
            data = np.fromfile(f, np.uint8)
        im = cv2.imdecode(data, flags)
    except cv2.error as e:
        if "CV_IO_MAX_IMAGE_PIXELS" in str(e):
            raise FileNotFoundError(f"image {path} is over OpenCV's pixel limit (CV_IO_MAX_IMAGE_PIXELS, 2^30 pixels "
                                    "by default): resize it, or set that variable higher") from None
        raise FileNotFoundError(f"image {path} cannot be decoded ({' '.join(str(e).split())[-120:]})") from None
    except NotRegularFileError as e:
        raise FileNotFoundError(f"image {e.strerror}") from None
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"image {path} cannot be read ({e})") from None
    if im is None:
        raise FileNotFoundError(f"Image Not Found {path} (not an image OpenCV can decode, or damaged)")
    return im


class LoadScreenshots:
    """Official's screen-capture source (source = 'screen [number] [left top width height]'). This project reads no
    screen (no mss, no display on its machines): making one raises StreamError, a one-line UserError."""

    def __init__(self, source, img_size=640, stride=32, auto=True, transforms=None):
        raise StreamError(f"LoadScreenshots({source!r}): screen capture is not supported here; read a file, folder, "
                          "camera index or stream URL with LoadImages or LoadStreams instead")
