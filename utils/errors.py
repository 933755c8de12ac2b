"""Errors caused by what the user gave (a path, a file, a flag, a dataset).

Each such error's message already names the file or value and says what to do, so the entry scripts print it as one
line and exit 1 instead of showing a traceback (utils/signals.py's exit_on_user_error). No project import here: every
layer raises these, utils/checkpoint/ (which reads checkpoints without a framework) included.

TRAP: an error raised in a DataLoader worker (a bad image or label met mid-epoch) reaches the main process rebuilt by
the framework's ExceptionWrapper -- PyTorch's and OneFlow's alike -- as `type(e)(text)`, where text is
"Caught <Name> in DataLoader worker process N.\nOriginal Traceback (most recent call last): ...": the worker's whole
traceback, the original message on its last line(s). Printed as one line that was a line of 1,000 to 2,000
characters. worker_original_message recovers the message; UserError applies it when it is built, and one_line
applies it to any error it prints (a FileNotFoundError from an image reader is rebuilt the same way).
"""
import re

# The first line of the framework's rebuilt message ("in DataLoader worker process 2", "in pin memory thread for
# device 0"), then "Original " and the worker's formatted exception
_WORKER_TEXT = re.compile(r"Caught (?P<name>\w+) (?P<where>[^\n]*)\.\nOriginal (?P<formatted>.*)", re.DOTALL)


def worker_original_message(text):
    """The message an exception was raised with in a DataLoader worker, from the text the framework rebuilt it with:
    what follows '<module>.<Name>: ' on the formatted exception's last line that starts so (the lines after it too,
    for a message of several lines). Any other text is returned as it is."""
    text = str(text)
    m = _WORKER_TEXT.match(text)
    if not m:
        return text
    # the exception's own line starts at column 0 with its qualified name (builtins unqualified); frames and
    # source lines of the traceback are indented
    head = re.compile(rf"(?:[A-Za-z_][\w.]*\.)?{re.escape(m['name'])}(?::[ \t]?|$)")
    lines = m["formatted"].splitlines()
    for i in range(len(lines) - 1, -1, -1):
        found = head.match(lines[i])
        if found:
            return "\n".join([lines[i][found.end():], *lines[i + 1:]]).strip()
    return text


class UserError(Exception):
    """Bad input from the user; the message says which file or value and what to do (also when the error was raised
    in a DataLoader worker and rebuilt from its traceback's text, see worker_original_message)."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            args = (worker_original_message(args[0]),)
        super().__init__(*args)



class TrainingError(UserError, RuntimeError):
    """A training that cannot start or go on, with a message that says what to do. Defined here, in the base layer,
    because the tasks' own training steps (utils/classify/training.py) raise it as the engine does; the engine's
    utils/engine/errors.py hands out the same class."""

def one_line(e, prog=""):
    """An error's message as one line, without a leading '<prog>: ' it already carries (a dataset error raised
    with the loader's 'val: ' prefix under val.py printed 'val: val: ...'), and without the worker's traceback that
    a DataLoader folds into an error raised in one of its workers."""
    text = " ".join(part.strip() for part in worker_original_message(e).splitlines() if part.strip())
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    if prog and plain.startswith(f"{prog}: "):
        return plain[len(prog) + 2:]
    return text


class NeedsPyTorchError(UserError):
    """The step needs the real PyTorch (TorchScript, ONNX export) and this process runs under OneFlow."""
