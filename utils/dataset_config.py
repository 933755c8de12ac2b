"""Dataset YAML handling, as ultralytics reads it: ``path``, ``train``/``val``/``test`` (folder, .txt list, or a list
of either), ``names`` (dict or list, ``nc`` optional), optional ``download`` (zip URL, ``bash ...`` command or Python
code) that runs only when the data is missing.

A data YAML is untrusted input (it comes with a dataset, like a label cache), so nothing in it runs or is fetched
without the user's consent: every ``download:`` entry, a zip URL as much as a shell command or Python code, runs only
with YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 (or train.py/val.py --allow-download-scripts, never taken from saved options), and
is printed in full first. Without consent the user gets one line with the entry and the two ways on.

``path:`` resolves as ultralytics/yolov5 resolves it: a relative one against the project folder, a missing or empty
one to the project folder itself. Data there is read as before, but nothing is downloaded or unpacked into a folder
that holds code (the project folder, its own folders, a folder on sys.path; utils/archive_extract.py): the user is
told in one line to set ``path:``. A zip is unpacked by utils/archive_extract.py: staged outside the import path,
bounded in size and compression ratio, refused whole if it holds code, moved into place only when complete."""
import difflib
import os
import sys
from pathlib import Path

from utils.archive_extract import ArchiveError, extract_archive, staging_parent
from utils.atomic_files import temp_path_for
from utils.child_processes import run_ending_with_parent
from utils.data_folders import unsafe_data_folder_reason
from utils.downloads import download_file
from utils.errors import UserError
from utils.log import LOGGER, colorstr
from utils.paths import ROOT, RepoFileNotFound, find_repo_file
from utils.settings import ALLOW_DOWNLOAD_SCRIPTS
from utils.yaml_files import describe, read_yaml


class DatasetError(UserError, FileNotFoundError):
    """The dataset is missing or malformed; the message says what to do."""


KNOWN_KEYS = {"path", "train", "val", "test", "names", "nc", "download"}
ALLOW_SCRIPTS_ENV = ALLOW_DOWNLOAD_SCRIPTS.name
MAX_CLASSES = 10_000  # a bound on what a data YAML can make the model and metrics allocate (LVIS has 1,203)


class DownloadScriptRefused(DatasetError):
    """A 'download:' entry (a zip URL, shell or Python code) was about to run without the user's consent."""


class DataFolderRefused(DatasetError):
    """A 'download:' would have written into a folder that holds code (the project folder when 'path:' is missing)."""


def find_yaml(file):
    """'coco128.yaml', 'data/coco128.yaml' or an absolute path -> existing Path (searched in ./ and ROOT/data)."""
    file = Path(file)
    for cand in (file, ROOT / file, ROOT / "data" / file, ROOT / "data" / file.name):
        if cand.is_file():
            return cand
    try:  # a bare name anywhere under data/, models/ or utils/, as ultralytics' check_file searches
        return find_repo_file(file, what="Dataset YAML")
    except RepoFileNotFound as e:
        raise DatasetError(str(e)) from None


def load_yaml(file):
    """A data YAML as plain values (utils/yaml_files.read_yaml: tags, alias bombs, syntax errors and a top level
    that is not a mapping each become one DatasetError line naming the file)."""
    return read_yaml(file, what="data YAML", error=DatasetError)


def _normalize_names(data, file):
    """names: a list or {int: name} dict of at most MAX_CLASSES str/int names -> {0: 'name', ...}. nc, when
    given, must be a whole number that agrees. Anything else is one line naming the file, key and value."""
    names, nc = data.get("names"), data.get("nc")
    if nc is not None:
        nc = _whole(nc, file, "nc")
    if names is None:
        if nc is None:
            raise DatasetError(f"{file}: 'names' is required (a list or a dict {{0: 'person', ...}}).")
        names = [f"class{i}" for i in range(nc)]
    if isinstance(names, (list, tuple)):
        names = dict(enumerate(names))
    if not isinstance(names, dict) or not names:
        raise DatasetError(f"{file}: 'names: {describe(names)}' must be a non-empty list of class names, "
                           "e.g. names: [person, car], or a dict {0: person, 1: car}.")
    if len(names) > MAX_CLASSES:
        raise DatasetError(f"{file}: 'names' holds {len(names):,} entries, over the {MAX_CLASSES:,} classes a "
                           "detection dataset of this project may have; is it the right file?")
    names = {int(k) if isinstance(k, str) and k.strip().isdigit() else k: v  # a quoted index: '0': person
             for k, v in names.items()}
    for k, v in names.items():
        if not isinstance(v, (str, int)) or isinstance(v, bool) or isinstance(k, bool) or not isinstance(k, int):
            raise DatasetError(f"{file}: 'names' entry {describe(k)}: {describe(v)} is not a class index and a "
                               "name (text or a number); write one name per class.")
    names = {int(k): str(v) for k, v in names.items()}
    if sorted(names) != list(range(len(names))):
        raise DatasetError(f"{file}: 'names' keys must be 0..{len(names) - 1}, got {sorted(names)[:20]}.")
    if nc is not None and nc != len(names):
        raise DatasetError(f"{file}: nc={nc} but {len(names)} names are given; they must agree.")
    return names


