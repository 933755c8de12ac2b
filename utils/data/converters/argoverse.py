"""Argoverse-HD (ring-front-center camera): the COCO-like train.json / val.json, to YOLO labels per sequence.

The json holds ``images`` (``name``, ``sid``: the sequence index, listed by position), ``seq_dirs`` (each
sequence's folder, e.g. "train/<log id>/ring_front_center") and ``annotations`` (``image_id``: an index into
``images``, ``category_id``: already 0-7, ``bbox``: left, top, width, height in pixels). Every frame is 1920x1200.
Labels go to Argoverse-1.1/labels/<seq_dir>/<frame>.txt, beside Argoverse-1.1/images/<seq_dir> (the release's
tracking/ folder renamed). The release is fetched by hand (a Google Drive link) into the dataset folder.
"""
import json
import logging
from pathlib import Path

from utils.data.converters.common import write_label_files, xywh_to_yolo

LOGGER = logging.getLogger("yolov5")
FRAME_W, FRAME_H = 1920.0, 1200.0
URL = "https://drive.google.com/file/d/1st9qW3BeIwQsnR0t8mRpvbsSWIo16ACi/view?usp=drive_link"


def convert(annotations_json, labels_root=None):
    """Argoverse-HD/annotations/<split>.json -> <root>/Argoverse-1.1/labels/<seq_dir>/<frame>.txt. Rows keep the
    full float precision of the division, as ultralytics' conversion writes them. Returns the files written."""
    annotations_json = Path(annotations_json)
    labels_root = Path(labels_root or annotations_json.parents[2] / "Argoverse-1.1" / "labels")
    with open(annotations_json, "rb") as f:
        a = json.load(f)
    images, seq_dirs = a["images"], a["seq_dirs"]
    out = {}
    for ann in a["annotations"]:
        image = images[ann["image_id"]]
        x, y, w, h = xywh_to_yolo(ann["bbox"], FRAME_W, FRAME_H)
        label = labels_root / seq_dirs[image["sid"]] / (Path(image["name"]).stem + ".txt")
        out.setdefault(label, []).append(f"{ann['category_id']} {x} {y} {w} {h}\n")
    n = write_label_files(out)
    LOGGER.info(f"Argoverse: {n} label files from {annotations_json}")
    return n


def arrange(dir):
    """Argoverse-1.1/tracking -> Argoverse-1.1/images (the YAML's train/val/test live there)."""
    dir = Path(dir)
    tracking = dir / "Argoverse-1.1" / "tracking"
    if tracking.exists():
        tracking.rename(dir / "Argoverse-1.1" / "images")


def download(data):
    dir = Path(data["path"])
    if not (dir / "Argoverse-HD" / "annotations").exists():
        raise FileNotFoundError(f"Argoverse has no automatic download: fetch {URL}, extract it into {dir} "
                                "(Argoverse-1.1/ and Argoverse-HD/ inside), and run again")
    arrange(dir)
    for split in "train.json", "val.json":
        convert(dir / "Argoverse-HD" / "annotations" / split)
