"""Small helpers for tests that start processes (DDP jobs, watchdog ranks, benchmarks, fresh interpreters)."""
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The run header every entry script prints first, as official (utils/run_header.py): the arguments line, whose
# `<script>: ` prefix is blue (an error line's prefix is red: that one is never matched here), and the device line
# with one indented line per further GPU. Only these exact shapes are left out; any other line still counts.
RUN_HEADER = re.compile(r"\x1b\[34m\x1b\[1m[\w/]+: \x1b\[0m(\w+=.*)?|YOLOv5 🚀 .*|\s+CUDA:\d+ \(.*MiB\)")


def without_run_header(text):
    """text's lines (colours kept) other than the run header's: what a script said beyond its two header lines."""
    return [ln for ln in text.splitlines() if not RUN_HEADER.fullmatch(ln)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def dead_pid():
    """The pid of a process that has ended (a writer gone, for the stale temporary-file checks)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def run_benchmark(name, args, timeout=120):
    """benchmarks/<name>.py with args, from the project folder, quiet; the CompletedProcess (text output)."""
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def fresh_python(code, timeout=300):
    """`python -c code` in a new interpreter started in the project folder (what a module imports on its own, with
    nothing this process loaded already); the CompletedProcess (text output)."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
