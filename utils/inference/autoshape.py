"""AutoShape: a detection model that takes images the way users hold them, and Detections, what it returns.

    model = AutoShape(attempt_load("yolov5n.pt"))        # what hubconf.py returns
    results = model(["data/images/still_life.jpg", pil_image, rgb_array], size=640)
    results.print()                                       # image 1/3: 1080x810 1 bowl, 1 apple, ...
    results.xyxy[0]                                       # (n, 6) tensor [x1, y1, x2, y2, conf, cls], original pixels
    results.pandas().xyxy[0]                              # the same as a DataFrame with class names
    results.save(save_dir="runs/detect/exp")              # annotated copies, one file per input

Inputs (the official conventions): a path (str or Path), a PIL image, a numpy HWC array in RGB order (an OpenCV
image is `cv2.imread(f)[..., ::-1]`), a list or tuple of those, or a BCHW tensor in [0, 1], which goes straight to
the model and returns its raw output (so `torch.jit.trace(model, [im])` traces the network). http(s) URLs are
refused: nothing is downloaded at run time.

Users import both classes from models.common (the official path); this module keeps them out of that file.
"""
import os
import sys
from copy import copy
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageOps

from models.yolo import Detect
from utils.atomic_files import numbered_unique_path, output_path
from utils.augmentations import letterbox
from utils.backend import autocast, from_numpy, inference_mode, nn, to_numpy, torch
from utils.boxes import xyxy2xywh
from utils.errors import UserError
from utils.img_size import make_divisible
from utils.inference.profile import Profile
from utils.inference.slicing import SlicedPredictor
from utils.inference.steps import preprocess, to_original
from utils.log import LOGGER, colorstr
from utils.nms import non_max_suppression
from utils.path_names import safe_path_component
from utils.paths import increment_path
from utils.plots import Annotator, colors, save_one_box
from utils.tiles import SliceSettings

PUBLIC_MODULE = "models.common"  # where users import these classes from; their repr and pickles name it


class ImageInputError(UserError):
    """An AutoShape input that is not an image it can read; the message names the input and what to pass."""


def _is_url(s):
    return str(s).lower().startswith(("http:/", "https:/", "rtsp:/", "rtmp:/"))  # Path() folds '//' into '/'


def _pil_to_rgb_array(im):
    im = ImageOps.exif_transpose(im)  # phone photos store their rotation in EXIF
    return np.asarray(im if im.mode == "RGB" else im.convert("RGB"))


def load_image(im, i=0):
    """One AutoShape input -> (HWC RGB numpy array with 3 channels, file name it came from or 'image{i}')."""
    f = f"image{i}"
    if isinstance(im, (str, Path)):
        if _is_url(im):
            raise ImageInputError(f"{im}: images are not downloaded here (no network access at run time); "
                                  "download it yourself and pass the local file path")
        if not Path(im).is_file():
            raise ImageInputError(f"image not found: {im} (pass an existing file path, a PIL image or an array)")
        try:
            with Image.open(im) as pil:
                arr = _pil_to_rgb_array(pil)
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            raise ImageInputError(f"{im}: not an image PIL can read ({e}); pass a JPEG, PNG, BMP, TIFF or WebP "
                                  "file") from None
        f = im
    elif isinstance(im, Image.Image):
        arr, f = _pil_to_rgb_array(im), getattr(im, "filename", f) or f
    elif isinstance(im, np.ndarray):
        arr = im
    else:
        raise ImageInputError(f"AutoShape input {i} is a {type(im).__name__}: pass a file path, a PIL image, a numpy "
                              "HWC RGB array, a list of those, or a BCHW tensor")
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[2] not in (1, 3, 4):
        arr = arr.transpose((1, 2, 0))  # CHW, as a data loader yields it
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)  # grayscale -> 3 equal channels
    if arr.ndim != 3 or arr.shape[2] < 3 or min(arr.shape[:2]) < 1:
        raise ImageInputError(f"AutoShape input {i} has shape {arr.shape}: expected an HWC (or CHW) image with 1, 3 "
                              "or 4 channels")
    return np.ascontiguousarray(arr[..., :3]), Path(str(f)).with_suffix(".jpg").name


def _detect_layers(model):
    return [m for m in model.modules() if isinstance(m, Detect)]


