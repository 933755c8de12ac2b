"""Guarded: the one way Loggers calls an outside logger. A logger is a convenience, never a reason for a run to stop:
the first exception any of its calls raises (a service that cannot be reached, a changed package API, a full disk)
becomes one warning line, and that logger stays off for the rest of the run, so a dead service costs one timeout,
not one per epoch."""
import threading

from utils.log import LOGGER


class Guarded:
    """Wraps one logger object (or None). call(method, ...) runs target.method(...) and returns its result, or None
    when the target is off, lacks the method, or raises (then: one warning, and off from now on)."""

    def __init__(self, name, target=None):
        self.name, self.target = name, target

    def __bool__(self):
        return self.target is not None

    def call(self, method, *args, **kwargs):
        fn = getattr(self.target, method, None)
        if fn is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - whatever a logger raises, training goes on
            first_line = (str(e).strip().splitlines() or [""])[0]  # one line, whatever the package printed
            self.disable(f"{method} failed ({type(e).__name__}: {first_line})")
            return None

    def call_within(self, seconds, method, *args, **kwargs):
        """call() in a daemon thread, given up after `seconds`: for the last call of a run (a package's close that
        waits on a service or a helper process), so the run still ends; what it left undone is named in one line."""
        if self.target is None:
            return
        worker = threading.Thread(target=self.call, args=(method, *args), kwargs=kwargs, daemon=True,
                                  name=f"{self.name} {method}")
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            self.disable(f"{method} did not end within {seconds:.0f} s (left running in the background)")

    def disable(self, why):
        LOGGER.warning(f"{self.name}: {why}; {self.name} logging is off for the rest of this run, training goes on.")
        self.target = None


def start(name, factory, *args, **kwargs):
    """Guarded(name, factory(*args, **kwargs)); a factory that raises gives a Guarded that is off, with one warning.
    A factory returns None to mean "not configured here" (it says so itself, or stays silent)."""
    try:
        return Guarded(name, factory(*args, **kwargs))
    except Exception as e:  # noqa: BLE001
        g = Guarded(name)
        g.disable(f"could not start ({type(e).__name__}: {e})")
        return g
