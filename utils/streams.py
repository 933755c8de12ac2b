"""Live sources for detect.py: cameras (--source 0), network streams (rtsp://, rtmp://, http(s):// URLs that are not
files) and *.streams files (one source a line), all opened with OpenCV, as ultralytics' LoadStreams.

Each source has a reader thread that keeps only the newest frame, so a slow model skips frames instead of falling
behind a live camera. Iterating yields (sources, im (n, 3, h, w) letterboxed RGB uint8, [im0 BGR per source], None,
'') and stops when any source ends (a video file read as a stream, a stream that could not be reopened).
"""
import ipaddress
import math
import os
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import cv2
import numpy as np

from utils.augmentations import letterbox
from utils.errors import UserError
from utils.log import LOGGER

STREAM_SCHEMES = ("rtsp://", "rtmp://", "http://", "https://")
_UNSAFE_NAME_CHARS = re.compile(r"[|@#!¡·$€%&()=?¿^*;:,¨´><+]")


class StreamError(UserError):
    pass


def clean_str(s):
    """s with the characters that are unsafe in a file name (|@#!... as ultralytics lists them) replaced by '_'."""
    return _UNSAFE_NAME_CHARS.sub("_", s)


def is_stream_source(source, file_formats=()):
    """True for a camera index, a *.streams list or a URL that is not an image/video file (ultralytics' rule)."""
    s = str(source)
    is_url = s.lower().startswith(STREAM_SCHEMES)
    is_file = Path(urlparse(s).path if is_url else s).suffix[1:].lower() in file_formats
    if is_url and is_file:
        raise StreamError(f"--source {s}: a file on the network; this project downloads nothing at run time: "
                          "download it and pass its local path")
    if s.lower().startswith("screen"):
        raise StreamError(f"--source {s}: screen capture is not supported here; pass a file, folder, camera index "
                          "or stream URL")
    return s.isnumeric() or s.endswith(".streams") or is_url


def _link_local_address(host):
    """The first link-local address (169.254.0.0/16, fe80::/10) host names or resolves to, else None. Resolving
    also catches the spellings of 169.254.169.254 that are no dotted quad ('2852039166', '0xa9.0xfe.0xa9.0xfe')."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):  # unresolvable: OpenCV will fail to open it and say so
        return None
    for a in sorted(addresses):
        ip = ipaddress.ip_address(a.split("%")[0])
        ip = getattr(ip, "ipv4_mapped", None) or ip
        if ip.is_link_local:
            return str(ip)
    return None


def check_listed_source(s, where):
    """A line of a .streams file (where: 'file, line n'): a camera index or an rtsp/rtmp/http/https URL whose host is
    not link-local, else StreamError. A .streams file is a file, not the person at the keyboard: it may not make
    this program read local files (file://, a path, FFmpeg's other protocols) or the link-local range where cloud
    machines serve their credentials (169.254.169.254). A URL given as --source itself is the user's own choice."""
    if s.isnumeric():
        return s
    if not s.lower().startswith(STREAM_SCHEMES):
        raise StreamError(f"{where}: '{s}' is not a camera index or an rtsp://, rtmp://, http:// or https:// URL, the "
                          "only sources a .streams file may list; pass a local file or folder as --source itself")
    host = urlparse(s).hostname
    address = _link_local_address(host) if host else None
    if address:
        raise StreamError(f"{where}: {s} is at the link-local address {address} (169.254.0.0/16 or fe80::/10, where "
                          "cloud machines serve their credentials), which a .streams file may not open; if it is your "
                          "camera, pass the URL as --source itself")
    return s


def read_sources(source):
    """The list of sources: the lines of a *.streams file (each checked by check_listed_source), or the one source
    given."""
    s = str(source)
    if s.endswith(".streams"):
        if not os.path.isfile(s):
            raise StreamError(f"--source {s}: file not found; a .streams file lists one camera index or URL a line")
        try:
            text = Path(s).read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise StreamError(f"--source {s}: cannot be read as a text list of sources ({e})") from None
        lines = [(n, x.strip()) for n, x in enumerate(text.splitlines(), 1) if x.strip()]
        if not lines:
            raise StreamError(f"--source {s}: the file lists no sources (one camera index or URL a line)")
        return [check_listed_source(x, f"{s}, line {n}") for n, x in lines]
    return [s]


def _open_quietly(s):
    """cv2.VideoCapture without OpenCV's own warnings (V4L2 and FFmpeg each log a line when a camera index is not
    there): when it fails, the StreamError that follows says so in one line that names the source."""
    log = getattr(getattr(cv2, "utils", None), "logging", None)  # OpenCV 5; 4.x has cv2.get/setLogLevel
    get_level, set_level = (log.getLogLevel, log.setLogLevel) if log else \
        (getattr(cv2, "getLogLevel", None), getattr(cv2, "setLogLevel", None))
    level = get_level() if get_level and set_level else None
    if level is not None:
        set_level(0)  # LOG_LEVEL_SILENT: some builds log a missing camera as an error too
    try:
        return cv2.VideoCapture(int(s) if s.isnumeric() else s)
    finally:
        if level is not None:
            set_level(level)


def _describe(s):
    return f"camera {s}" if s.isnumeric() else s


class _Reader:
    """One source: a thread that grabs frames and keeps the newest. cond is shared by all the sources' readers, so
    the consumer wakes up on a new frame from any of them."""

    def __init__(self, source, cap, first_frame, vid_stride, frames, cond):
        self.source, self.cap, self.vid_stride, self.frames = source, cap, vid_stride, frames
        self.frame, self.seq, self.alive = first_frame, 1, True
        self.cond, self.stop = cond, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"stream {source}")
        self.thread.start()

    def _run(self):
        n = 1  # the first frame was read when the source was opened
        try:
            while not self.stop.is_set() and self.cap.isOpened() and n < self.frames:
                n += 1
                if not self.cap.grab():
                    if self.frames != float("inf"):
                        break  # a file read as a stream: its end
                    LOGGER.warning(f"WARNING: {_describe(self.source)} stopped sending frames; reopening it")
                    if not self.cap.open(int(self.source) if self.source.isnumeric() else self.source):
                        break
                    continue
                if n % self.vid_stride:
                    continue
                ok, im = self.cap.retrieve()
                if ok:
                    with self.cond:
                        self.frame, self.seq = im, self.seq + 1
                        self.cond.notify_all()
                time.sleep(0.0)  # let the main thread run
        finally:
            with self.cond:
                self.alive = False
                self.cond.notify_all()
            self.cap.release()