class AutoShape(nn.Module):
    """Wraps a detection model (what attempt_load or DetectMultiBackend returns: .stride, .names, forward) so it
    takes paths, PIL images, numpy arrays or lists of them, letterboxes them to one batch, runs NMS with the
    class attributes below (set them on an instance to change them) and returns :class:`Detections`."""

    conf = 0.25  # NMS confidence threshold
    iou = 0.45  # NMS IoU threshold
    agnostic = False  # class-agnostic NMS
    multi_label = False  # one row per (box, class) above conf instead of the best class only
    classes = None  # keep only these class ids, e.g. [0, 15, 16]
    max_det = 1000  # detections kept per image
    amp = False  # mixed-precision inference (CUDA only)

    def __init__(self, model, verbose=True):
        super().__init__()
        if verbose:
            LOGGER.info("Adding AutoShape... ")
        for k in ("yaml", "nc", "hyp", "names", "stride", "abc"):
            if hasattr(model, k):
                setattr(self, k, getattr(model, k))
        if getattr(self, "stride", None) is None:
            self.stride = 32
        if not getattr(self, "names", None):
            nc = int(getattr(model, "nc", 0) or (getattr(model, "yaml", None) or {}).get("nc", 0))
            self.names = {i: str(i) for i in range(nc)}
        elif isinstance(self.names, (list, tuple)):
            self.names = dict(enumerate(self.names))
        # DetectMultiBackend (it has warmup() and a .pt flag) may hold a TorchScript or ONNX model instead.
        self.dmb = hasattr(model, "warmup") and hasattr(model, "pt")
        self.pt = not self.dmb or bool(model.pt)
        self.model = model.eval()
        if self.pt:
            for m in _detect_layers(self.model):
                m.inplace = False  # safe when several threads share the model
                m.export = True  # official Detect layers then return only the decoded boxes

    def _reference(self):
        """A tensor with the model's device and input dtype."""
        if self.pt:
            return next(self.model.parameters())
        return torch.empty(1, device=self.model.device)

    @inference_mode()
    def forward(self, ims, size=640, augment=False, profile=False, slice=None):
        """ims: see the module docstring. size: the longer side to infer at (int) or (h, w). slice: sliced
        inference, each image cut into tiles of this size (an int, (h, w), or a utils.tiles.SliceSettings for the
        overlap and merge), each tile inferred at size, the boxes merged (docs/sliced-inference.md)."""
        dt = (Profile(), Profile(), Profile())
        with dt[0]:
            size = (size, size) if isinstance(size, int) else tuple(size)
            p = self._reference()
            if isinstance(ims, torch.Tensor):
                with autocast(p.device, enabled=self.amp):
                    return self.model(ims.to(p.device).to(p.dtype), augment=augment)

            n, ims = (len(ims), list(ims)) if isinstance(ims, (list, tuple)) else (1, [ims])
            if n == 0:
                raise ImageInputError("AutoShape got an empty list of images")
            shape0, shape1, files = [], [], []  # original (h, w), scaled (h, w), file names
            for i, im in enumerate(ims):
                ims[i], f = load_image(im, i)
                files.append(f)
                s = ims[i].shape[:2]
                shape0.append(s)
                g = max(size) / max(s)  # the longer side becomes max(size)
                shape1.append([int(y * g) for y in s])
            if slice is not None:
                return self._sliced(ims, files, size, slice, augment, dt)
            shape1 = [make_divisible(x, self.stride) for x in np.array(shape1).max(0)]  # one shape for the batch
            x = np.stack([letterbox(im, shape1, auto=False)[0] for im in ims]).transpose((0, 3, 1, 2))
            x = preprocess(np.ascontiguousarray(x), p.device, half=p.dtype == torch.float16)

        with autocast(p.device, enabled=self.amp):
            with dt[1]:
                y = self.model(x, augment=augment)
            with dt[2]:
                y = non_max_suppression(y, self.conf, self.iou, self.classes, self.agnostic, self.multi_label,
                                        max_det=self.max_det)
                for i in range(n):
                    y[i] = from_numpy(to_original(y[i], shape1, shape0[i])).to(y[i].device)
        return Detections(ims, y, files, dt, self.names, x.shape)


    def _sliced(self, ims, files, size, slice, augment, dt):
        """forward(..., slice=...): each (RGB) image through a SlicedPredictor with this model's NMS settings."""
        settings = slice if isinstance(slice, SliceSettings) else SliceSettings.of(slice)
        p = self._reference()
        sliced = SlicedPredictor(self.model, max(size), settings, self.conf, self.iou, self.classes, self.agnostic,
                                 self.max_det, augment, self.multi_label, device=p.device,
                                 half=p.dtype == torch.float16)
        with autocast(p.device, enabled=self.amp), dt[1]:
            y = [from_numpy(sliced.predict(np.ascontiguousarray(im[..., ::-1]))).to(p.device) for im in ims]
        return Detections(ims, y, files, dt, self.names, (len(ims), 3, *size))


