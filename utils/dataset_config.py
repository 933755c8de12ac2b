"""Dataset YAML handling, as ultralytics reads it: ``path``, ``train``/``val``/``test`` (folder, .txt list, or a list
of either), ``names`` (dict or list, ``nc`` optional), optional ``download`` (zip URL, ``bash ...`` command or Python
code) that runs only when the data is missing.

A data YAML is untrusted input (it comes with a dataset, like a label cache), so its ``download:`` runs code only
with the user's consent: a zip URL is fetched and extracted as ultralytics does, but a shell command or Python code
runs only with YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 (or train.py/val.py --allow-download-scripts), and is printed in full
first. Without consent the user gets one line with the command and the two ways on."""
import difflib
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from utils.archive_extract import UnsafeArchive, safe_extract_zip
from utils.errors import UserError
from utils.log import LOGGER, colorstr
from utils.paths import ROOT, RepoFileNotFound, find_repo_file
from utils.settings import ALLOW_DOWNLOAD_SCRIPTS


class DatasetError(UserError, FileNotFoundError):
    """The dataset is missing or malformed; the message says what to do."""


KNOWN_KEYS = {"path", "train", "val", "test", "names", "nc", "download"}
ALLOW_SCRIPTS_ENV = ALLOW_DOWNLOAD_SCRIPTS.name


class DownloadScriptRefused(DatasetError):
    """A shell or Python 'download:' entry was about to run without the user's consent."""


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
    """A data YAML as plain values. Tags that would build Python objects (!!python/object, ...) are refused by
    safe_load; that refusal, and any syntax error, becomes one DatasetError line naming the file."""
    with open(file, errors="ignore") as f:
        try:
            return yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise DatasetError(_yaml_error_line(file, e)) from None


def _yaml_error_line(file, e):
    mark = getattr(e, "problem_mark", None)
    where = f"{file}, line {mark.line + 1}" if mark is not None else str(file)
    tag = re.search(r"tag:yaml\.org,2002:(\S+?)'", str(getattr(e, "problem", "")))
    if isinstance(e, yaml.constructor.ConstructorError) and tag:
        return (f"{where}: the tag '!!{tag.group(1)}' is not allowed in a data YAML, which holds plain values only "
                "(paths, names, numbers): remove the tag.")
    problem = " ".join(str(getattr(e, "problem", None) or e).split())
    return f"{where}: not valid YAML ({problem}): fix the file."


def _normalize_names(data, file):
    names = data.get("names")
    if names is None:
        if "nc" in data:
            names = [f"class{i}" for i in range(int(data["nc"]))]
        else:
            raise DatasetError(f"{file}: 'names' is required (a list or a dict {{0: 'person', ...}}).")
    if isinstance(names, (list, tuple)):
        names = dict(enumerate(names))
    names = {int(k): str(v) for k, v in names.items()}
    if sorted(names) != list(range(len(names))):
        raise DatasetError(f"{file}: 'names' keys must be 0..{len(names) - 1}, got {sorted(names)}.")
    if "nc" in data and int(data["nc"]) != len(names):
        raise DatasetError(f"{file}: nc={data['nc']} but {len(names)} names are given; they must agree.")
    return names


def _resolve_split(path, x):
    if isinstance(x, (list, tuple)):
        return [_resolve_split(path, i) for i in x]
    p = (path / x).resolve()
    if not p.exists() and str(x).startswith("../"):  # ultralytics convention: '../' relative to path's parent
        p = (path / str(x)[3:]).resolve()
    return str(p)


