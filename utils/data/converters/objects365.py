"""Objects365 v2: the COCO-layout zhiyuan_objv2_{train,val}.json, to YOLO labels; images moved flat into
images/{train,val}.

The json is read as pycocotools reads a COCO file: ``categories`` (their listed order gives the YAML's class
indices 0-364), ``images`` (``id``, ``file_name``, ``width``, ``height``) and ``annotations`` (``image_id``,
``category_id``, ``bbox`` as left, top, width, height in pixels, ``iscrowd``). Crowd boxes are left out, boxes are
clipped to the image, rows are grouped by class in category order as ultralytics' conversion writes them.
"""
import json
import logging
from pathlib import Path

from utils.data.converters import fetch
from utils.data.converters.common import write_label_files, xywh_to_yolo, yolo_row

LOGGER = logging.getLogger("yolov5")
URL = "https://dorc.ks3-cn-beijing.ksyun.com/data-set/2020Objects365%E6%95%B0%E6%8D%AE%E9%9B%86/"
PATCHES = {"train": 51, "val": 44}  # image archives per split (val: patches 0-15 under v1/, the rest under v2/)


def convert(annotations_json, labels_dir):
    """One split's json -> <labels_dir>/<image stem>.txt for every image with a non-crowd box. Returns the number
    of label files."""
    with open(annotations_json) as f:
        a = json.load(f)
    cls_of = {c["id"]: i for i, c in enumerate(a["categories"])}
    images = {im["id"]: im for im in a["images"]}
    by_image = {}
    for ann in a["annotations"]:
        if ann.get("iscrowd", 0):
            continue
        by_image.setdefault(ann["image_id"], []).append(ann)
    out = {}
    for image_id, anns in by_image.items():
        im = images[image_id]
        rows = sorted(((cls_of[x["category_id"]], xywh_to_yolo(x["bbox"], im["width"], im["height"], clip=True))
                       for x in anns), key=lambda r: r[0])  # stable: within a class, the json's order
        out[Path(labels_dir) / (Path(im["file_name"]).stem + ".txt")] = [yolo_row(c, b, decimals=5) for c, b in rows]
    n = write_label_files(out)
    LOGGER.info(f"Objects365: {n} label files from {annotations_json}")
    return n


def flatten_images(images_dir):
    """Move every .jpg found under images_dir (the patches unpack into sub-folders) into images_dir itself."""
    images_dir = Path(images_dir)
    moved = 0
    for f in list(images_dir.rglob("*.jpg")):
        if f.parent != images_dir:
            f.rename(images_dir / f.name)
            moved += 1
    return moved


def download(data):
    dir = Path(data["path"])
    for split in "train", "val":
        images, labels = dir / "images" / split, dir / "labels" / split
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        url = f"{URL}{split}/"
        if split == "train":
            fetch.download(f"{url}zhiyuan_objv2_{split}.tar.gz", dir, delete=False)
            fetch.download([f"{url}patch{i}.tar.gz" for i in range(PATCHES[split])], images, delete=False)
        else:
            fetch.download(f"{url}zhiyuan_objv2_{split}.json", dir, delete=False)
            fetch.download([f"{url}images/v1/patch{i}.tar.gz" for i in range(16)], images, delete=False)
            fetch.download([f"{url}images/v2/patch{i}.tar.gz" for i in range(16, PATCHES[split])], images,
                           delete=False)
        flatten_images(images)
        convert(dir / f"zhiyuan_objv2_{split}.json", labels)
