"""Ctrl-C (SIGINT) and SIGTERM for the entry scripts: record the request, stop at the next safe point, say in one
line what is on disk, exit 130 / 143.

Why not the default KeyboardInterrupt (which, under OneFlow, only exists since utils/backend/ takes SIGINT back
from OneFlow's own C handler): it is raised wherever the main thread happens to be, so it can be swallowed (an
exception raised inside a __del__ or a callback is only printed), it can land between a results.csv row and its
checkpoint, and SIGTERM has no such exception at all: the default kills the process without a word. Here the
handler only records the signal; the loops call check() between steps and batches, where stopping is harmless,
so a checkpoint save in progress is always finished, and the exit line reports what the file on disk holds.

A second signal while stopping (a second or more after the first) ends the process at once (exit 128 + that signal), from a watcher thread woken
through signal.set_wakeup_fd, so it works even while the main thread is stuck in framework code.

DataLoader workers (forked) block SIGINT: a terminal's Ctrl-C reaches the whole process group, and a worker that
died of it would fail the next batch or, under OneFlow, exit silently (its worker loop os._exit(0)s on SIGINT).
They keep SIGTERM, which is how multiprocessing ends them at a normal exit; the main process still decides when
to stop. A worker ended by the group's SIGTERM can make PyTorch raise in the main thread before the stop's handler
ran there: an error with no stop recorded waits STOP_GRACE_S for one on its way before it counts as a crash. No
framework import here.
"""
import contextlib
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
import time
from pathlib import Path

from utils.checkpoint import load_any
from utils.errors import UserError, one_line

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Signals this soon after the first are the same request arriving twice, not a second Ctrl-C: a terminal's Ctrl-C
# reaches a DDP rank directly and again through its launcher (oneflow.distributed.launch sends SIGTERM to its whole
# process group at once, torch.distributed.run forwards SIGINT).
SAME_REQUEST_S = 1.0
# How long an error raised with no stop recorded waits for a stop signal on its way (see StopHandler.arriving): the
# error path only, so a genuine crash prints its traceback this much later
STOP_GRACE_S = 0.5


class Interrupted(KeyboardInterrupt):
    """Raised by check() at a safe point once SIGINT or SIGTERM arrived. A KeyboardInterrupt, so that code which
    already treats Ctrl-C specially (tqdm, pytest, `except Exception` blocks that must not catch it) still does."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopHandler:
    """The process's record of stop requests. Entry scripts install one (install()); the rest of the code only
    calls the module functions, which do nothing when none is installed (train.run() from Python, the tests)."""

    def __init__(self, prog):
        self.prog, self.pid = prog, os.getpid()
        self.signum = None  # the first stop signal, once one arrived
        self.seen = None  # the first stop signal as the watcher read it from the wakeup pipe (it may be first)
        self.describe = lambda: "nothing was written yet"  # what is on disk; the running code replaces it
        self._exit_lock = threading.Lock()  # one exit line even if a second signal races the first exit
        self._printed = False
        self._rfd = self._wfd = None
        self.on_stop = []  # callables run just before the exit (a DDP rank's goodbye to its peers' watchdogs)

    def install(self):
        for s in STOP_SIGNALS:
            signal.signal(s, self._on_signal)
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)  # set_wakeup_fd requires it: the C handler must never block
        signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="stop-signal-watcher", daemon=True).start()
        os.register_at_fork(after_in_child=_forget_in_child)
        multiprocessing.util.register_after_fork(self, _block_interrupts_in_worker)
        return self

    def _on_signal(self, signum, frame):
        # Runs in the main thread between bytecodes. Forked children inherit it until they reset their handlers.
        if os.getpid() == self.pid and self.signum is None:
            self.signum = signum

    def _watch(self):
        """Counts stop signals from the wakeup pipe (the C-level handler writes each signal's number there before
        any Python code runs); the second one exits now, whatever the main thread is doing."""
        first = None
        while True:
            try:
                data = os.read(self._rfd, 64)
            except InterruptedError:
                continue
            except OSError:
                return
            now = time.monotonic()
            for b in data:
                if b not in STOP_SIGNALS:
                    continue
                if first is None:
                    first, self.seen = now, b
                elif now - first >= SAME_REQUEST_S:
                    self.exit(b, f"stopped at once by a second {signal.Signals(b).name}")

    def check(self):
        if self.signum is not None:
            raise Interrupted(self.signum)

    def arriving(self, grace_s=STOP_GRACE_S):
        """The stop signal of this stop, waiting up to grace_s for one on its way. A signal sent to the process group
        ends a DataLoader worker too, and PyTorch's SIGCHLD handler can raise ("worker ... killed by signal") in the
        main thread before the stop's own handler has run there; the C-level handler (or the watcher, from the
        wakeup pipe) records it within milliseconds. None when no stop signal comes: the error was not a stop."""
        deadline = time.monotonic() + grace_s
        while True:
            signum = self.signum or self.seen
            if signum is not None or time.monotonic() >= deadline:
                return signum
            time.sleep(0.01)

    def exit(self, signum, how=None):
        """Print the one line, end the DataLoader workers and leave with 128 + signum, skipping interpreter
        teardown: OneFlow's atexit/static destructors are where an interrupted run used to crash or hang, and
        everything worth keeping is already on disk (checkpoints are written atomically)."""
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(BaseException):
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a dying worker must not raise into this path
        how = how or f"stopped by {signal.Signals(signum).name}"
        if self._exit_lock.acquire(timeout=2.0):  # the other exit may be printing: let it finish its line
            if not self._printed and self.describe is not None:
                try:
                    status = self.describe()
                except BaseException as e:  # the report must never stop the exit
                    status = f"what is on disk could not be read ({type(e).__name__}: {e})"
                self._print(how, status)
        elif not self._printed and self.describe is not None:  # the first exit is stuck before its line
            self._print(how, "what is on disk was not determined")
        for fn in self.on_stop:
            with contextlib.suppress(BaseException):
                fn()
        _end_children()
        os._exit(128 + int(signum))

    def _print(self, how, status):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        with contextlib.suppress(OSError):
            os.write(2, f"\n{self.prog}: {how}; {status}\n".encode(errors="replace"))
        self._printed = True


_handler = None


def install(prog):
    """Install the stop handler for this process (idempotent). Only the main thread can set signal handlers; from
    elsewhere this does nothing and Ctrl-C keeps Python's default behaviour."""
    global _handler
    if _handler is None and threading.current_thread() is threading.main_thread():
        _handler = StopHandler(prog).install()
    return _handler


