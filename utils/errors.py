"""Errors caused by what the user gave (a path, a file, a flag, a dataset).

Each such error's message already names the file or value and says what to do, so the entry scripts print it as one
line and exit 1 instead of showing a traceback (utils/signals.py's exit_on_user_error). No import at all here: every
layer raises these, utils/checkpoint/ (which reads checkpoints without a framework) included.
"""


class UserError(Exception):
    """Bad input from the user; the message says which file or value and what to do."""


class NeedsPyTorchError(UserError):
    """The step needs the real PyTorch (TorchScript, ONNX export) and this process runs under OneFlow."""