def _paths_exist(x):
    xs = x if isinstance(x, list) else [x]
    return all(Path(p).exists() for p in xs)


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
    for k in ("train", "val"):
        if k not in data:
            close = difflib.get_close_matches(k, [str(x) for x in data if x not in KNOWN_KEYS], n=1, cutoff=0.6)
            hint = f" It has '{close[0]}:': a misspelling of '{k}:'?" if close else ""
            raise DatasetError(f"{where}: '{k}:' key missing. Every data YAML needs 'train', 'val' and 'names'.{hint}")
    data["names"] = _normalize_names(data, where)
    data["nc"] = len(data["names"])

    path = Path(data.get("path") or "")
    if not path.is_absolute():
        path = (ROOT / path).resolve()
    data["path"] = str(path)
    for k in ("train", "val", "test"):
        if data.get(k):
            data[k] = _resolve_split(path, data[k])
    if file is not None:
        data["yaml_file"] = str(file)

    if not _paths_exist(data["val"]):
        missing = [p for p in (data["val"] if isinstance(data["val"], list) else [data["val"]]) if not Path(p).exists()]
        s = data.get("download")
        if not s or not autodownload:
            raise DatasetError(f"Dataset not found: {missing} missing. Put the images and labels under {path} "
                               f"(images/ and labels/ side by side), or add a 'download:' entry to {where}.")
        kind = download_kind(s)
        if kind != "zip url":
            _consent_to_script(s, kind, where, path, allow_scripts)
        LOGGER.info(f"{colorstr('data: ')}Dataset not found at {missing}, running the 'download:' entry...")
        try:
            run_download(s, data, path)
        except UnsafeArchive as e:
            raise DatasetError(str(e)) from None
        except Exception as e:
            raise DatasetError(f"Dataset not found and download failed ({type(e).__name__}: {e}). Without network, "
                               f"put the data in {path} (images/ and labels/ side by side).") from e
        if not _paths_exist(data["val"]):
            raise DatasetError(f"Dataset download ran but {missing} still does not exist; put the data in {path}.")
        LOGGER.info(f"{colorstr('data: ')}Dataset ready at {path}")
    return data


def download_kind(s):
    """'zip url', 'shell' or 'Python': how run_download treats a 'download:' entry (ultralytics' three kinds)."""
    s = str(s).strip()
    if s.startswith(("http://", "https://")) and s.endswith(".zip"):
        return "zip url"
    return "shell" if s.startswith("bash ") else "Python"


def scripts_allowed(allow_scripts=False):
    return bool(allow_scripts) or ALLOW_DOWNLOAD_SCRIPTS.get()


def _consent_to_script(s, kind, where, path, allow_scripts):
    """Print a shell/Python entry in full before it runs, or refuse it in one line when nobody opted in."""
    s = str(s).strip()
    if scripts_allowed(allow_scripts):
        LOGGER.warning(f"{colorstr('data: ')}running the {kind} 'download:' entry of {where} "
                       f"({ALLOW_SCRIPTS_ENV}=1 or --allow-download-scripts):\n{s}")
        return
    shown = s.replace("\n", "\\n")  # the whole entry, on the one line of the error
    raise DownloadScriptRefused(
        f"{where}: the dataset is missing and its 'download:' entry is {kind} code, which runs only when you allow "
        f"it: [{shown}]. Read it, then rerun with {ALLOW_SCRIPTS_ENV}=1 (or --allow-download-scripts), or put the "
        f"data in {path} yourself (images/ and labels/ side by side).")


def run_download(s, data, path):
    """Run a YAML 'download:' entry: a .zip URL (fetched into the dataset folder `path` and extracted there only,
    utils/archive_extract.py), 'bash ...' or Python code. The caller has asked for consent to the last two
    (check_dataset)."""
    s = str(s).strip()
    if download_kind(s) == "zip url":
        path.mkdir(parents=True, exist_ok=True)
        zf = path / f".{Path(s).name}.part"  # inside the dataset folder, a name no dataset file has
        LOGGER.info(f"Downloading {s} to {zf}...")
        try:
            urllib.request.urlretrieve(s, zf)  # noqa: S310 (the URL comes from the user's own YAML)
            safe_extract_zip(zf, path)
        finally:
            zf.unlink(missing_ok=True)
    elif download_kind(s) == "shell":
        subprocess.run(s, shell=True, check=True, cwd=ROOT)  # noqa: S602 (shown and consented to in check_dataset)
    else:  # Python code, with the dataset dict as `yaml` like ultralytics
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        exec(compile(s, "<download>", "exec"), {"yaml": data, "ROOT": ROOT, "Path": Path, "os": os})  # noqa: S102 (shown and consented to)
