"""Where the program runs and what it has there, under ultralytics' names (utils.general: is_colab, check_requirements,
check_font, CONFIG_DIR, ...), for users' scripts and notebooks. Nothing here installs, downloads or contacts a
server unasked: check_requirements reports what is missing with the pip command instead of running pip, check_font
finds a font without fetching one, check_git_status says it does not check online. check_online is the one call that
opens a connection, and only when called. Framework-free."""
import os
import platform
import socket
import sys
from pathlib import Path

from utils.log import LOGGER, colorstr
from utils.paths import ROOT
from utils.run_header import git_output
from utils.settings import CONFIG_DIR as CONFIG_DIR_SETTING

FONT = "Arial.ttf"
AUTOINSTALL = False  # ultralytics pip-installs missing requirements by default; this project never installs
DATASETS_DIR = ROOT.parent / "datasets"  # a data YAML's path: ../datasets/<name> lands here (resolved from ROOT)


def is_colab():
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def is_kaggle():
    return os.environ.get("PWD") == "/kaggle/working" and os.environ.get("KAGGLE_URL_BASE") == "https://www.kaggle.com"


def is_jupyter():
    """True inside a Jupyter kernel (an IPython shell that has a kernel), False in a terminal or a script."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def is_docker():
    if Path("/.dockerenv").exists():
        return True
    try:
        with open("/proc/self/cgroup") as f:
            return "docker" in f.read()
    except OSError:
        return False


def check_online():
    """Whether a public DNS server answers on port 443 (two tries, 2 s each). Contacts the network when called."""
    for _ in range(2):
        try:
            socket.create_connection(("1.1.1.1", 443), timeout=2).close()
            return True
        except OSError:
            continue
    return False


def user_config_dir(dir="Ultralytics", env_var="YOLOV5_CONFIG_DIR", create=True):
    """The settings folder: $YOLOV5_CONFIG_DIR, else the platform's per-user config folder (~/.config on Linux,
    ~/Library/Application Support on macOS, AppData/Roaming on Windows) joined with dir; /tmp/dir when that is
    not writeable. Made when create (ultralytics always makes it)."""
    env = CONFIG_DIR_SETTING.get() if env_var == CONFIG_DIR_SETTING.name else os.environ.get(env_var)
    if env:
        path = Path(env)
    else:
        home = Path.home()
        base = {"Windows": home / "AppData" / "Roaming", "Darwin": home / "Library" / "Application Support"}
        path = base.get(platform.system(), home / ".config") / dir
        if not _writeable_folder(path.parent):
            path = Path("/tmp") / dir
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def _writeable_folder(d):
    return d.is_dir() and os.access(d, os.W_OK)


CONFIG_DIR = user_config_dir(create=False)  # not made on import: made by whoever first writes there


def check_font(font=FONT, progress=False):
    """The path of font when it is a file or in CONFIG_DIR, else None. ultralytics downloads Arial.ttf here; this
    project draws its labels with OpenCV's built-in font and needs no font file."""
    for p in (Path(font), CONFIG_DIR / Path(font).name):
        if p.is_file():
            return p
    return None


def check_imshow(warn=False):
    """Whether OpenCV can open a window here (not in Docker, Colab or Kaggle, nor with a headless OpenCV build)."""
    try:
        if is_docker() or is_colab() or is_kaggle():
            raise RuntimeError("no display in Docker, Colab or Kaggle")
        import cv2

        cv2.imshow("test", __import__("numpy").zeros((1, 1, 3), dtype="uint8"))
        cv2.waitKey(1)
        cv2.destroyAllWindows()
        cv2.waitKey(1)
        return True
    except Exception as e:  # cv2.error from a headless build, RuntimeError above
        if warn:
            LOGGER.warning(f"WARNING ⚠️ Environment does not support cv2.imshow() or PIL Image.show()\n{e}")
        return False


def check_git_info(path=ROOT):
    """{'remote', 'branch', 'commit'} of the checkout at path (from the local repository only), or {}."""
    commit = git_output(path, "rev-parse", "HEAD")
    if not commit:
        return {}
    branch = git_output(path, "rev-parse", "--abbrev-ref", "HEAD")
    return {"remote": git_output(path, "config", "--get", "remote.origin.url") or None,
            "branch": None if branch in ("", "HEAD") else branch, "commit": commit}


def check_git_status(repo="ultralytics/yolov5", branch="master"):
    """ultralytics compares the checkout with GitHub here; this project contacts nothing, so it says so."""
    LOGGER.info(colorstr("github: ") + "skipping check (this project checks nothing online)")


def check_version(current="0.0.0", minimum="0.0.0", name="version ", pinned=False, hard=False, verbose=False):
    """current >= minimum (== when pinned). hard: raise ValueError naming the package instead of returning False;
    verbose: log a warning when it does not hold."""
    from packaging.version import parse  # matplotlib's dependency, so always installed with the requirements

    ok = parse(str(current)) == parse(str(minimum)) if pinned else parse(str(current)) >= parse(str(minimum))
    msg = f"WARNING ⚠️ {name}{minimum} is required by YOLOv5, but {name}{current} is currently installed"
    if hard and not ok:
        raise ValueError(msg)
    if verbose and not ok:
        LOGGER.warning(msg)
    return ok


def _requirement_lines(requirements):
    if isinstance(requirements, Path) or (isinstance(requirements, str) and requirements.endswith(".txt")):
        lines = Path(requirements).read_text().splitlines()
    else:
        lines = [requirements] if isinstance(requirements, str) else list(requirements)
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip() and not ln.strip().startswith("-")]


def check_requirements(requirements=ROOT / "requirements.txt", exclude=(), install=True, cmds=""):
    """True when every requirement (a requirements file, one 'pkg>=x' string or a list) is installed at a version
    that satisfies it. Otherwise False and one warning listing the missing ones and the pip command that installs
    them: this project does not run pip itself (install is accepted and ignored)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    missing = []
    for line in _requirement_lines(requirements):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name in exclude or (req.marker is not None and not req.marker.evaluate()):
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(str(req))
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(str(req))
    if missing:
        quoted = " ".join(f'"{m}"' for m in missing)
        LOGGER.warning(f"{colorstr('requirements:')} not installed: {', '.join(missing)}; install with: "
                       f"pip install {quoted} {cmds}".rstrip())
    return not missing
