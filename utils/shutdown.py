"""The end of an entry script's process (train.py, val.py, detect.py run as commands), made short.

With PyTorch loaded, the interpreter's shutdown spends 0.6-1.6 s tearing down modules and collecting the millions
of objects the framework and the run created (2-core machines: a 2-epoch yolov5n run took 1.4-1.7 s from the end of
main() to the process exit, 0.2 s without the teardown). Once main() has returned, everything the run writes is
closed (checkpoints, results.csv, plots, TensorBoard and log files), so the process does what the interpreter would
do first -- the atexit handlers (logging flushes and closes its handlers, multiprocessing stops the loader workers)
and flushing stdout and stderr -- and then leaves. Nothing is skipped when another non-daemon thread is still
running (the interpreter would wait for it) or when a profiler, tracer or debugger is attached (python -m cProfile
and coverage write their results after the script, debuggers may still be stepping).
Only for processes about to exit: run() from Python (tests, notebooks) never calls it.
"""
import atexit
import os
import sys
import threading


def leave_quickly(status=0):
    """Call as the last statement of an entry script's ``if __name__ == "__main__":`` block."""
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        return  # the normal exit waits for those threads
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return  # cProfile, coverage or a debugger: they finish their work after the script
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed or replaced streams: nothing left to write
            pass
    os._exit(status)
