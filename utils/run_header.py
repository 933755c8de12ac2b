"""The two lines every official YOLOv5 script prints first, written without a framework:

    detect: weights=['yolov5n.pt'], source=data/images, ...                  print_args(vars(opt))
    YOLOv5 🚀 v7.0-5-g3e25f1e Python-3.11.7 torch-2.13.0+cpu CPU             device_line(...)

The second line's version is the project's: `git describe` of the checkout, else this file's date (as official,
where the date is of its utils/torch_utils.py). utils/device_header.py asks the backend for the framework and GPUs
and logs the device line; utils.general re-exports print_args, git_describe and file_date for users."""
import inspect
import os
import platform
import subprocess
from datetime import datetime
from pathlib import Path

from utils.log import LOGGER, colorstr
from utils.paths import ROOT


def script_name(file):
    """'detect' for ROOT/detect.py, 'segment/predict' for ROOT/segment/predict.py: a file's path relative to the
    repository without its suffix, or its bare stem when it lies outside (a user's own script, a test)."""
    path = Path(file).resolve()
    try:
        return path.relative_to(ROOT).with_suffix("").as_posix()
    except ValueError:
        return path.stem


def print_args(args=None, show_file=True, show_func=False):
    """Log `<script>: k=v, k=v, ...` (the prefix in colour), as official print_args. args: a dict (vars(opt)); None
    logs the calling function's own named arguments as they are now. show_file / show_func: prefix the caller's
    script (relative to the repository) / function name."""
    frame = inspect.currentframe().f_back  # the caller: whose file, function and arguments are shown
    try:
        code = frame.f_code
        if args is None:
            names, _, _, values = inspect.getargvalues(frame)  # named parameters only, not *args / **kwargs
            args = {k: values[k] for k in names if k in values}
        prefix = ((f"{script_name(code.co_filename)}: " if show_file else "")
                  + (f"{code.co_name}: " if show_func else ""))
    finally:
        del frame  # a frame kept in a local makes a reference cycle that holds every local of the caller
    log_args(prefix, args)


def log_args(prefix, args):
    """Log the arguments line: prefix ('train: ', in colour) and k=v for each of args, in order."""
    LOGGER.info(colorstr(prefix) + ", ".join(f"{k}={v}" for k, v in args.items()))


def git_output(path, *args):
    """A read-only git command's output in the checkout at path, or '' when path is no git checkout, git is missing,
    or git fails. Never prints: git's own complaints (e.g. 'dubious ownership') are swallowed; nothing here reaches
    the network (describe, rev-parse and config read the local repository)."""
    try:
        if not (Path(path) / ".git").exists():  # a folder in a clone, a file in a worktree or submodule
            return ""
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}  # a read: take no index lock
        out = subprocess.run(["git", "-C", str(path), *args], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, ValueError):  # no git binary, a hung git, an odd path
        return ""


def git_describe(path=ROOT):
    """`git describe --tags --long --always` of the checkout at path ('v7.0-5-g3e25f1e', or a bare commit hash when
    there are no tags), or '' (git_output)."""
    return git_output(path, "describe", "--tags", "--long", "--always")


def file_date(path=__file__):
    """A file's modification date as official writes it: year-month-day without zero padding ('2026-8-20')."""
    t = datetime.fromtimestamp(Path(path).stat().st_mtime).astimezone()
    return f"{t.year}-{t.month}-{t.day}"


def project_version():
    """The version the device line shows: the checkout's git description, else this file's date."""
    return git_describe(ROOT) or file_date(__file__)


def device_line(framework, gpus=(), newline=True, version=None):
    """The official device line. framework: '<name>-<version>' ('torch-2.13.0+cpu'); gpus: (id, properties) for each
    GPU named by --device, properties with .name and .total_memory in bytes (CUDA's device properties), empty for the
    CPU. Each further GPU goes on its own line under the first (official indents them one column past the prefix:
    the rocket is two columns wide in a terminal). newline: end with a newline, so that LOGGER leaves a blank line
    after it as official does."""
    s = f"YOLOv5 🚀 {version or project_version()} Python-{platform.python_version()} {framework} "
    if gpus:
        space = " " * (len(s) + 1)
        s += "".join(f"{'' if i == 0 else space}CUDA:{d} ({p.name}, {p.total_memory / (1 << 20):.0f}MiB)\n"
                     for i, (d, p) in enumerate(gpus))
    else:
        s += "CPU\n"
    return s if newline else s.rstrip()
