"""Errors caused by what the user gave (a path, a file, a flag, a dataset) and how the entry scripts report them.

Each such error's message already names the file or value and says what to do, so train.py, val.py and detect.py
print it as one line and exit 1 instead of showing a traceback. No framework import here: utils/checkpoint/,
which reads checkpoints without one, subclasses UserError too.
"""
import contextlib
import logging
import sys


class UserError(Exception):
    """Bad input from the user; the message says which file or value and what to do."""


@contextlib.contextmanager
def exit_on_user_error(prog, on_interrupt="interrupted"):
    """Run an entry script's main: a UserError (or a missing file) becomes `prog: message` on stderr and exit
    status 1; Ctrl-C prints `on_interrupt` and exits 130. Anything else is a bug and keeps its traceback."""
    log = logging.getLogger("yolov5")
    try:
        yield
    except (UserError, FileNotFoundError) as e:
        log.error(f"\033[31m\033[1m{prog}: \033[0m{e}")
        sys.exit(1)
    except KeyboardInterrupt:
        log.error(f"\n{prog}: {on_interrupt}")
        sys.exit(130)


class NeedsPyTorchError(UserError):
    """The step needs the real PyTorch (TorchScript, ONNX export) and this process runs under OneFlow."""
