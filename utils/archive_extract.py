"""A dataset archive (the zip a data YAML's `download:` names) extracted only inside its dataset folder.

The archive is untrusted input: a member named `../x`, `/etc/x`, or one written through a symlink that points out of
the folder would otherwise land anywhere, and a member that replaces an existing file (train.py, a module, another
dataset's labels) turns data into code. So every member is checked before anything is written: it must land inside
the dataset folder, must not exist yet, and no link may take it out; one offending member refuses the whole archive
in one line naming the archive and the member. The official layout is kept: coco128.zip holds `coco128/...` and is
extracted into the parent of `path:`, which puts it exactly in the dataset folder; an archive whose members are not
all under the folder's name is extracted into the folder itself. Framework-free.
"""
import os
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from utils.errors import UserError


class UnsafeArchive(UserError):
    """An archive member would be written outside its dataset folder or over an existing file."""


def _is_symlink(info):
    return stat.S_ISLNK(info.external_attr >> 16)


def _inside(path, folder):
    return path == folder or folder in path.parents


def extraction_root(names, folder):
    """Where the archive goes: folder's parent when every member sits under '<folder name>/' (the official layout),
    else the folder itself."""
    top = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts}
    return folder.parent if top == {folder.name} else folder


def _refuse(archive, member, why):
    return UnsafeArchive(f"{archive}: member '{member}' {why}; nothing was extracted. Extract it yourself after "
                         "checking its contents, or fix the archive.")


def _plan(z, archive, folder):
    """[(ZipInfo, target Path)] for every member, or UnsafeArchive for the first that escapes or overwrites."""
    folder = Path(os.path.realpath(folder))
    root = extraction_root(z.namelist(), folder)
    plan, seen = [], set()
    for info in z.infolist():
        name = info.filename
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or ".." in parts:
            raise _refuse(archive, name, f"has an absolute or '..' path that leaves the dataset folder {folder}")
        if _is_symlink(info):
            raise _refuse(archive, name, "is a symbolic link (a dataset archive holds files and folders only)")
        target = root.joinpath(*parts)
        # realpath follows links already on disk: an existing folder that is a link out of the dataset counts
        if not _inside(Path(os.path.realpath(target)), folder):
            raise _refuse(archive, name, f"would be written outside the dataset folder {folder}")
        if not info.is_dir() and os.path.lexists(target):
            raise _refuse(archive, name, f"would replace the existing file {target}")
        if not info.is_dir() and target in seen:
            raise _refuse(archive, name, "appears twice (the second copy would replace the first)")
        seen.add(target)
        plan.append((info, target))
    return plan


def safe_extract_zip(archive, folder):
    """Extract the zip `archive` into the dataset folder `folder` (see the module doc); returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with zipfile.ZipFile(archive) as z:
        plan = _plan(z, archive, folder)
        real = Path(os.path.realpath(folder))
        for info, target in plan:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if not _inside(Path(os.path.realpath(target.parent)), real):  # a link made meanwhile
                raise _refuse(archive, info.filename, f"would be written outside the dataset folder {real}")
            with z.open(info) as src, open(target, "xb") as dst:  # 'x': never over a file that appeared meanwhile
                shutil.copyfileobj(src, dst)
            written.append(target)
    return written
