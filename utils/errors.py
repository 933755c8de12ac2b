"""Errors caused by what the user gave (a path, a file, a flag, a dataset).

Each such error's message already names the file or value and says what to do, so the entry scripts print it as one
line and exit 1 instead of showing a traceback (utils/signals.py's exit_on_user_error). No project import here: every
layer raises these, utils/checkpoint/ (which reads checkpoints without a framework) included.
"""
import re


class UserError(Exception):
    """Bad input from the user; the message says which file or value and what to do."""


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
