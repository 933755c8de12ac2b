"""Every ``YOLO_*`` environment variable the project reads: its type, default and meaning, and the one place it is read.

Each setting is a :class:`Setting`; ``SETTING.get()`` is its value in this process. A value is parsed (and checked)
once per raw string and then reused, and only when something asks for it: a bad value is reported by the code that
needs it, inside the entry script's one-line error handling (the few read while utils.backend is imported are
checked by utils/backend/selection.py, which makes their error one line too). A test that changes the environment
(``monkeypatch.setenv``) gets the new value on the next ``get()``.

Every value is parsed strictly: anything outside a setting's values is a SettingError naming the variable, the value
and what it takes (a typo such as YOLO_QUIET=yes used to mean 0 without a word). Empty (or blank) is the same as
unset, for every variable: the default (an empty YOLO_CACHE_DIR used to cache into the working folder).

docs/settings.md's table of these variables is ``markdown_table()`` (``python -m utils.settings`` prints it; a test
keeps the two equal). YOLO_BACKEND is declared here and read by utils/backend/selection.py, the owner of the choice.
No framework import here (only utils/errors.py, which imports nothing): every layer may read its settings.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from utils.backend_choice import ALIASES as BACKEND_ALIASES
from utils.errors import UserError


class SettingError(UserError, ValueError):
    """A YOLO_* variable with a value that cannot be used (the message names it and says what to give)."""


@dataclass(frozen=True)
class Setting:
    name: str
    type: str  # as the settings table shows it
    default: object  # or a function that makes it (a default that depends on the user's home folder)
    meaning: str
    parse: Callable = field(default=str, repr=False)  # raw string -> value; raises SettingError on a bad one
    shown_default: str = ""  # the table's default column when the default is made by a function

    def get(self, environ=None):
        """The value in ``environ`` (default: this process's environment); the default when unset or empty. A value
        the setting does not take raises SettingError naming the variable and what it takes."""
        raw = (os.environ if environ is None else environ).get(self.name)
        if raw is None or not raw.strip():
            return self.default() if callable(self.default) else self.default
        key = (self.name, raw)
        if key not in _PARSED:
            try:
                _PARSED[key] = self.parse(raw.strip())
            except ValueError as e:  # the parser says why; the message adds which variable and what it takes
                default = _shown_default(self)
                default = "" if default == "unset" else f" ({default})"
                raise SettingError(f"{self.name}={raw!r}: {e}; give {self.type}, or unset it for the "
                                   f"default{default}.") from None
        return _PARSED[key]

    def is_set(self, environ=None):
        """Whether the variable holds a value (empty counts as unset)."""
        return bool((os.environ if environ is None else environ).get(self.name, "").strip())

    def set_default(self, value):
        """Set the variable for this process and its children unless the user set it."""
        os.environ.setdefault(self.name, str(value))


_PARSED = {}


def _choice(*choices):
    """One of choices, case-insensitive (returned in lower case)."""
    def parse(raw):
        value = raw.lower()
        if value not in choices:
            raise ValueError("not a value it takes")
        return value
    return parse


def _switch(raw):
    """0 or 1 -> False or True."""
    if raw not in ("0", "1"):
        raise ValueError("not 0 or 1")
    return raw == "1"


def _seconds(raw):
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("not a number of seconds") from None
    if not (0 < value < float("inf")):
        raise ValueError("not a positive, finite number of seconds")
    return value


def _whole_number(low, high=None):
    def parse(raw):
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < low:
            raise ValueError(f"less than {low}")
        if high is not None and value > high:
            raise ValueError(f"more than {high}")
        return value
    return parse


def _module_name(raw):
    if not all(part.isidentifier() for part in raw.split(".")):
        raise ValueError("not a module name (dotted Python identifiers)")
    return raw


BACKEND = Setting(
    "YOLO_BACKEND", "oneflow, torch", "",
    "The framework to run. Unset: OneFlow when a CUDA GPU is seen, PyTorch otherwise, each falling back to the "
    "other when it is not installed.", _choice(*BACKEND_ALIASES))
QUIET = Setting(
    "YOLO_QUIET", "0, 1", False,
    "1 silences the one-line notice on stderr saying which backend is in use and why.", _switch)
FUSED_CIOU = Setting(
    "YOLO_FUSED_CIOU", "plain, compile, triton", "",
    "Overrides the fused CIoU of `--bbox_iou_optim` on PyTorch + CUDA: `compile` prefers torch.compile to the "
    "Triton kernel, `plain` turns the fused path off (anywhere).", _choice("plain", "compile", "triton"))
CHANNELS_LAST = Setting(
    "YOLO_CHANNELS_LAST", "0, 1", None,
    "Channels-last input batches: unset, on for the CPU and off for CUDA; 0 off, 1 on for every device.", _switch)
NCHW_WEIGHT_GRAD = Setting(
    "YOLO_NCHW_WEIGHT_GRAD", "0, 1", None,
    "Large CPU training convolutions take their weight gradient from NCHW copies: unset, on where oneDNN runs AVX2 "
    "kernels (no AVX-512; faster there) and off elsewhere; 0 off, 1 on.", _switch)
FUSED_BN_SILU = Setting(
    "YOLO_FUSED_BN_SILU", "0, 1", True,
    "CPU training runs each Conv's BatchNorm and SiLU as one C kernel (fp32 or bf16 channels-last; built on first use with "
    "the C compiler, cc or $CC, into YOLO_CACHE_DIR/native); 0 keeps PyTorch's separate kernels.", _switch)
HOST_MALLOC = Setting(
    "YOLO_HOST_MALLOC", "default, 0, off, glibc", "",
    "Any of these keeps glibc malloc's defaults on CPU-only machines (the project otherwise keeps freed memory "
    "mapped between training steps).", _choice("default", "0", "off", "glibc"))
LOSS_READBACK = Setting(
    "YOLO_LOSS_READBACK", "a whole number >= 1", None,
    "Read the loss back from the device every N steps (a non-finite loss still stops at its exact step). Unset: 10 "
    "on CUDA, 1 on the CPU.", _whole_number(1))
PLOT_PROCESSES = Setting(
    "YOLO_PLOT_PROCESSES", "0, 1", True,
    "0 draws plot files inline, as the official code does, instead of in two helper processes.", _switch)
CACHE_DIR = Setting(
    "YOLO_CACHE_DIR", "path", lambda: Path.home() / ".cache" / "yolov5",
    "Where `--cache disk` writes its .npy files for image folders that are not writable.",
    lambda raw: Path(raw).expanduser(),
    shown_default="~/.cache/yolov5")
ALLOW_DOWNLOAD_SCRIPTS = Setting(
    "YOLO_ALLOW_DOWNLOAD_SCRIPTS", "0, 1", False,
    "1 lets a dataset YAML's `download:` entry (a zip URL, shell or Python) run (as `--allow-download-scripts` "
    "does).", _switch)
DDP_TIMEOUT = Setting(
    "YOLO_DDP_TIMEOUT", "seconds > 0", 10800.0,
    "Bounds a DDP job's collectives and is the watchdog's no-progress limit (3 h, as ultralytics: the other ranks "
    "wait while rank 0 validates).", _seconds)
DDP_PEER_TIMEOUT = Setting(
    "YOLO_DDP_PEER_TIMEOUT", "seconds > 0", 60.0,
    "How long the DDP watchdog tolerates a silent peer rank.", _seconds)
DDP_WATCHDOG = Setting(
    "YOLO_DDP_WATCHDOG", "0, 1", True,
    "0 turns the DDP watchdog off (e.g. behind a firewall that blocks its port).", _switch)
DDP_WATCHDOG_PORT = Setting(
    "YOLO_DDP_WATCHDOG_PORT", "a port, 1-65535", None,
    "The DDP watchdog's TCP port. Unset: MASTER_PORT + 1.", _whole_number(1, 65535))
DDP_PROBE = Setting(
    "YOLO_DDP_PROBE", "a module name", "",
    "An importable module whose `attach(model, loader, ctx)` is called on every DDP rank (the DDP tests' observer); "
    "unset, nothing is attached.", _module_name)
CONFIG_DIR = Setting(
    "YOLOV5_CONFIG_DIR", "path", "",
    "The settings folder `utils.general.user_config_dir()` and `CONFIG_DIR` name (ultralytics' variable); unset, "
    "the platform's per-user config folder + `/Ultralytics`. The project itself writes nothing there.",
    lambda raw: Path(raw).expanduser())
# Internal: set by the first process that printed the backend notice, so its children (loader workers, DDP ranks)
# stay quiet. Not a user setting, so not in the table.
BACKEND_ANNOUNCED = Setting("_YOLO_BACKEND_ANNOUNCED", "0, 1", False, "(internal)", lambda raw: bool(raw))

SETTINGS = (BACKEND, QUIET, FUSED_CIOU, CHANNELS_LAST, NCHW_WEIGHT_GRAD, FUSED_BN_SILU, HOST_MALLOC, LOSS_READBACK,
            PLOT_PROCESSES, CACHE_DIR, ALLOW_DOWNLOAD_SCRIPTS, DDP_TIMEOUT, DDP_PEER_TIMEOUT, DDP_WATCHDOG, DDP_WATCHDOG_PORT, DDP_PROBE,
            CONFIG_DIR)


def _shown_default(s):
    if s.shown_default:
        return s.shown_default
    if s.default in ("", None):
        return "unset"
    if isinstance(s.default, bool):
        return "1" if s.default else "0"
    return f"{s.default:g}" if isinstance(s.default, float) else str(s.default)


def markdown_table():
    """docs/settings.md's table of the settings, one row each."""
    rows = ["| Variable | Values | Default | Meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.type} | {_shown_default(s)} | {s.meaning} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
