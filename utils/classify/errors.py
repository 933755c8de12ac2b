"""ClassificationDataError: bad classification data (folders, class lists, images, caches), one line naming the file.

Raised in a DataLoader worker too (a bad image met mid-epoch): the framework rebuilds it from the worker's traceback
text, and UserError (utils/errors.py, worker_original_message) keeps only the original message, whatever framework
built it."""
from utils.errors import UserError


class ClassificationDataError(UserError, ValueError):
    """A classification dataset problem, with a message that names the file or folder and says what to do."""
