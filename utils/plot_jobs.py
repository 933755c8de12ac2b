"""Plot files drawn by helper processes while the run goes on.

A training run spends seconds of its main thread on matplotlib and OpenCV drawings -- labels.jpg and its
correlogram, the train and val batch mosaics, the PR/F1/P/R curves, the confusion matrix, results.png: about 4.5 s
of a 25 s yolov5n run on a 2-core machine -- while the other core often waits (loader workers idle between batches,
single-threaded Python between steps). PlotJobs hands each drawing to one of two helper processes instead: the
caller goes on, a helper writes the file. wait() blocks until every drawing handed over is written: training waits
before its closing line (and on the way out of a failed run), validation before it returns, so every file is there
when the caller looks.

The helpers are forked once: by train.py and segment/train.py before they import the framework (fork_early), else
when the first drawing is submitted (early in a run, while the heap is small: a child forked later from a
multi-gigabyte training process makes the parent copy every page it writes while the child lives); they import
matplotlib themselves and run at the trainer's priority (see _serve). Drawings get host data only (numpy arrays,
numbers, paths; the caller converts tensors first) and never call the framework. Without fork (Windows) or with
YOLO_PLOT_PROCESSES=0 each drawing happens inline when submitted, as the official code draws. A drawing that fails
is one warning, never a failed run. A helper ends with the process that started it, however that one ends (SIGKILL
included: see utils/child_processes.py); before, a helper blocked on its own queue outlived a killed trainer for good.
"""
import atexit
import contextlib
import multiprocessing
import os
import pickle
import signal

from utils.child_processes import ParentLink
from utils.log import LOGGER
from utils.plots import pyplot
from utils.settings import PLOT_PROCESSES

HELPERS = 2  # the end of a validation hands over five figures at once: two draw side by side
# Drawing time of the heavy figures relative to a curve (about 0.3 s on a 2-core machine): a drawing goes to the
# helper with the least work queued, so that the confusion matrix handed over with eight curves at the end of a
# segmentation validation does not wait behind four of them.
COSTS = {"labels.jpg": 10.0, "results.png": 7.0, "confusion_matrix.png": 5.0}


def inline(what, fn, *args, **kwargs):
    """Draw now in this process (PlotJobs.submit's signature); a failure is one warning."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # plots are a convenience: never fail a run over them
        LOGGER.warning(f"WARNING ⚠️ {what} not plotted: {e}")


def _serve(jobs, answers, warm_matplotlib=True, parent=None):
    """A helper: draw each (what, fn, args, kwargs) received, answer (what, error or ''), stop at None.
    warm_matplotlib: import it first, while the run is busy elsewhere (else the first drawing that needs it does).
    parent: the ParentLink made before the fork; the helper dies with that process. (The queue cannot tell: the
    helper holds the queue's write end itself, so its reads never see an end of file.)
    A helper keeps its parent's priority. The run waits for its drawings (wait()), and a process may lower its own
    priority but, unprivileged, never raise it again: helpers once ran at niceness 10, and beside four busy processes
    on 2 cores a 1-epoch 64 px yolov5n run took 99 s against 21-27 s without, its end waiting on helpers that got a
    few percent of a core. The niceness bought nothing measurable: alone that run took 6.7-7.0 s either way, and
    yolov5n 320 for 2 epochs 15.2, 15.2, 14.4 s niced against 15.2, 15.2, 14.5 s not."""
    if parent is not None:
        parent.hold()
    # the trainer's stop handlers (utils/signals.py) only record a signal: a helper ends on SIGTERM (its parent's or
    # multiprocessing's exit handler ending it) and leaves Ctrl-C to the trainer, which then closes it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if warm_matplotlib:
        try:
            pyplot()  # matplotlib with the Agg backend, once
        except Exception:  # a missing matplotlib fails the drawings that need it, each with its warning
            pass
    while True:
        try:
            job = jobs.get()
        except (EOFError, OSError):  # the parent is gone
            break
        if job is None:
            break
        what, payload = job
        try:
            fn, args, kwargs = pickle.loads(payload)  # imports the drawing's module here if it is not yet
            fn(*args, **kwargs)
            answers.send((what, ""))
        except Exception as e:
            answers.send((what, str(e) or type(e).__name__))
    os._exit(0)  # no interpreter teardown: the helper owns nothing else


class _Helper:
    """One helper process. Jobs go through a queue whose feeder thread writes them to the pipe, so handing over a
    batch mosaic's 20 MB never blocks the caller while the helper is still drawing; answers come back on a pipe."""

    def __init__(self, warm_matplotlib=True):
        ctx = multiprocessing.get_context("fork")
        self.jobs = ctx.Queue()
        self.conn, child = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_serve, args=(self.jobs, child, warm_matplotlib, ParentLink()), daemon=True)
        self.process.start()
        child.close()
        self.pending = []  # what, in the order handed over
        self.early = False  # forked by fork_early, before the script's own definitions

    def queued_work(self):
        return sum(COSTS.get(what, 1.0) for what in self.pending)

    def send(self, what, fn, args, kwargs):
        payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)  # pickled here: a job that
        # cannot be pickled raises in the caller (in the queue's feeder thread it would be lost, and wait() would
        # never end); the name travels apart, so a drawing the helper cannot unpickle is still answered by name
        self.jobs.put((what, payload))

    def collect(self, block):
        """Answers received so far (all pending ones when block): [(what, error)]."""
        out = []
        while self.pending and (block or self.conn.poll()):
            answer = None
            if self.conn.poll(1.0):
                try:
                    answer = self.conn.recv()
                except (EOFError, OSError):  # the helper's end closed: it is gone
                    self.process.join(timeout=5)
            if answer is None:
                if self.process.is_alive():
                    continue  # still drawing
                out += [(w, f"its drawing process ended with status {self.process.exitcode}") for w in self.pending]
                self.pending.clear()  # died (killed, out of memory): what it had not drawn is lost
                break
            what, err = answer
            self.pending.remove(what)
            out.append((what, err))
        return out

    def close(self):
        try:
            self.jobs.put(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=1)
        if self.process.is_alive():  # a SIGTERM that came before it reset the trainer's handler was only recorded
            self.process.kill()
            self.process.join(timeout=1)
        self.jobs.close()
        self.jobs.join_thread()
        self.conn.close()


