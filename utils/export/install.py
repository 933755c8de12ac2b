"""Putting what a converter wrote into a work folder in place as the user's export, through utils/atomic_files.py:
a file is copied under a temporary name and renamed over the target; a folder's files are copied into a temporary
folder and renamed into the target folder one by one (a user's own files there stay). Until then the earlier
export is untouched, so a conversion that fails half way costs nothing."""
import shutil
from pathlib import Path

from utils.atomic_files import output_folder, output_path


def install_file(src, dst):
    """Copy src to dst whole or not at all; returns dst."""
    with output_path(dst) as tmp:
        shutil.copyfile(src, tmp)
    return Path(dst)


def install_folder(src, dst):
    """The files of folder src into folder dst (replacing those of the same name only); returns dst."""
    with output_folder(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
    return Path(dst)