def _whole(v, file, key):
    """A YAML value that must be a count >= 1 (nc): an int, or text / a float that is one."""
    try:
        n = int(str(v).strip()) if not isinstance(v, bool) else None
    except ValueError:
        n = int(v) if isinstance(v, float) and v.is_integer() else None
    if n is None or not 1 <= n <= MAX_CLASSES:
        raise DatasetError(f"{file}: '{key}: {describe(v)}' must be a whole number of classes from 1 to "
                           f"{MAX_CLASSES:,}; fix it or remove it ('names' gives the count).")
    return n


def _check_split(data, k, where):
    """train/val/test: a path (text) or a non-empty list of paths; an empty or other value is one line."""
    v = data.get(k)
    if isinstance(v, os.PathLike) or isinstance(v, (list, tuple)) and any(isinstance(x, os.PathLike) for x in v):
        v = data[k] = [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v)  # a dict built in code
    if k == "test" and v in (None, ""):
        return
    ok = isinstance(v, str) and v.strip() or (isinstance(v, (list, tuple)) and v and
                                              all(isinstance(x, str) and x.strip() for x in v))
    if ok and any(len(x) > 4096 or "\0" in x for x in ([v] if isinstance(v, str) else v)):
        raise DatasetError(f"{where}: '{k}: {describe(v)}' is not a path this system can open (over 4096 "
                           "characters, or a NUL character); fix it.")
    if not ok:
        raise DatasetError(f"{where}: '{k}: {describe(v)}' must be a folder, an image-list .txt or a list of them "
                           f"(relative to 'path:'), e.g. {k}: images/{k}2017.")


def _resolve_split(path, x):
    if isinstance(x, (list, tuple)):
        return [_resolve_split(path, i) for i in x]
    p = (path / x).resolve()
    if not _exists(p) and str(x).startswith("../"):  # ultralytics convention: '../' relative to path's parent
        p = (path / str(x)[3:]).resolve()
    return str(p)


def _exists(p):
    try:
        return Path(p).exists()
    except (OSError, ValueError):  # a name too long for the file system counts as missing
        return False


def _paths_exist(x):
    xs = x if isinstance(x, list) else [x]
    return all(_exists(p) for p in xs)


def check_dataset(data, autodownload=True, allow_scripts=False):
    """Read a dataset YAML (path or dict) and return a dict with absolute train/val/test paths, nc and
    names {int: str}. When val is missing, run the YAML's `download` (if any); offline failures raise
    DatasetError naming the folder to put the data in. A shell or Python `download` runs only when allow_scripts
    or YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 says so (else DownloadScriptRefused)."""
    file = None
    if isinstance(data, (str, Path)):
        if Path(data).is_dir():  # a dataset folder: images/ and labels/ side by side, use it for train and val
            data = {"path": str(Path(data).resolve()), "train": "images", "val": "images"}
        else:
            file = find_yaml(data)
            data = load_yaml(file)
    data = dict(data)
    where = file or "dataset dict"
    _check_entries(data, where)
    given_path = data.get("path")
    path = Path(given_path or "")  # as ultralytics: relative to the project folder, which a missing one is
    if not path.is_absolute():
        path = (ROOT / path).resolve()
    data["path"] = str(path)
    for k in ("train", "val", "test"):
        if data.get(k):
            data[k] = _resolve_split(path, data[k])
    if file is not None:
        data["yaml_file"] = str(file)
    if not _paths_exist(data["val"]):
        _download_missing(data, path, where, given_path, autodownload, allow_scripts)
    return data


def _check_entries(data, where):
    """The YAML's entries checked in place: train and val present, splits, names (-> names and nc), path and
    download of the right kinds; a DatasetError names the first wrong one."""
    for k in ("train", "val"):
        if k not in data:
            close = difflib.get_close_matches(k, [str(x) for x in data if x not in KNOWN_KEYS], n=1, cutoff=0.6)
            hint = f" It has '{close[0]}:': a misspelling of '{k}:'?" if close else ""
            raise DatasetError(f"{where}: '{k}:' key missing. Every data YAML needs 'train', 'val' and 'names'.{hint}")
    for k in ("train", "val", "test"):
        _check_split(data, k, where)
    data["names"] = _normalize_names(data, where)
    data["nc"] = len(data["names"])
    if isinstance(data.get("path"), os.PathLike):
        data["path"] = str(data["path"])
    if data.get("path") is not None and (not isinstance(data["path"], str) or len(data["path"]) > 4096 or
                                         "\0" in data["path"]):
        raise DatasetError(f"{where}: 'path: {describe(data['path'])}' must be a folder path (text); quote it if it "
                           "is a number, e.g. path: '2024'.")
    if data.get("download") is not None and not isinstance(data["download"], str):
        raise DatasetError(f"{where}: 'download: {describe(data['download'])}' must be text (a .zip URL or a "
                           "script); fix or remove it.")