class PlotJobs:
    """Drawings handed to helper processes: submit(what, fn, *args, **kwargs) runs fn(*args, **kwargs) there, wait()
    blocks until all are written, close() ends the helpers (wait() first). warm_matplotlib=False: the helpers
    import matplotlib only for a drawing that needs it (a run that draws with OpenCV alone, as classification's
    trainer, then never spends the 2 x 0.4 s of CPU on it)."""

    def __init__(self, processes=None, warm_matplotlib=True):
        if processes is None:
            processes = hasattr(os, "fork") and PLOT_PROCESSES.get()
        self.processes = processes
        self.warm_matplotlib = warm_matplotlib
        self._helpers = []

    def start(self):
        """Start the helpers now if they are due and not started yet (those fork_early made, where it did). A caller
        about to grow its heap (a validation before its first batch) starts them while it is small: every page it
        writes after the fork stays a private copy in each helper (forked after the first batch at 640, the two held
        1.5 GB between them)."""
        if self.processes and not self._helpers:
            self._helpers = _take_early_helpers()
        if self.processes and not self._helpers:
            try:
                self._helpers = [_Helper(self.warm_matplotlib) for _ in range(HELPERS)]
            except OSError as e:  # no memory or process slots for helpers: draw here from now on
                LOGGER.debug(f"plots drawn inline ({e})")
                self.processes = False

    def submit(self, what, fn, *args, **kwargs):
        self.start()
        if not self.processes:
            return inline(what, fn, *args, **kwargs)
        self._report(h.collect(block=False) for h in self._helpers)
        helper = min(self._helpers, key=_Helper.queued_work)
        if not helper.process.is_alive():
            return inline(what, fn, *args, **kwargs)  # gone: draw it here
        if helper.early and getattr(fn, "__module__", None) == "__main__":
            return inline(what, fn, *args, **kwargs)  # forked before the script defined it: not to be found there
        try:
            helper.send(what, fn, args, kwargs)
        except (OSError, ValueError, TypeError, AttributeError) as e:  # not picklable: draw it here
            LOGGER.debug(f"{what} drawn inline ({e})")
            return inline(what, fn, *args, **kwargs)
        helper.pending.append(what)

    def wait(self):
        """Block until every drawing submitted so far is written (or has failed with its warning)."""
        self._report(h.collect(block=True) for h in self._helpers)

    def close(self):
        self.wait()
        for h in self._helpers:
            h.close()
        self._helpers = []

    @staticmethod
    def _report(answers):
        for batch in answers:
            for what, err in batch:
                if err:
                    LOGGER.warning(f"WARNING ⚠️ {what} not plotted: {err}")


# ----------------------------------------------------------------------------------------------------------------
# Helpers forked at a training script's start
_EARLY = []


def fork_early(argv):
    """A training script calls this first thing, before the framework is imported: the helpers are forked from a
    small process that holds no framework, and import matplotlib (about 0.5 s of CPU each) on the core the
    framework's import leaves idle instead of beside the first training steps. Forked later, each carried the
    trainer's pages: in a yolov5n 320 run their resident sizes were 260 and 330 MB, forked early 70 and 150 MB.
    Drawings reach them as pickled references to their functions, which import their modules there: those modules
    import no framework (a tensor argument would: callers hand numpy arrays). The first PlotJobs of the process
    takes them over; a run that draws nothing (--noplots,
    --evolve, a DDP rank other than 0, YOLO_PLOT_PROCESSES=0) gets none, and helpers nobody took end with the
    process. argv: the script's arguments (only --noplots and --evolve are looked for)."""
    flags = {a.split("=", 1)[0] for a in argv}
    rank = os.environ.get("RANK", os.environ.get("LOCAL_RANK", "-1"))
    if (_EARLY or not hasattr(os, "fork") or not PLOT_PROCESSES.get() or flags & {"--noplots", "--evolve"}
            or rank not in ("-1", "0")):
        return
    try:
        for _ in range(HELPERS):
            _EARLY.append(_Helper(warm_matplotlib=True))
            _EARLY[-1].early = True
    except OSError:  # no process slots: PlotJobs forks (or draws inline) later, as without this
        _discard_early_helpers()
    atexit.register(_kill_untaken_helpers)  # before multiprocessing's exit handler, which would wait for them


def _kill_untaken_helpers():
    """At exit, the early helpers no PlotJobs took (a run that failed before training): they hold nothing, and one
    still starting may not end on multiprocessing's SIGTERM (it has the trainer's handler until it resets it)."""
    for h in _EARLY:
        with contextlib.suppress(Exception):
            h.process.kill()
            h.process.join(timeout=2)
    _EARLY.clear()


def _take_early_helpers():
    """The early helpers that are still alive (each one at most once); the others are closed."""
    alive = [h for h in _EARLY if h.process.is_alive()]
    _discard_early_helpers(keep=alive)
    return alive


def _discard_early_helpers(keep=()):
    for h in _EARLY:
        if h not in keep:
            h.close()
    _EARLY.clear()
