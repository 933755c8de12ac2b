"""VisDrone2019-DET: one comma-separated annotation file per image, to YOLO labels.

Each annotation row is ``left,top,width,height,score,category,truncation,occlusion`` in pixels. A score of 0 marks
a region the benchmark ignores, and is dropped; categories 1-10 are the YAML's classes 0-9 (pedestrian ... motor). The
labels go to ``<split>/labels/<image>.txt`` beside ``<split>/images``.
"""
import logging
from pathlib import Path

from PIL import Image

from utils.data.converters import fetch
from utils.data.converters.common import write_label_files, xywh_to_yolo, yolo_row

LOGGER = logging.getLogger("yolov5")
SPLITS = ("VisDrone2019-DET-train", "VisDrone2019-DET-val", "VisDrone2019-DET-test-dev")
URL = "https://github.com/ultralytics/assets/releases/download/v0.0.0/"


def convert_split(split_dir):
    """<split>/annotations/*.txt -> <split>/labels/*.txt; returns the number of label files written."""
    split_dir = Path(split_dir)
    out = {}
    for ann in sorted((split_dir / "annotations").glob("*.txt")):
        w, h = Image.open((split_dir / "images" / ann.name).with_suffix(".jpg")).size
        rows = []
        for line in ann.read_text().strip().splitlines():
            f = line.strip().split(",")
            if len(f) < 6 or f[4] == "0":  # score 0: an ignored region, not an object
                continue
            rows.append(yolo_row(int(f[5]) - 1, xywh_to_yolo([int(v) for v in f[:4]], w, h)))
        out[split_dir / "labels" / ann.name] = rows
    LOGGER.info(f"VisDrone: {len(out)} label files written to {split_dir / 'labels'}")
    return write_label_files(out)


def download(data):
    """The YAML's download: fetch the three splits' zips into data['path'], then convert each split."""
    root = Path(data["path"])
    fetch.download([f"{URL}{s}.zip" for s in SPLITS], root)
    for s in SPLITS:
        convert_split(root / s)
