"""xView (DIUx 2018): one GeoJSON of every training box, to YOLO labels; images moved under images/ and split.

Each GeoJSON feature has ``properties.image_id`` (the .tif name), ``properties.bounds_imcoords`` ("x1,y1,x2,y2" in
pixels) and ``properties.type_id`` (xView's class numbers 11-94, 60 of them used). The 60 used numbers map in
ascending order to the YAML's classes 0-59. Boxes are clipped to the image. xView has no public download: the
three archives are fetched by hand from https://challenge.xviewdataset.org into the dataset folder first.
"""
import json
import logging
from pathlib import Path

from PIL import Image

from utils.data.converters.common import autosplit, write_label_files, xyxy_to_yolo, yolo_row

LOGGER = logging.getLogger("yolov5")
# xView type_id -> class index (-1: not a class of the 60-class set)
TYPE_IDS = (11, 12, 13, 15, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29, 32, 33, 34, 35, 36, 37, 38, 40, 41, 42,
            44, 45, 47, 49, 50, 51, 52, 53, 54, 55, 56, 57, 59, 60, 61, 62, 63, 64, 65, 66, 71, 72, 73, 74, 76, 77,
            79, 83, 84, 86, 89, 91, 93, 94)
CLASS_OF_TYPE = {t: i for i, t in enumerate(TYPE_IDS)}
MANUAL = ("xView has no automatic download: fetch train_labels.zip, train_images.zip and val_images.zip from "
          "https://challenge.xviewdataset.org, extract them into {dir}, and run again")


def convert_labels(geojson, images_dir=None, labels_dir=None):
    """xView_train.geojson -> labels/train/<image>.txt (beside the GeoJSON by default). Boxes of images that are
    not there (1395.tif is missing from the release) or with an unknown type are skipped with a warning."""
    geojson = Path(geojson)
    images_dir = Path(images_dir or geojson.parent / "train_images")
    labels_dir = Path(labels_dir or geojson.parent / "labels" / "train")
    with open(geojson) as f:
        features = json.load(f)["features"]
    sizes, out, skipped = {}, {}, 0
    for feature in features:
        p = feature["properties"]
        if not p.get("bounds_imcoords"):
            continue
        image = images_dir / p["image_id"]
        if not image.exists():
            continue
        box = [int(v) for v in str(p["bounds_imcoords"]).split(",")]
        cls = CLASS_OF_TYPE.get(int(p["type_id"]), -1)
        if len(box) != 4 or cls < 0:
            skipped += 1
            continue
        if image.name not in sizes:
            sizes[image.name] = Image.open(image).size
        w, h = sizes[image.name]
        out.setdefault(labels_dir / Path(image.name).with_suffix(".txt"), []).append(
            yolo_row(cls, xyxy_to_yolo(box, w, h, clip=True)))
    if skipped:
        LOGGER.warning(f"xView: {skipped} boxes skipped (not 4 coordinates, or a type_id outside the 60 classes)")
    if labels_dir.exists():  # a fresh set: rows are collected whole, so stale files must go
        for old in labels_dir.glob("*.txt"):
            old.unlink()
    return write_label_files(out)


def arrange(dir):
    """Move train_images/ and val_images/ to images/train and images/val, then split the training images 90/10
    into images/autosplit_{train,val}.txt as ultralytics does (the YAML's train and val)."""
    dir = Path(dir)
    (dir / "images").mkdir(parents=True, exist_ok=True)
    for src, dst in (("train_images", "train"), ("val_images", "val")):
        if (dir / src).exists():
            (dir / src).rename(dir / "images" / dst)
    return autosplit(dir / "images" / "train", weights=(0.9, 0.1, 0.0))


def download(data):
    dir = Path(data["path"])
    if not (dir / "xView_train.geojson").exists() or not (dir / "train_images").exists():
        raise FileNotFoundError(MANUAL.format(dir=dir))
    convert_labels(dir / "xView_train.geojson")
    arrange(dir)
