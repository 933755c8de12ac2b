"""The project's logger ('yolov5', messages printed bare like ultralytics'), ANSI colour prefixes and one-time
notices. No framework import: the many modules that only log load neither PyTorch nor OneFlow through here."""
import logging
import platform
import sys


def printable(text):
    """text as written, except the bytes of a file name that is not UTF-8 (held by Python as lone surrogates), which
    become \\xNN escapes: raw, they reach a terminal as garbage, and whatever re-encodes the text as UTF-8 (a log
    file, pytest-xdist's worker reports) fails on them."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:  # the bytes os.fsdecode turned into surrogates, back as bytes, then shown escaped
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no file name made
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _PrintableMessages(logging.Filter):
    """A logger filter, so that every handler (the console, caplog, a logger's file) gets the printable text."""

    def filter(self, record):
        record.msg, record.args = printable(record.getMessage()), ()
        return True


class _BelowErrors(logging.Filter):
    def filter(self, record):
        return record.levelno < logging.ERROR


# The run's log on stdout, as the official scripts write it (through the ultralytics package's logger), so that
# `python train.py ... > train.log` or `| tee` keeps it; error lines (a run that stops) on stderr, where a terminal
# still shows them when stdout goes to a file.
LOGGER = logging.getLogger("yolov5")
if not LOGGER.handlers:
    _out, _err = logging.StreamHandler(sys.stdout), logging.StreamHandler(sys.stderr)
    _out.addFilter(_BelowErrors())
    _err.setLevel(logging.ERROR)
    for _handler in (_out, _err):
        _handler.setFormatter(logging.Formatter("%(message)s"))
        LOGGER.addHandler(_handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    LOGGER.addFilter(_PrintableMessages())

_NOTICED = set()
_PROJECT_EMOJIS = "🚀✅❌⚠💡⚡⏱❎❔😃\ufe0f"


def emojis(string=""):
    """string without the emojis this project prints, on Windows (whose consoles may not draw them); as is elsewhere."""
    if platform.system() == "Windows":
        return string.translate(str.maketrans("", "", _PROJECT_EMOJIS))
    return string


def colorstr(*args):
    """colorstr('blue', 'bold', 'text'): ANSI-coloured text, as ultralytics prints its prefixes."""
    *styles, text = args if len(args) > 1 else ("blue", "bold", args[0])
    codes = {"black": "30", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
             "cyan": "36", "white": "37", "bold": "1", "underline": "4"}
    return "".join(f"\033[{codes[s]}m" for s in styles) + f"{text}\033[0m"


def notice_once(key, msg):
    """Log msg at INFO the first time key is seen in this process (a fallback worth one line, not one per step)."""
    if key not in _NOTICED:
        _NOTICED.add(key)
        LOGGER.info(msg)