def _download_missing(data, path, where, given_path, autodownload, allow_scripts):
    """The validation images are missing: run the YAML's download entry (with consent where it is a script) or
    raise a DatasetError that names the folder to put the data in."""
    missing = [p for p in (data["val"] if isinstance(data["val"], list) else [data["val"]]) if not _exists(p)]
    s = data.get("download")
    if not s or not autodownload:
        raise DatasetError(f"Dataset not found: {missing} missing. Put the images and labels under {path} "
                           f"(images/ and labels/ side by side), or add a 'download:' entry to {where}.")
    _refuse_code_folder(path, where, given_path)
    _consent_to_download(s, download_kind(s), where, path, allow_scripts)
    LOGGER.info(f"{colorstr('data: ')}Dataset not found at {missing}, running the 'download:' entry...")
    try:
        run_download(s, data, path)
    except ArchiveError as e:  # says what happened: too large, a bomb, code inside, disk full, fetch failed
        raise DatasetError(f"{e} Without it, put the data in {path} (images/ and labels/ side by side).") from None
    except Exception as e:
        raise DatasetError(f"Dataset not found and download failed ({type(e).__name__}: {e}). Without network, "
                           f"put the data in {path} (images/ and labels/ side by side).") from e
    if not _paths_exist(data["val"]):
        raise DatasetError(f"Dataset download ran but {missing} still does not exist; put the data in {path}.")
    LOGGER.info(f"{colorstr('data: ')}Dataset ready at {path}")


def download_kind(s):
    """'zip url', 'shell' or 'Python': how run_download treats a 'download:' entry (ultralytics' three kinds; a
    file:// URL counts as a URL, for archives already on this machine)."""
    s = str(s).strip()
    if s.startswith(("http://", "https://", "file://")) and s.endswith(".zip"):
        return "zip url"
    return "shell" if s.startswith("bash ") else "Python"


def scripts_allowed(allow_scripts=False):
    return bool(allow_scripts) or ALLOW_DOWNLOAD_SCRIPTS.get()


def _refuse_code_folder(path, where, given):
    """No download of any kind into a folder that holds code: with 'path:' missing or '.', the dataset folder is the
    project folder (as in ultralytics/yolov5), and an archive's new yaml.py there would be imported by every script."""
    why = unsafe_data_folder_reason(path)
    if why:
        said = "'path:' is missing" if given in (None, "") else f"'path: {given}' resolves there"
        raise DataFolderRefused(
            f"{where}: the dataset is missing and its 'download:' entry would write into {path}, which {why} "
            f"({said}); nothing was downloaded. Set 'path:' in {where} to the dataset's own folder, e.g. "
            "path: ../datasets/<name>, or put the data there yourself.")


_KIND_TEXT = {"zip url": "a zip archive to fetch and unpack", "shell": "shell code", "Python": "Python code"}


def _consent_to_download(s, kind, where, path, allow_scripts):
    """Print an entry in full before it runs, or refuse it in one line when nobody opted in. A zip URL asks too:
    what it unpacks is the YAML author's choice of files, fetched from the YAML author's choice of server."""
    s = str(s).strip()
    if scripts_allowed(allow_scripts):
        LOGGER.warning(f"{colorstr('data: ')}running the {kind} 'download:' entry of {where} "
                       f"({ALLOW_SCRIPTS_ENV}=1 or --allow-download-scripts):\n{s}")
        return
    shown = s.replace("\n", "\\n")  # the whole entry, on the one line of the error
    raise DownloadScriptRefused(
        f"{where}: the dataset is missing and its 'download:' entry is {_KIND_TEXT[kind]}, which runs only when you "
        f"allow it: [{shown}]. Read it, then rerun with {ALLOW_SCRIPTS_ENV}=1 (or --allow-download-scripts), or put "
        f"the data in {path} yourself (images/ and labels/ side by side).")


def run_download(s, data, path):
    """Run a YAML 'download:' entry: a .zip URL (fetched outside the import path and unpacked into the dataset folder
    `path` by utils/archive_extract.py), 'bash ...' or Python code. The caller has checked the folder and asked for
    consent (check_dataset)."""
    s = str(s).strip()
    if download_kind(s) == "zip url":
        zf = temp_path_for(staging_parent(path) / Path(s).name)  # a name of ours, removed whatever happens
        LOGGER.info(f"Downloading {s} to {zf}...")
        try:
            download_file(s, zf)
            extract_archive(zf, path)
        finally:
            zf.unlink(missing_ok=True)
    elif download_kind(s) == "shell":
        # shown and consented to in check_dataset; the shell and all it started end with this process, however it
        # ends (a SIGKILLed trainer left a script's curl downloading for good)
        run_ending_with_parent(["/bin/sh", "-c", s], check=True, cwd=ROOT)
    else:  # Python code, with the dataset dict as `yaml` like ultralytics
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        exec(compile(s, "<download>", "exec"), {"yaml": data, "ROOT": ROOT, "Path": Path, "os": os})  # noqa: S102 (shown and consented to)
