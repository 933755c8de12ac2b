"""Errors caused by what the user gave (a path, a file, a flag, a dataset) and how the entry scripts report them.

Each such error's message already names the file or value and says what to do, so train.py, val.py and detect.py
print it as one line and exit 1 instead of showing a traceback. No framework import here: utils/checkpoint/,
which reads checkpoints without one, subclasses UserError too.
"""
import contextlib
import logging
import re
import sys


class UserError(Exception):
    """Bad input from the user; the message says which file or value and what to do."""


@contextlib.contextmanager
def exit_on_user_error(prog):
    """Run an entry script's main: a UserError (or a missing file) becomes `prog: message` on stderr and exit
    status 1. Ctrl-C / SIGTERM stop at the next safe point with one line and exit 130 / 143 (utils/signals.py).
    Anything else is a bug and keeps its traceback."""
    from utils.signals import requested, stop_on_signal
    log = logging.getLogger("yolov5")
    with stop_on_signal(prog):
        try:
            yield
        except (UserError, FileNotFoundError) as e:
            if requested():  # raised on the way out of a stop (e.g. a worker ended by the same signal)
                raise
            log.error(f"\033[31m\033[1m{prog}: \033[0m{one_line(e, prog)}")
            sys.exit(1)


def one_line(e, prog=""):
    """An error's message as one line, without a leading '<prog>: ' it already carries (a dataset error raised
    with the loader's 'val: ' prefix under val.py printed 'val: val: ...')."""
    text = " ".join(part.strip() for part in str(e).splitlines() if part.strip())
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    if prog and plain.startswith(f"{prog}: "):
        return plain[len(prog) + 2:]
    return text


class NeedsPyTorchError(UserError):
    """The step needs the real PyTorch (TorchScript, ONNX export) and this process runs under OneFlow."""
