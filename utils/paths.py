"""Paths of the repository and of runs: the repository root, numbered run folders claimed atomically, the newest
run's last.pt (--resume), and config files named on the command line found the way ultralytics finds them."""
import glob
import os
from pathlib import Path

from utils.errors import UserError

ROOT = Path(__file__).resolve().parents[1]  # the repository root


class RunDirError(UserError):
    """The run folder (--project/--name) cannot be created."""


def increment_path(path, exist_ok=False, sep="", mkdir=False):
    """runs/train/exp -> runs/train/exp2, exp3, ... unless exist_ok (then the path itself).

    mkdir=True creates the folder, and creating it is the claim: os.mkdir fails on a folder that exists, so two
    runs started at the same moment with the same --project/--name never share one; the later one moves on to the
    next number. Checking for a free name first and creating it later, as ultralytics does, lets both pick the
    same one. An uncreatable folder (read-only or missing parent, a file in the way) raises RunDirError."""
    path = Path(path)
    if mkdir:
        return _claim_dir(path, exist_ok, sep)
    if path.exists() and not exist_ok:
        path, suffix = (path.with_suffix(""), path.suffix) if path.is_file() else (path, "")
        for n in range(2, 10000):
            candidate = f"{path}{sep}{n}{suffix}"
            if not Path(candidate).exists():
                path = Path(candidate)
                break
    return path



def get_latest_run(search_dir="."):
    """The most recently written last*.pt under search_dir ('' if none): what --resume without a path resumes."""
    runs = glob.glob(f"{search_dir}/**/last*.pt", recursive=True)
    return max(runs, key=os.path.getctime) if runs else ""

class RepoFileNotFound(UserError, FileNotFoundError):
    """A config named on the command line (--hyp, --cfg, --data) is neither a path nor a file of the repository."""


def find_repo_file(file, what="file", prefer=(), dirs=("data", "models", "utils")):
    """Path of `file` as given (or relative to the repository root), else the one file of that name under
    ROOT/data, ROOT/models or ROOT/utils at any depth, as ultralytics' check_file searches: 'hyp.scratch-high.yaml'
    -> data/hyps/hyp.scratch-high.yaml. Folders in `prefer` are tried first, so a name that is also in a subfolder
    (models/yolov5s6.yaml and models/hub/yolov5s6.yaml) keeps meaning the top-level file."""
    file = Path(file)
    for cand in (file, ROOT / file, *(Path(d) / file.name for d in prefer)):
        if cand.is_file():
            return cand
    if len(file.parts) == 1:  # a bare name: search, like ultralytics
        found = sorted({p.resolve() for d in dirs for p in (ROOT / d).rglob(file.name) if p.is_file()})
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise RepoFileNotFound(f"{what} '{file}' matches several files: {', '.join(map(str, found))}; "
                                   "give the path of the one you mean.")
    raise RepoFileNotFound(f"{what} '{file}' not found (looked in the working folder and {ROOT}/"
                           f"{{{','.join(dirs)}}}); give an existing path.")


# ----------------------------------------------------------------------------------------------------------------
# ultralytics' file checks (utils.general names), for users' scripts
class FileCheckError(UserError, ValueError):
    pass


def check_suffix(file="yolov5s.pt", suffix=(".pt",), msg=""):
    """Raise FileCheckError when a file (or each of a list) has a suffix outside `suffix` (case-insensitive)."""
    if not (file and suffix):
        return
    allowed = [suffix] if isinstance(suffix, str) else list(suffix)
    for f in [file] if isinstance(file, (str, Path)) else file:
        s = Path(f).suffix.lower()
        if s and s not in [x.lower() for x in allowed]:
            raise FileCheckError(f"{msg}{f}: suffix {s} is not one of {allowed}")


def url2file(url):
    """The file name an URL names: https://x.org/a%2Fb.txt?auth -> b.txt."""
    from urllib.parse import unquote

    return Path(unquote(str(url))).name.split("?")[0]


def check_file(file, suffix=""):
    """A file's path (str): as given when it exists (or is ''), else the one file of that name under the repository's
    data/, models/ or utils/ (find_repo_file). URLs are refused with one line: this project downloads nothing."""
    check_suffix(file, suffix)
    file = str(file)
    if not file or os.path.isfile(file):
        return file
    if file.startswith(("http:/", "https:/")):
        raise RepoFileNotFound(f"{file}: an URL; this project downloads nothing. Download it and give its path.")
    if file.startswith("clearml://"):  # a ClearML dataset id, resolved by the ClearML logger
        return file
    return str(find_repo_file(file))


def check_yaml(file, suffix=(".yaml", ".yml")):
    return check_file(file, suffix)


def file_size(path):
    """Size in MB (1 MB = 2**20 bytes) of a file, or of the files under a folder; 0.0 when it does not exist."""
    p = Path(path) if path else None
    if p is None:
        return 0.0
    if p.is_file():
        return p.stat().st_size / (1 << 20)
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / (1 << 20)
    return 0.0


class WorkingDirectory:
    """`with WorkingDirectory(d):` (or as a decorator) runs in folder d, then returns to the folder it came from."""

    def __init__(self, new_dir):
        self.dir, self.cwd = new_dir, Path.cwd().resolve()

    def __enter__(self):
        self.cwd = Path.cwd().resolve()
        os.chdir(self.dir)

    def __exit__(self, *exc):
        os.chdir(self.cwd)

    def __call__(self, func):
        def wrapped(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        wrapped.__name__, wrapped.__doc__ = func.__name__, func.__doc__
        return wrapped


def _claim_dir(path, exist_ok, sep):
    candidate = path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if exist_ok:
            path.mkdir(exist_ok=True)
            return path
        for n in range(1, 10000):
            candidate = path if n == 1 else Path(f"{path}{sep}{n}")
            if n > 1 and candidate.exists():  # skip taken numbers cheaply; mkdir below is what decides
                continue
            try:
                os.mkdir(candidate)
                return candidate
            except FileExistsError:
                continue
    except OSError as e:
        raise RunDirError(f"Run folder {candidate} is not writable: cannot create it ({e.strerror or e}). Choose a "
                          "writable --project (or another --name).") from e
    raise RunDirError(f"{path}, {path}{sep}2 ... {path}{sep}9999 all exist: choose another --project or --name.")
