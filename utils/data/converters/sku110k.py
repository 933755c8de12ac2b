"""SKU-110K (retail shelves): annotations_{train,val,test}.csv, to YOLO labels and {train,val,test}.txt lists.

Each CSV row (no header) is ``image,x1,y1,x2,y2,class,image_width,image_height`` in pixels; every box is one
class, "object" (0). The image lists name ./images/<file> relative to the dataset folder.
"""
import csv
import logging
import shutil
from pathlib import Path

from utils.data.converters import fetch
from utils.data.converters.common import write_label_files, xyxy_to_yolo, yolo_row

LOGGER = logging.getLogger("yolov5")
URL = "http://trax-geometry.s3.amazonaws.com/cvpr_challenge/SKU110K_fixed.tar.gz"
SPLITS = ("annotations_train.csv", "annotations_val.csv", "annotations_test.csv")


def convert(dir):
    """<dir>/annotations/annotations_<split>.csv -> <dir>/<split>.txt and <dir>/labels/<image>.txt (5 decimals,
    as ultralytics writes them). Returns {split file: number of images}."""
    dir = Path(dir)
    counts = {}
    for name in SPLITS:
        csv_file = dir / "annotations" / name
        if not csv_file.exists():
            continue
        rows = {}
        with open(csv_file, newline="") as f:
            for r in csv.reader(f):
                if len(r) < 8:
                    continue
                image, (x1, y1, x2, y2), (w, h) = r[0], map(float, r[1:5]), map(float, r[6:8])
                rows.setdefault(image, []).append(yolo_row(0, xyxy_to_yolo((x1, y1, x2, y2), w, h), decimals=5))
        images = sorted(rows)
        split_list = dir / name.replace("annotations_", "").replace(".csv", ".txt")
        split_list.write_text("".join(f"./images/{im}\n" for im in images))
        write_label_files({(dir / "labels" / im).with_suffix(".txt"): rows[im] for im in images})
        counts[split_list.name] = len(images)
        LOGGER.info(f"SKU-110K: {len(images)} images listed in {split_list}")
    return counts


def download(data):
    """Fetch the release tarball beside data['path'], move SKU110K_fixed/ there, then convert."""
    dir = Path(data["path"])
    fetch.download(URL, dir.parent, delete=False)
    if dir.exists():
        shutil.rmtree(dir)
    (dir.parent / "SKU110K_fixed").rename(dir)
    convert(dir)
