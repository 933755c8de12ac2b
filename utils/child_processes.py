"""Child processes that end with their parent, however the parent ends.

A parent that exits normally ends its children itself (PlotJobs.close, multiprocessing's exit handlers). A parent
killed with SIGKILL -- the out-of-memory killer's signal -- runs nothing: a child blocked on a queue whose write end
it holds itself (the plot helpers) then sleeps for good, holding its share of memory. So every process the project
starts calls end_with_parent() first thing after fork:

- Linux: prctl(PR_SET_PDEATHSIG) asks the kernel to send the child a signal when the parent dies; then getppid()
  is compared with the parent's pid, because a parent that died between fork and prctl sends nothing.
- Elsewhere (no prctl), or when the child was forked by a thread other than the main one (the death signal follows
  the forking THREAD, which may end long before the process): a daemon thread in the child watches a pipe whose
  write end only the parent keeps (EOF when it is gone) and getppid() once a second, and ends the child.

No framework and no project imports: loader workers, plot helpers and anything forked later can use it.
"""
import ctypes
import os
import select
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1  # linux/prctl.h
POLL_S = 1.0  # the fallback's getppid() check interval

_pipe = None  # (owner pid, read fd, write fd): the fallback's lifeline, one per parent process


def _find_prctl():
    """libc's prctl, or None where there is none (not Linux, or a libc without it). Looked up once, at import: a
    child right after fork should do no more than call it (find_library would even start a subprocess)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # the process's own symbols: libc is among them
    except (OSError, AttributeError):
        return None


_PRCTL = _find_prctl()


def _prctl():
    return _PRCTL


def _set_parent_death_signal(sig):
    """True when the kernel will send sig to this process once its parent (thread) dies."""
    prctl = _prctl()
    if prctl is None:
        return False
    try:
        return prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, ctypes.ArgumentError):
        return False


class ParentLink:
    """Made in the parent just before it starts a child (so it knows the parent's pid and the forking thread);
    the child calls hold() first thing. Picklable fields only: it travels in a Process's arguments under fork."""

    def __init__(self):
        global _pipe
        self.parent_pid = os.getpid()
        self.main_thread = threading.current_thread() is threading.main_thread()
        self.read_fd = None
        if _prctl() is None or not self.main_thread:  # the fallback needs the pipe, made once per parent
            if _pipe is None or _pipe[0] != os.getpid():
                r, w = os.pipe()
                _pipe = (os.getpid(), r, w)  # never closed in the parent: its end closes when the parent is gone
            self.read_fd = _pipe[1]

    def hold(self, sig=signal.SIGKILL):
        """In the child: die with sig when the parent dies (now, if it already has)."""
        end_with_parent(self.parent_pid, sig, self.read_fd, use_prctl=self.main_thread)


def end_with_parent(parent_pid=None, sig=signal.SIGKILL, read_fd=None, use_prctl=True):
    """In a child, right after fork: the child is sent sig when parent_pid (default: the multiprocessing parent,
    else the current parent) ends. read_fd: the read end of a ParentLink pipe, watched where prctl cannot help."""
    if parent_pid is None:
        parent_pid = _multiprocessing_parent_pid() or os.getppid()
    _drop_inherited_write_end()
    if use_prctl and _set_parent_death_signal(sig):
        if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
            os.kill(os.getpid(), sig)
        return "prctl"
    threading.Thread(target=_watch_parent, args=(parent_pid, sig, read_fd), name="parent-watch", daemon=True).start()
    return "watch"


def _multiprocessing_parent_pid():
    try:
        import multiprocessing
        parent = multiprocessing.parent_process()
        return parent.pid if parent is not None else None
    except (ImportError, AttributeError):
        return None


def _drop_inherited_write_end():
    """A child must not keep the parent's pipe open: its copy of the write end would hide the parent's EOF from
    its siblings. (Only the write end: the read end is what this child watches.)"""
    global _pipe
    if _pipe is not None and _pipe[0] != os.getpid():
        try:
            os.close(_pipe[2])
        except OSError:
            pass
        _pipe = None


def _watch_parent(parent_pid, sig, read_fd):
    """The fallback: EOF on the parent's pipe, or a new parent pid (re-parented to init or a subreaper)."""
    while True:
        if os.getppid() != parent_pid:
            break
        if read_fd is None:
            threading.Event().wait(POLL_S)
            continue
        try:
            ready, _, _ = select.select([read_fd], [], [], POLL_S)
            if ready and not os.read(read_fd, 1):
                break  # EOF: every write end is closed, the parent's included
        except OSError:  # the fd is gone (closed by the child's own code): poll the pid only
            read_fd = None
    os.kill(os.getpid(), sig)
