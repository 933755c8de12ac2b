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

Programs the project runs (pnnx) get the same through child_preexec(), the preexec_fn of their subprocess call: the
death signal set before exec stays with the program. But a program's own children do not inherit it: a shell script
killed so leaves the command it was running (a download's curl) behind, so run_ending_with_parent() runs such a
program under a small guard process that gets the signal and ends the program's whole process tree first.

No framework and no project imports: loader workers, plot helpers and anything forked later can use it.
"""
import ctypes
import os
import select
import signal
import subprocess
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
# The main thread's id in the process that imported this module (before any fork): a forked child's one thread keeps
# the id of the thread that forked it, so a child can tell whether the parent's main thread forked it
_MAIN_THREAD_IDENT = threading.main_thread().ident


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


def forked_by_main_thread():
    """In a child just forked: whether the parent's main thread forked it. Only then may the death signal be used
    for a child that outlives the call that started it: the signal follows the forking THREAD (a DataLoader iterated
    in a helper thread forks its workers there)."""
    return threading.get_ident() == _MAIN_THREAD_IDENT


def end_with_parent(parent_pid=None, sig=signal.SIGKILL, read_fd=None, use_prctl=None):
    """In a child, right after fork: the child is sent sig when parent_pid (default: the multiprocessing parent,
    else the current parent) ends. read_fd: the read end of a ParentLink pipe, watched where prctl cannot help.
    use_prctl: None decides by forked_by_main_thread() (a DataLoader worker's init calls it so)."""
    if parent_pid is None:
        parent_pid = _multiprocessing_parent_pid() or os.getppid()
    if use_prctl is None:
        use_prctl = forked_by_main_thread()
    _drop_inherited_write_end()
    if use_prctl and _set_parent_death_signal(sig):
        if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
            os.kill(os.getpid(), sig)
        return "prctl"
    threading.Thread(target=_watch_parent, args=(parent_pid, sig, read_fd), name="parent-watch", daemon=True).start()
    return "watch"


def child_preexec(sig=signal.SIGKILL):
    """The preexec_fn for subprocess.run/Popen of a program nobody should outlive: in the child, between fork and
    exec, it asks for sig at the parent's death (kept across exec), and ends the child at once when the parent died
    before that. Made in the parent (it records the parent's pid). For subprocess.run from any thread (the forking
    thread waits for the child, so it cannot end first); a Popen kept past the call should be made in the main
    thread. None where there is no prctl: nothing set in the child survives exec there."""
    if _prctl() is None:
        return None
    parent_pid = os.getpid()

    def preexec():  # between fork and exec: no locks, no imports, no threads
        if _set_parent_death_signal(sig) and os.getppid() != parent_pid:
            os.kill(os.getpid(), sig)

    return preexec


# The guard of run_ending_with_parent, run as `python -c _GUARD <program> <args...>`: it runs the program (in its
# parent's process group, so the terminal's Ctrl-C reaches the program as before) and passes its exit status on; on
# SIGTERM -- the death signal child_preexec sets for it -- it kills the program's whole process tree (collected
# first: a process killed first would hand its children to init, out of reach), then exits. Ctrl-C is left to the
# program: the guard waits on.
_GUARD = r'''
import os, signal, subprocess, sys

def tree(root):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found

def end(signum, frame):
    for pid in tree(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)

signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, lambda *a: None)  # a handler, not SIG_IGN: the program gets the default back at exec
rc = subprocess.call(sys.argv[1:])
sys.exit(128 - rc if rc < 0 else rc)
'''


def run_ending_with_parent(args, check=False, **kwargs):
    """subprocess.run(args, **kwargs) for a program that may start programs of its own (a shell script): the program
    and every process it started end when this process ends, however it ends (Linux; elsewhere a plain run). The
    result's args are the program's, so a CalledProcessError names it, not the guard."""
    args = list(args)
    guarded = _prctl() is not None and os.path.isdir("/proc")
    cmd = [sys.executable, "-c", _GUARD, *args] if guarded else args
    p = subprocess.run(cmd, preexec_fn=child_preexec(signal.SIGTERM), **kwargs)
    p.args = args
    if check:
        p.check_returncode()
    return p


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
