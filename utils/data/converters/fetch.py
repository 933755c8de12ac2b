"""The network half of the converters: fetch archives and unpack them. Only a consented ``download:`` entry runs
this (utils/dataset_config.py); the tests never fetch. Fetching and unpacking follow utils/archive_extract.py: a
download is bounded by the free space and never stays half written; an archive (zip or tar) is staged outside the
import path, bounded in size and compression ratio, refused whole if it holds code, links or members that leave the
folder, and moved into place only when complete."""
import logging
from pathlib import Path

from utils.archive_extract import extract_archive
from utils.downloads import download_file

LOGGER = logging.getLogger("yolov5")  # utils.general's logger, without importing a framework


def download(urls, dir, unpack=True, delete=True):
    """Fetch each URL into dir (kept when already there) and unpack .zip / .tar / .tar.gz archives into dir."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    for url in [urls] if isinstance(urls, str) else urls:
        f = dir / Path(url.split("?")[0]).name
        if not f.exists():
            LOGGER.info(f"Downloading {url} to {f}...")
            download_file(url, f)
        if unpack:
            unpacked = unpack_archive(f, dir)
            if unpacked and delete:
                f.unlink()


def unpack_archive(f, dir):
    """Unpack a .zip or tar archive into dir by the dataset-archive rules (utils/archive_extract.py); False for any
    other file."""
    f = Path(f)
    if f.suffix == ".zip" or f.name.endswith((".tar", ".tar.gz", ".tgz")):
        extract_archive(f, dir)
        return True
    return False
