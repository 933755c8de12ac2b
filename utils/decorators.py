"""Two helpers ultralytics users import from utils: TryExcept (an optional step whose error is one warning) and
threaded (a call run in its own thread). Framework-free."""
import contextlib
import threading

from utils.log import LOGGER


class TryExcept(contextlib.ContextDecorator):
    """A decorator or `with` block whose exceptions become one warning (`msg: error`) instead of stopping the caller:
    for optional work (a plot, a logger) whose failure must not end a run."""

    def __init__(self, msg="", verbose=True):
        self.msg, self.verbose = msg, verbose

    def __enter__(self):
        return self

    def __exit__(self, exc_type, value, traceback):
        if exc_type is not None and not issubclass(exc_type, Exception):
            return False  # KeyboardInterrupt, SystemExit: a stop the user asked for goes through
        if self.verbose and value is not None:
            LOGGER.warning(f"{self.msg}{': ' if self.msg else ''}{value}")
        return True


def threaded(func):
    """Decorator: a call runs func in a new thread and returns the thread; `threaded=False` runs it here and returns
    its result. The thread is not a daemon, so the interpreter finishes it before exiting (a plot is not cut short)."""

    def wrapper(*args, **kwargs):
        if not kwargs.pop("threaded", True):
            return func(*args, **kwargs)
        t = threading.Thread(target=func, args=args, kwargs=kwargs, daemon=False)
        t.start()
        return t

    wrapper.__name__, wrapper.__doc__ = func.__name__, func.__doc__
    return wrapper
