"""What detect.py writes for each image or frame: annotated images and videos (one writer per source), label
files (--save-txt), crops (--save-crop) and predictions.csv (--save-csv)."""
import csv
import os
from pathlib import Path

import cv2
import numpy as np

from utils.inference.label_txt import write_label_txt
from utils.path_names import safe_path_component
from utils.plots import Annotator, colors, save_one_box


class DetectionOutputs:
    def __init__(self, save_dir, names, save_img=True, save_txt=False, save_format=0, save_conf=False,
                 save_crop=False, save_csv=False, view_img=False, line_thickness=3, hide_labels=False, hide_conf=False,
                 n_sources=1):
        self.save_dir, self.names = Path(save_dir), names
        self.save_img, self.save_txt, self.save_format, self.save_conf = save_img, save_txt, save_format, save_conf
        self.save_crop, self.save_csv, self.view_img = save_crop, save_csv, view_img
        self.line_thickness, self.hide_labels, self.hide_conf = line_thickness, hide_labels, hide_conf
        self.vid_path, self.vid_writer = [None] * n_sources, [None] * n_sources
        self.csv_path = self.save_dir / "predictions.csv"

    def write(self, i, p, im0, det, frame, mode, vid_cap):
        """Source i's image or frame im0 (BGR, drawn on in place) and its detections det (n, 6) numpy [xyxy, conf,
        cls] in original pixels, from file p; returns the counts for the log line ('2 persons, 1 bus, ')."""
        names, s = self.names, ""
        p = Path(utf8_name(p))  # OpenCV's writers take UTF-8 text only (a not-UTF-8 name crashed imwrite)
        name, stem = safe_path_component(p.name), safe_path_component(p.stem)  # file and stream names become paths
        imc = im0.copy() if self.save_crop else im0
        annotator = Annotator(im0, line_width=self.line_thickness, example=str(names))
        if len(det):
            det[:, :4] = det[:, :4].round()  # whole pixels, as ultralytics writes labels, crops and drawings
            for c in np.unique(det[:, 5]):
                n = int((det[:, 5] == c).sum())
                s += f"{n} {names[int(c)]}{'s' * (n > 1)}, "
            rows = det[::-1]  # lowest confidence first: the best boxes are drawn last, on top
            if self.save_txt:
                txt = stem + ("" if mode == "image" else f"_{frame}")
                write_label_txt(self.save_dir / "labels" / f"{txt}.txt", rows, im0.shape, self.save_conf,
                                self.save_format)
            for *xyxy, conf, cls in rows.tolist():
                c = int(cls)
                if self.save_csv:
                    self._csv_row(p.name, names[c], f"{conf:.2f}")
                if self.save_img or self.save_crop or self.view_img:
                    label = None if self.hide_labels else (names[c] if self.hide_conf else f"{names[c]} {conf:.2f}")
                    annotator.box_label(xyxy, label, color=colors(c, True))
                if self.save_crop:
                    crops = self.save_dir / "crops" / safe_path_component(names[c])  # names come from the checkpoint
                    save_one_box(xyxy, imc, file=crops / f"{stem}.jpg", BGR=True)
        if self.save_img:
            self._save(i, str(self.save_dir / name), annotator.result(), mode, vid_cap)
        return s

    def _csv_row(self, image_name, prediction, confidence):
        new = not self.csv_path.is_file()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["Image Name", "Prediction", "Confidence"])
            if new:
                w.writeheader()
            w.writerow({"Image Name": image_name, "Prediction": prediction, "Confidence": confidence})

    def _save(self, i, save_path, im0, mode, vid_cap):
        if mode == "image":
            cv2.imwrite(save_path, im0)
            return
        if self.vid_path[i] != save_path:  # a new video or stream: a new writer
            self.vid_path[i] = save_path
            if isinstance(self.vid_writer[i], cv2.VideoWriter):
                self.vid_writer[i].release()
            if vid_cap:  # a video file: its own rate and size
                fps = vid_cap.get(cv2.CAP_PROP_FPS) or 30
                w, h = int(vid_cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(vid_cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            else:  # a stream
                fps, w, h = 30, im0.shape[1], im0.shape[0]
            save_path = str(Path(save_path).with_suffix(".mp4"))  # results videos are always *.mp4
            self.vid_writer[i] = cv2.VideoWriter(save_path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        self.vid_writer[i].write(im0)

    def close(self):
        for w in self.vid_writer:
            if isinstance(w, cv2.VideoWriter):
                w.release()  # finalizes the file


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
