"""What detect.py (and the segment and classify predict scripts) write for each image or frame: annotated images and
videos (one writer per source), label files (--save-txt), crops (--save-crop) and predictions.csv (--save-csv).

Every file goes through utils/atomic_files.py: written under a temporary name and renamed when whole, a failed write
stopping the run with one line that names the path (OpenCV's silent False included). Names never collide: see
OutputNames for the layout, crops take the first free name, and a file of this run is never written twice."""
import csv
import errno
import os
from pathlib import Path

import cv2
import numpy as np

from utils.atomic_files import numbered_unique_path, output_path, write_failed, write_image, write_text
from utils.inference.label_txt import label_lines
from utils.log import LOGGER, colorstr
from utils.path_names import safe_path_component
from utils.plots import Annotator, colors, save_one_box, write_crop

CSV_FIELDS = ["Image Name", "Prediction", "Confidence"]


class OutputNames:
    """Where each source's outputs go inside the run folder, decided once from the whole list of sources.

    The common case keeps the ultralytics layout: flat names, `<run>/<name>`, `labels/<stem>.txt`,
    `crops/<class>/<stem>.jpg`. That layout joins two sources with one stem (cam1/0001.jpg and cam2/0001.jpg of a
    glob, a *.txt list or a list of paths) into one picture and one label file, so when any two sources share a
    stem, every source keeps its path relative to the sources' common folder instead (`<run>/cam1/0001.jpg`,
    `labels/cam1/0001.txt`, `crops/<class>/cam1/0001.jpg`): the whole run switches, so its layout is one of the two,
    never a mix. Files that still share a stem (0001.jpg and 0001.png in one folder) keep their extension in it
    (`labels/0001.jpg.txt`). Streams with one name get their source number (`live_0.mp4`, `live_1.mp4`).
    Every part of a name is made one safe, UTF-8 path component (utf8_name, safe_path_component)."""

    def __init__(self, sources=(), stream=False):
        self.stream = stream
        sources = [str(s) for s in sources]
        self._by_key = {}  # source path (str) or stream index -> (relative output name, stem key)
        if stream:
            names = [_safe_name(Path(s).name) for s in sources]  # as ultralytics: the last part of the name
            taken = _duplicates(Path(n).stem for n in names)
            for i, n in enumerate(names):
                n = f"{Path(n).stem}_{i}{Path(n).suffix}" if Path(n).stem in taken else n
                self._by_key[i] = (Path(n), Path(n).stem)
            return
        if _duplicates(_safe_name(Path(s).stem) for s in sources):  # flat names would collide
            rels = _relative_to_common_folder(sources)
        else:
            rels = [Path(_safe_name(Path(s).name)) for s in sources]
        shared = _duplicates(str(r.with_suffix("")) for r in rels)
        for s, r in zip(sources, rels):
            stem = str(r) if str(r.with_suffix("")) in shared else str(r.with_suffix(""))
            self._by_key.setdefault(s, (r, stem))

    def of(self, i, p):
        """(relative output name, stem key) of source i's file p; a source not in the list gets its flat name."""
        found = self._by_key.get(i if self.stream else str(p))
        if found is None:
            name = Path(_safe_name(Path(str(p)).name))
            found = (name, name.stem)
        return found


def _safe_name(name):
    """One safe path component from a file name: UTF-8 text (OpenCV's writers take no other) and no separators."""
    return safe_path_component(utf8_name(name))


def _duplicates(keys):
    seen, dup = set(), set()
    for k in keys:
        (dup if k in seen else seen).add(k)
    return dup


def _relative_to_common_folder(sources):
    """Each source's path relative to the folder that holds them all, every part made safe."""
    absolute = [os.path.abspath(s) for s in sources]
    try:
        common = os.path.commonpath([os.path.dirname(a) for a in absolute])
    except ValueError:  # different drives (Windows): keep all but the drive
        common = ""
    rels = []
    for a in absolute:
        rel = os.path.relpath(a, common) if common else os.path.splitdrive(a)[1].lstrip("/\\")
        rels.append(Path(*[_safe_name(part) for part in Path(rel).parts]))
    return rels


class _OpenOutput:
    """An output written over many frames (a video, predictions.csv): it is written under the write module's
    temporary name for the whole run and renamed to its final name by finish(); fail() removes it and raises the
    one-line OutputWriteError. A previous run's file of that name (--exist-ok) is replaced only at finish()."""

    def __init__(self, path):
        self.path = Path(path)
        self._cm = output_path(self.path)
        self.tmp = self._cm.__enter__()

    def finish(self):
        cm, self._cm = self._cm, None
        if cm is not None:
            cm.__exit__(None, None, None)

    def fail(self, e):
        cm, self._cm = self._cm, None
        if cm is not None:
            cm.__exit__(type(e), e, e.__traceback__)  # removes the temporary file; raises OutputWriteError for OSError
        raise write_failed(self.path, e) if isinstance(e, OSError) else e


