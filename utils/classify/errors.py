"""ClassificationDataError: bad classification data (folders, class lists, images, caches), one line naming the file.

TRAP: an error raised in a DataLoader worker reaches the main process rebuilt by the framework's ExceptionWrapper
(PyTorch and OneFlow alike) as `type(e)(text)`, where text is "Caught <Name> in DataLoader worker process N.\\n
Original Traceback (most recent call last): ...", the worker's whole traceback with our message on its last line.
The entry scripts print a UserError as one line, which folded that into a line of some 1,800 characters. So the
class itself recognises that text and keeps only the original message, whatever framework built it."""
import re

from utils.errors import UserError

# The shape of the framework's rebuilt message: its first line, then the worker's formatted traceback
_WORKER_TEXT = re.compile(r"^Caught (?P<name>\w+) in DataLoader worker process \d+\.\s*\nOriginal Traceback",
                          re.DOTALL)


def original_message(text, type_name):
    """The message a worker raised, from the text the framework rebuilt its exception with (else text itself): the
    traceback's last line, past '<module>.<type_name>: '."""
    text = str(text)
    if not _WORKER_TEXT.match(text):
        return text
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else text
    marker = f"{type_name}: "
    return last.split(marker, 1)[1] if marker in last else last


class ClassificationDataError(UserError, ValueError):
    """A classification dataset problem, with a message that names the file or folder and says what to do."""

    def __init__(self, message=""):
        super().__init__(original_message(message, type(self).__name__))
