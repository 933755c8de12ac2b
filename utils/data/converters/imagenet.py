"""ImageNet (ILSVRC2012) and its 10/100/1000-class subsets, in the classification layout: train/<wnid>/*.JPEG and
val/<wnid>/*.JPEG.

The training archive holds one tar per class (n01440764.tar, ...), unpacked here into a folder each. The
validation archive is flat; which class each image is comes from the list ultralytics' script takes from
soumith/imagenetloader.torch (valprep.sh: ``mkdir -p <wnid>`` and ``mv <image> <wnid>/`` lines). That list is
parsed here and never executed. The subsets are ready-made zips from the ultralytics release.
"""
import logging
import re
from pathlib import Path

from utils.data.converters import fetch

LOGGER = logging.getLogger("yolov5")
TRAIN_URL = "https://image-net.org/data/ILSVRC/2012/ILSVRC2012_img_train.tar"  # 138 GB, 1281167 images
VAL_URL = "https://image-net.org/data/ILSVRC/2012/ILSVRC2012_img_val.tar"  # 6.3 GB, 50000 images
VALPREP_URL = "https://raw.githubusercontent.com/soumith/imagenetloader.torch/master/valprep.sh"
SUBSET_URL = "https://github.com/ultralytics/assets/releases/download/v0.0.0/{name}.zip"
_MOVE = re.compile(r"^\s*mv\s+(\S+)\s+(\S+?)/?\s*$")


def unpack_class_tars(train_dir):
    """train/<wnid>.tar -> train/<wnid>/ (each tar removed once unpacked). Returns the number of classes."""
    train_dir = Path(train_dir)
    n = 0
    for t in sorted(train_dir.glob("*.tar")):
        dest = train_dir / t.name[:-4]
        dest.mkdir(exist_ok=True)
        fetch.unpack_archive(t, dest)
        t.unlink()
        n += 1
    return n


def parse_valprep(text):
    """valprep.sh's lines -> {image file: class folder}. Only 'mv <file> <folder>/' lines count."""
    moves = {}
    for line in text.splitlines():
        m = _MOVE.match(line)
        if m:
            moves[m.group(1)] = m.group(2)
    return moves


def sort_val(val_dir, moves):
    """Move each flat val/<image> into val/<wnid>/ as the mapping says. Names with a path part are refused (the
    list comes from the network). Returns the number of images moved."""
    val_dir = Path(val_dir)
    n = 0
    for image, wnid in moves.items():
        if Path(image).name != image or Path(wnid).name != wnid or wnid in ("", ".", ".."):
            raise ValueError(f"val list entry '{image} -> {wnid}' is not a plain file and folder name")
        src = val_dir / image
        if src.exists():
            (val_dir / wnid).mkdir(exist_ok=True)
            src.rename(val_dir / wnid / image)
            n += 1
    return n


def download(data, train=True, val=True):
    """The full ILSVRC2012: fetch and unpack train (one folder per class) and val (sorted into class folders)."""
    import urllib.request
    dir = Path(data["path"])
    if train:
        fetch.download(TRAIN_URL, dir / "train")
        unpack_class_tars(dir / "train")
    if val:
        fetch.download(VAL_URL, dir / "val")
        with urllib.request.urlopen(VALPREP_URL) as r:  # noqa: S310 (a fixed URL)
            moves = parse_valprep(r.read().decode())
        LOGGER.info(f"ImageNet: {sort_val(dir / 'val', moves)} validation images sorted into class folders")


def download_subset(data):
    """ImageNet10/100/1000: the release zip named after data['path'] (imagenet10, ...), unpacked beside it."""
    dir = Path(data["path"])
    fetch.download(SUBSET_URL.format(name=dir.name), dir.parent)
    missing = [s for s in ("train", "val") if not (dir / s).is_dir()]
    if missing:
        raise FileNotFoundError(f"{dir.name}.zip unpacked, but {dir} has no {' or '.join(missing)} folder")