class LoadStreams:
    def __init__(self, sources="file.streams", img_size=640, stride=32, auto=True, transforms=None, vid_stride=1):
        self.mode = "stream"
        self.img_size, self.stride, self.vid_stride, self.transforms = img_size, stride, vid_stride, transforms
        srcs = read_sources(sources)
        self.sources = [clean_str(x) for x in srcs]  # names for the saved files
        self.readers, self.fps, self.frames = [], [], []
        self._cond = threading.Condition()
        n = len(srcs)
        # FFmpeg's own log lines ("Connection refused" ...) would come before ours, which names the source and what to
        # do; FFMPEG_LOGLEVEL set by the user wins
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
        try:
            for i, s in enumerate(srcs):
                cap = _open_quietly(s)
                if not cap.isOpened():
                    cap.release()
                    raise StreamError(f"--source {s}: nothing to read ({_describe(s)} could not be opened by "
                                      "OpenCV); check the camera index or the URL and that it is streaming")
                ok, im = cap.read()
                if not ok:
                    cap.release()
                    raise StreamError(f"--source {s}: {_describe(s)} opened but sent no frame; check that it is "
                                      "streaming")
                w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
                fps = cap.get(cv2.CAP_PROP_FPS)
                frames = max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0) or float("inf")  # live: no end
                self.fps.append(max((fps if math.isfinite(fps) else 0) % 100, 0) or 30)
                self.frames.append(frames)
                self.readers.append(_Reader(s, cap, im, max(int(vid_stride), 1), frames, self._cond))
                LOGGER.info(f"{i + 1}/{n}: {s}... Success ({frames} frames {w}x{h} at {self.fps[-1]:.2f} FPS)")
        except BaseException:
            self.close()
            raise
        LOGGER.info("")
        shapes = {letterbox(r.frame, img_size, stride=stride, auto=auto)[0].shape for r in self.readers}
        self.rect = len(shapes) == 1  # one batch shape for all sources: letterbox to the smallest stride multiple
        self.auto = auto and self.rect
        if not self.rect:
            LOGGER.warning("WARNING: Stream shapes differ. For optimal performance supply similarly-shaped streams.")
        self._yielded = [0] * n

    def __iter__(self):
        self.count = -1
        return self

    def __next__(self):
        """Waits for a frame not yielded before from any source, then returns the newest frame of each."""
        self.count += 1
        with self._cond:
            while True:
                fresh = [r.seq > y for r, y in zip(self.readers, self._yielded)]
                ended = any(not r.alive and not f for r, f in zip(self.readers, fresh))
                if ended or any(fresh):
                    break
                self._cond.wait(timeout=1.0)
            if not ended:
                im0 = [r.frame.copy() for r in self.readers]
                self._yielded = [r.seq for r in self.readers]
        if ended:
            self.close()
            raise StopIteration
        if self.transforms:
            im = np.stack([self.transforms(x) for x in im0])
        else:
            im = np.stack([letterbox(x, self.img_size, stride=self.stride, auto=self.auto)[0] for x in im0])
            im = np.ascontiguousarray(im[..., ::-1].transpose((0, 3, 1, 2)))  # BGR HWC -> RGB CHW
        return self.sources, im, im0, None, ""

    def close(self):
        """Stops the reader threads; each releases its capture itself (a capture is not shared between threads)."""
        for r in self.readers:
            r.stop.set()
        for r in self.readers:
            r.thread.join(timeout=2)

    def __len__(self):
        return len(self.sources)