AutoShape.__module__ = PUBLIC_MODULE


def _save_image(im, path):
    """An RGB array saved by PIL (the official writer: same bytes) through the write module: whole or not at all,
    a failure raised as OutputWriteError naming the path."""
    with output_path(path) as tmp:
        Image.fromarray(im).save(tmp, format=Image.registered_extensions().get(Path(path).suffix.lower(), "JPEG"))


def _can_show_windows():
    return sys.platform in ("win32", "darwin") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _notebook_display():
    """IPython's display() inside a notebook kernel, else None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or "IPKernelApp" not in getattr(shell, "config", {}):
        return None
    from IPython.display import display  # optional dependency: only inside a notebook
    return display


class Detections:
    """Results of one AutoShape call: per-image (n, 6) tensors [x1, y1, x2, y2, conf, cls] in original pixels
    (.xyxy, also .xywh and the normalized .xyxyn/.xywhn), the RGB images (.ims), file names (.files), class names
    (.names), per-image times in ms (.t: pre-process, inference, NMS) and the inference BCHW shape (.s)."""

    def __init__(self, ims, pred, files, times=(), names=None, shape=None):
        d = pred[0].device if len(pred) else "cpu"
        gn = [torch.tensor([im.shape[1], im.shape[0], im.shape[1], im.shape[0], 1.0, 1.0], dtype=torch.float32,
                           device=d) for im in ims]
        self.ims = ims  # RGB numpy arrays
        self.pred = pred
        self.names = names
        self.files = files
        self.times = times
        self.xyxy = pred
        self.xywh = [xyxy2xywh(x) for x in pred]
        self.xyxyn = [x / g for x, g in zip(self.xyxy, gn)]
        self.xywhn = [x / g for x, g in zip(self.xywh, gn)]
        self.n = len(self.pred)  # number of images
        self.t = tuple(x.t / max(self.n, 1) * 1e3 for x in times)  # ms per image
        self.s = tuple(shape) if shape is not None else None

    def _counts(self, pred):
        """'2 persons, 1 bus' (classes in id order), as the official printout words it."""
        cls = to_numpy(pred[:, 5]).astype(int)
        parts = []
        for c in np.unique(cls):
            k = int((cls == c).sum())
            parts.append(f"{k} {self.names[int(c)]}{'s' * (k > 1)}")
        return ", ".join(parts)

    def _run(self, pprint=False, show=False, save=False, crop=False, render=False, labels=True, save_dir=Path("")):
        s, crops, saved_names = "", [], set()
        draw = show or save or render or crop
        display = _notebook_display() if show else None
        for i, (im, pred) in enumerate(zip(self.ims, self.pred)):
            s += f"\nimage {i + 1}/{len(self.pred)}: {im.shape[0]}x{im.shape[1]} "
            s += self._counts(pred) if pred.shape[0] else "(no detections)"
            if draw:
                im = np.ascontiguousarray(im if im.dtype == np.uint8 else np.clip(im, 0, 255).astype(np.uint8))
            if draw and pred.shape[0]:
                annotator = Annotator(im.copy(), example=str(self.names))  # never draw on the caller's array
                im_bgr = np.ascontiguousarray(im[..., ::-1]) if crop else None
                for j in range(pred.shape[0] - 1, -1, -1):  # lowest confidence first: best boxes end on top
                    *box, conf, cls = pred[j]
                    label = f"{self.names[int(cls)]} {float(conf):.2f}"
                    if crop:
                        file = None if not save else \
                            save_dir / "crops" / safe_path_component(self.names[int(cls)]) / safe_path_component(
                                self.files[i])  # class names come from the weights, file names from the inputs
                        crops.append({"box": box, "conf": conf, "cls": cls, "label": label,
                                      "im": save_one_box(box, im_bgr, file=file, BGR=True, save=save)})  # BGR crop
                    else:
                        annotator.box_label(box, label if labels else "", color=colors(cls))
                im = annotator.result()
            if show:
                self._show_one(im, i, display)
            if save:
                _save_image(im, self._save_path(save_dir, i, saved_names))
                if i == self.n - 1:
                    LOGGER.info(f"Saved {self.n} image{'s' * (self.n > 1)} to {colorstr('bold', save_dir)}")
            if render:
                self.ims[i] = im
        if pprint:
            s = s.lstrip("\n")
            return f"{s}\nSpeed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {self.s}" % \
                (self.t if len(self.t) == 3 else (0.0, 0.0, 0.0))
        if crop:
            if save:
                LOGGER.info(f"Saved results to {save_dir}\n")
            return crops

    def _save_path(self, save_dir, i, saved_names):
        """save_dir/<file name> of image i (a rerun with exist_ok replaces it, as ultralytics does); a name that an
        earlier image of this call already took (two inputs called x.jpg from different folders, or two arrays
        both image0.jpg across tolist()) gets the first free x2.jpg, x3.jpg, ... instead of overwriting it."""
        path = Path(save_dir) / safe_path_component(self.files[i])  # file names come from the inputs
        if path.name in saved_names:
            path = numbered_unique_path(path, start=2)[0]
        saved_names.add(path.name)
        return path

    def _show_one(self, im, i, display):
        pil = Image.fromarray(im)
        if display is not None:
            display(pil)
        elif _can_show_windows():
            try:
                pil.show(self.files[i])
            except Exception as e:  # no viewer installed: the results are still there to save or render
                LOGGER.warning(f"WARNING: Showing images is not supported in this environment ({e})")
        elif i == 0:
            LOGGER.warning("WARNING: Showing images is not supported in this environment (no display); "
                           "use .save() or .render() instead")

    def show(self, labels=True):
        """Display the annotated images (a notebook cell, or the system viewer when there is a display)."""
        self._run(show=True, labels=labels)

    def save(self, labels=True, save_dir="runs/detect/exp", exist_ok=False):
        """Write annotated copies as save_dir/<file name> (save_dir incremented to exp2, exp3... unless exist_ok)."""
        save_dir = increment_path(save_dir, exist_ok, mkdir=True)
        self._run(save=True, labels=labels, save_dir=save_dir)

    def crop(self, save=True, save_dir="runs/detect/exp", exist_ok=False):
        """One dict per box (box, conf, cls, label, im = the BGR crop); with save, crops/<class>/<file> files and
        the (unannotated) images are written to save_dir."""
        save_dir = increment_path(save_dir, exist_ok, mkdir=True) if save else None
        return self._run(crop=True, save=save, save_dir=save_dir)

    def render(self, labels=True):
        """Draw the boxes into .ims (RGB arrays) and return them."""
        self._run(render=True, labels=labels)
        return self.ims

    def pandas(self):
        """A copy whose .xyxy/.xyxyn/.xywh/.xywhn are lists of DataFrames with class names."""
        new = copy(self)
        ca = "xmin", "ymin", "xmax", "ymax", "confidence", "class", "name"
        cb = "xcenter", "ycenter", "width", "height", "confidence", "class", "name"
        for k, c in zip(["xyxy", "xyxyn", "xywh", "xywhn"], [ca, ca, cb, cb]):
            rows = [[[*r[:5], int(r[5]), self.names[int(r[5])]] for r in x.tolist()] for x in getattr(self, k)]
            setattr(new, k, [pd.DataFrame(r, columns=c) for r in rows])
        return new

    def tolist(self):
        """One single-image Detections per image: `for r in results.tolist(): ...`."""
        return [Detections([self.ims[i]], [self.pred[i]], [self.files[i]], self.times, self.names, self.s)
                for i in range(self.n)]

    def print(self):
        LOGGER.info(self.__str__())

    def __len__(self):
        return self.n

    def __str__(self):
        return self._run(pprint=True)

    def __repr__(self):
        return f"YOLOv5 {self.__class__} instance\n" + self.__str__()


Detections.__module__ = PUBLIC_MODULE
