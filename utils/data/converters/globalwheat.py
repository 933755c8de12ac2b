"""Global Wheat Head Detection 2020: the codalab release plus ultralytics' ready-made YOLO labels, arranged into
images/<domain>, labels/<domain> and annotations/<domain>.json.

The release unpacks one folder of images per domain (arvalis_1, ethz_1, ...) and, for the training domains, a
<domain>.json beside it; the labels zip unpacks labels/<domain>/*.txt. Nothing is computed from the boxes here:
the labels are ultralytics' conversion of the same annotations.
"""
import logging
from pathlib import Path

from utils.data.converters import fetch

LOGGER = logging.getLogger("yolov5")
URLS = ("https://zenodo.org/record/4298502/files/global-wheat-codalab-official.zip",
        "https://github.com/ultralytics/assets/releases/download/v0.0.0/GlobalWheat2020_labels.zip")
DOMAINS = ("arvalis_1", "arvalis_2", "arvalis_3", "ethz_1", "rres_1", "inrae_1", "usask_1",
           "utokyo_1", "utokyo_2", "nau_1", "uq_1")


def arrange(dir):
    """<domain>/ -> images/<domain>/, <domain>.json -> annotations/<domain>.json. Returns the domains moved."""
    dir = Path(dir)
    for p in "annotations", "images", "labels":
        (dir / p).mkdir(parents=True, exist_ok=True)
    moved = []
    for d in DOMAINS:
        if (dir / d).is_dir():
            (dir / d).rename(dir / "images" / d)
            moved.append(d)
        if (dir / f"{d}.json").exists():
            (dir / f"{d}.json").rename(dir / "annotations" / f"{d}.json")
    unlabelled = [d for d in moved if not any((dir / "labels" / d).glob("*.txt"))]
    if unlabelled:
        LOGGER.warning(f"GlobalWheat2020: no labels for {', '.join(unlabelled)} under {dir / 'labels'}")
    return moved


def download(data):
    dir = Path(data["path"])
    fetch.download(list(URLS), dir)
    arrange(dir)