class DetectionOutputs:
    """sources: the source's files (LoadImages.files) or stream names (LoadStreams.sources, stream=True), from
    which OutputNames lays out the run folder; without them every file keeps its flat name.
    Use as a context manager (or call close()): videos and predictions.csv are renamed into place at the end.
    .saved counts the files written, .labels_saved the label files."""

    def __init__(self, save_dir, names, save_img=True, save_txt=False, save_format=0, save_conf=False,
                 save_crop=False, save_csv=False, view_img=False, line_thickness=3, hide_labels=False, hide_conf=False,
                 n_sources=1, sources=(), stream=False):
        self.save_dir, self.names = Path(save_dir), names
        self.save_img, self.save_txt, self.save_format, self.save_conf = save_img, save_txt, save_format, save_conf
        self.save_crop, self.save_csv, self.view_img = save_crop, save_csv, view_img
        self.line_thickness, self.hide_labels, self.hide_conf = line_thickness, hide_labels, hide_conf
        self.vid_path, self.vid_writer = [None] * n_sources, [None] * n_sources
        self._vid_out = [None] * n_sources
        self.csv_path = self.save_dir / "predictions.csv"
        self._csv = self._csv_file = self._csv_writer = None
        self.output_names = OutputNames(sources, stream)
        self._labels_this_run, self._crop_numbers = set(), {}
        self.saved, self.labels_saved = 0, 0

    def write(self, i, p, im0, det, frame, mode, vid_cap):
        """Source i's image or frame im0 (BGR, drawn on in place) and its detections det (n, 6) numpy [xyxy, conf,
        cls] in original pixels, from file p; returns the counts for the log line ('2 persons, 1 bus, ')."""
        names, s = self.names, ""
        rel, stem = self.output_names.of(i, p)
        imc = im0.copy() if self.save_crop else im0
        annotator = Annotator(im0, line_width=self.line_thickness, example=str(names))
        rows = det[:0]
        if len(det):
            det[:, :4] = det[:, :4].round()  # whole pixels, as ultralytics writes labels, crops and drawings
            for c in np.unique(det[:, 5]):
                n = int((det[:, 5] == c).sum())
                s += f"{n} {names[int(c)]}{'s' * (n > 1)}, "
            rows = det[::-1]  # lowest confidence first: the best boxes are drawn last, on top
            for *xyxy, conf, cls in rows.tolist():
                c = int(cls)
                if self.save_csv:
                    self._csv_row(Path(utf8_name(p)).name, names[c], f"{conf:.2f}")
                if self.save_img or self.save_crop or self.view_img:
                    label = None if self.hide_labels else (names[c] if self.hide_conf else f"{names[c]} {conf:.2f}")
                    annotator.box_label(xyxy, label, color=colors(c, True))
                if self.save_crop:
                    crops = self.save_dir / "crops" / safe_path_component(names[c])  # names come from the checkpoint
                    self._save_crop(crops / f"{stem}.jpg", save_one_box(xyxy, imc, BGR=True, save=False))
        if self.save_txt:
            self.write_labels(i, p, frame, mode, label_lines(rows, im0.shape, self.save_conf, self.save_format))
        if self.save_img:
            self.save_image(i, p, annotator.result(), mode, vid_cap)
        return s

    def _save_crop(self, file, crop):
        """crops/<class>/<stem>.jpg, <stem>-2.jpg, ... as the official crops (utils/plots.py write_crop), always a
        free name (never an old file's, however many there are); the count per name is kept, so a long video's crops
        are not slowed by probing every earlier one."""
        _, n = write_crop(file, crop, start=self._crop_numbers.get(file, 1))
        self._crop_numbers[file] = n + 1
        self.saved += 1

    def label_path(self, i, p, frame, mode):
        """labels/<stem>.txt for an image, labels/<stem>_<frame>.txt for a video or stream frame."""
        stem = self.output_names.of(i, p)[1]
        return self.save_dir / "labels" / f"{stem}{'' if mode == 'image' else f'_{frame}'}.txt"

    def write_labels(self, i, p, frame, mode, lines):
        """The label file of one image or frame, written whole: a rerun into the same folder (--exist-ok) replaces
        a previous run's file instead of appending to it. No rows and no file yet: no file (as ultralytics); no
        rows over a previous run's file: an empty file, so that what is there is this run's result."""
        f = self.label_path(i, p, frame, mode)
        if not lines and (f in self._labels_this_run or not f.exists()):
            return
        reserved = f in self._labels_this_run  # a name this run wrote (a video's frame file named like an image's)
        if reserved:
            f = numbered_unique_path(f, start=2, sep="_")[0]
        try:
            write_text(f, "".join(line + "\n" for line in lines))
        except BaseException:
            if reserved:
                _remove_reservation(f)
            raise
        self._labels_this_run.add(f)
        self.saved += 1
        self.labels_saved += 1

    def save_image(self, i, p, im0, mode, vid_cap):
        """The annotated image (mode 'image') or the next frame of source i's video (a video or stream)."""
        rel = self.output_names.of(i, p)[0]
        if mode == "image":
            name = rel if cv2.haveImageWriter(str(rel)) else rel.with_suffix(".jpg")  # .dng, .mpo: OpenCV reads only
            write_image(self.save_dir / name, im0)  # OpenCV's silent False is an error naming the file
            self.saved += 1
            return
        save_path = self.save_dir / self.output_names.of(i, p)[1]
        if self.vid_path[i] != save_path:  # a new video or stream: a new writer
            self._finish_video(i)
            self.vid_path[i] = save_path
            if vid_cap:  # a video file: its own rate and size
                fps = vid_cap.get(cv2.CAP_PROP_FPS) or 30
                w, h = int(vid_cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(vid_cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            else:  # a stream
                fps, w, h = 30, im0.shape[1], im0.shape[0]
            out = _OpenOutput(save_path.with_name(save_path.name + ".mp4"))  # results videos are always *.mp4
            self._vid_out[i] = out
            self.vid_writer[i] = cv2.VideoWriter(str(out.tmp), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
            if not self.vid_writer[i].isOpened():
                self.vid_writer[i], self._vid_out[i] = None, None
                out.fail(OSError(errno.EIO, "OpenCV could not open an mp4v video writer there"))
        self.vid_writer[i].write(im0)

    def _finish_video(self, i):
        if isinstance(self.vid_writer[i], cv2.VideoWriter):
            self.vid_writer[i].release()  # finalizes the file
        out, self.vid_writer[i], self._vid_out[i] = self._vid_out[i], None, None
        if out is not None:
            out.finish()
            self.saved += 1

    def _csv_row(self, image_name, prediction, confidence):
        try:
            if self._csv is None:  # this run's own file, replacing a previous run's (--exist-ok) when complete
                self._csv = _OpenOutput(self.csv_path)
                self._csv_file = open(self._csv.tmp, "w", newline="")
                self._csv_writer = csv.DictWriter(self._csv_file, fieldnames=CSV_FIELDS)
                self._csv_writer.writeheader()
            self._csv_writer.writerow({"Image Name": image_name, "Prediction": prediction, "Confidence": confidence})
        except OSError as e:
            self._close_csv_file()
            csv_out, self._csv = self._csv, None
            if csv_out is None:
                raise write_failed(self.csv_path, e) from e
            csv_out.fail(e)

    def _close_csv_file(self):
        f, self._csv_file = self._csv_file, None
        if f is not None:
            f.close()

    def close(self):
        """Finish every video and predictions.csv (renamed into place); raises the first failure after trying all."""
        first = None
        for i in range(len(self.vid_writer)):
            try:
                self._finish_video(i)
            except OSError as e:
                first = first or e
        if self._csv is not None:
            csv_out, self._csv = self._csv, None
            try:
                self._close_csv_file()
                csv_out.finish()
                self.saved += 1
            except OSError as e:
                try:
                    csv_out.fail(e)
                except OSError as e2:
                    first = first or e2
        if first is not None:
            raise first

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.close()
        except OSError:
            if exc is None:
                raise  # otherwise the run's own error is the one to report


def source_names(dataset, stream=False):
    """What OutputNames lays out: a LoadStreams' source names, or a LoadImages' files."""
    return list(getattr(dataset, "sources" if stream else "files", ()) or ())


def log_saved(outputs, save_dir, save_txt):
    """'Results saved to <run>' only when this run wrote something there, with the count of label files it wrote
    (not those of an earlier run in the same folder)."""
    if outputs.saved:
        s = f"\n{outputs.labels_saved} labels saved to {save_dir / 'labels'}" if save_txt else ""
        LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    elif outputs.save_img or save_txt:
        LOGGER.info(f"Nothing written to {save_dir}: no detections to save")


def _remove_reservation(f):
    """Remove the empty file that reserved a name whose write then failed (this run's own)."""
    try:
        f.unlink()
    except OSError:
        pass


def utf8_name(path):
    """path unchanged when it is UTF-8 text; else (a file name in another encoding, read through Python's
    surrogate escapes) the same bytes with each invalid one written as \\xNN, so the outputs keep a
    recognisable name."""
    path = str(path)
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