def check():
    """A safe point: raise Interrupted if SIGINT/SIGTERM arrived. Cheap enough to call every step."""
    if _handler is not None:
        _handler.check()


def requested():
    """The stop signal received so far (None if none, or if no handler is installed)."""
    return _handler.signum if _handler is not None else None


def describe_on_disk(describe):
    """What the exit line says is on disk: a callable returning one clause (called only at exit), or None for a
    process that prints no line (DDP ranks other than 0: rank 0 reports)."""
    if _handler is not None:
        _handler.describe = describe


def on_stop(fn):
    """Run fn() when a signal stops the process, right before it exits (no-op without a handler)."""
    if _handler is not None:
        _handler.on_stop.append(fn)


def checkpoint_status(last):
    """One clause on what the checkpoint `last` holds, read from the file itself (not from what the code meant
    to save): 'runs/train/exp/weights/last.pt holds epoch 3; ...' or 'no checkpoint was written yet'."""
    last = Path(last)
    if not last.is_file():
        return "no checkpoint was written yet"
    epoch = load_any(last).get("epoch")
    if epoch is None or int(epoch) < 0:
        return f"{last} holds the finished training"
    return f"{last} holds epoch {int(epoch)}; continue with 'python {_trainer_script()} --resume {last}'"


def _trainer_script():
    """The training script this process runs, as a user types it: segment/train.py, classify/train.py, train.py."""
    script = Path(sys.argv[0] if sys.argv and sys.argv[0] else "train.py")
    return f"{script.parent.name}/{script.name}" if script.parent.name in ("segment", "classify") else "train.py"


@contextlib.contextmanager
def stop_on_signal(prog):
    """Wrap an entry script's main: a stop (Interrupted at a safe point, a KeyboardInterrupt from elsewhere, or any
    error raised while a stop was pending, such as a DataLoader worker ended by the same signal) prints the one
    line and exits 130 / 143. SystemExit passes through."""
    handler = install(prog)
    try:
        yield handler
    except SystemExit:
        raise
    except BaseException as e:
        signum = requested() or (e.signum if isinstance(e, Interrupted) else
                                 signal.SIGINT if isinstance(e, KeyboardInterrupt) else None)
        if signum is None and handler is not None:
            signum = handler.arriving()  # a worker ended by the same signal can raise before its handler ran
        if signum is None or handler is None:
            raise
        handler.exit(signum)


def _forget_in_child():
    # The wakeup pipe belongs to the parent's watcher: a child writing its signals there would count as the
    # parent's "second Ctrl-C".
    with contextlib.suppress(Exception):
        signal.set_wakeup_fd(-1)


def _block_interrupts_in_worker(_handler_obj):
    """In a multiprocessing child (DataLoader worker), before its own code runs: SIGINT stays pending for good.
    Blocking survives the handlers the worker loop installs, unlike SIG_IGN; workers still exit when the parent
    ends them (SIGTERM) or dies (their watchdog polls the parent pid)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _end_children(timeout=3.0):
    """Terminate and reap multiprocessing children (DataLoader workers), so none outlives the exit."""
    try:
        children = multiprocessing.active_children()
        for p in children:
            with contextlib.suppress(Exception):
                p.terminate()
        deadline = time.monotonic() + timeout
        for p in children:
            with contextlib.suppress(Exception):
                p.join(max(0.0, deadline - time.monotonic()))
        for p in children:
            if p.is_alive():
                with contextlib.suppress(Exception):
                    p.kill()
    except BaseException:
        pass


@contextlib.contextmanager
def exit_on_user_error(prog):
    """Run an entry script's main: a UserError (or a missing file) becomes `prog: message` on stderr and exit
    status 1. Ctrl-C / SIGTERM stop at the next safe point with one line and exit 130 / 143 (stop_on_signal).
    Anything else is a bug and keeps its traceback."""
    log = logging.getLogger("yolov5")
    with stop_on_signal(prog):
        try:
            yield
        except (UserError, FileNotFoundError) as e:
            if requested():  # raised on the way out of a stop (e.g. a worker ended by the same signal)
                raise
            log.error(f"\033[31m\033[1m{prog}: \033[0m{one_line(e, prog)}")
            sys.exit(1)
