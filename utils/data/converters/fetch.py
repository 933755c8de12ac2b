"""The network half of the converters: fetch archives and unpack them. Only a consented ``download:`` entry runs
this (utils/dataset_config.py); the tests never do."""
import logging
import shutil
import tarfile
import urllib.request
from pathlib import Path

from utils.archive_extract import UnsafeArchive, safe_extract_zip

LOGGER = logging.getLogger("yolov5")  # utils.general's logger, without importing a framework


def download(urls, dir, unpack=True, delete=True):
    """Fetch each URL into dir (kept when already there) and unpack .zip / .tar / .tar.gz archives into dir."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    for url in [urls] if isinstance(urls, str) else urls:
        f = dir / Path(url.split("?")[0]).name
        if not f.exists():
            LOGGER.info(f"Downloading {url} to {f}...")
            tmp = f.with_name(f.name + ".part")
            with urllib.request.urlopen(url) as r, open(tmp, "wb") as out:  # noqa: S310 (the YAML's own URLs)
                shutil.copyfileobj(r, out, 1 << 20)
            tmp.rename(f)
        if unpack:
            unpacked = unpack_archive(f, dir)
            if unpacked and delete:
                f.unlink()


def unpack_archive(f, dir):
    """Unpack a .zip or tar archive into dir (members may not leave it); False for any other file."""
    f, dir = Path(f), Path(dir).resolve()
    if f.suffix == ".zip":  # the dataset-zip rules: no member outside dir, none over an existing file, no links
        safe_extract_zip(f, dir)
        return True
    if f.name.endswith((".tar", ".tar.gz", ".tgz")):
        with tarfile.open(f) as t:
            for m in t.getmembers():
                _inside(dir, m.name, f)
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12+/3.11.4+: also refuses links out of dir
                t.extractall(dir, filter="data")
            else:
                t.extractall(dir)
        return True
    return False


def _inside(dir, member, archive):
    if not (dir / member).resolve().is_relative_to(dir):
        raise UnsafeArchive(f"{archive}: member {member} would be written outside {dir}; nothing was extracted")
