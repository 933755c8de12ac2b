"""utils/backend/host_memory.py: on a CPU-only machine, importing the backend makes glibc keep freed memory, so a
large block allocated again is not faulted in page by page again; the user's own allocator choice wins."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.backend.host_memory import user_choice

ROOT = Path(__file__).resolve().parents[2]
FAULTS = """
import ctypes, resource
import utils.backend  # the import is what tunes malloc
libc = ctypes.CDLL(None)  # the C library's own malloc, as the framework's CPU allocator calls it
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
def faults_per_round():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        a = libc.malloc(64 << 20)  # 64 MiB: above glibc's largest mmap threshold
        ctypes.memset(a, 1, 64 << 20)  # touch every page
        libc.free(a)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5
faults_per_round()  # the first round may grow the heap
print(faults_per_round())
"""


def _faults(**extra):
    """Minor page faults per 64 MiB allocation in a fresh process that imported the backend (no GPU seen)."""
    mine = ("LD_PRELOAD", "GLIBC_TUNABLES", "YOLO_HOST_MALLOC")
    env = {k: v for k, v in os.environ.items() if k not in mine and not (k.startswith("MALLOC_") and k.endswith("_"))}
    env.update(CUDA_VISIBLE_DEVICES="", YOLO_QUIET="1", **extra)
    out = subprocess.run([sys.executable, "-c", FAULTS], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_freed_blocks_are_reused_without_page_faults():
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    tuned = _faults()
    default = _faults(YOLO_HOST_MALLOC="default")
    assert default > 0.9 * pages  # glibc's default: a fresh mmap each time, every page faulted in again
    assert tuned < 0.05 * pages  # kept: the same pages serve the next allocation


def test_user_choice_wins():
    assert user_choice({}) == ""
    assert user_choice({"PATH": "/bin", "MALLOC_ARENA_MAX": "2"}) == ""  # no trailing '_': not a threshold we set
    assert "YOLO_HOST_MALLOC" in user_choice({"YOLO_HOST_MALLOC": "default"})
    assert "jemalloc" in user_choice({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})
    assert "MALLOC_MMAP_THRESHOLD_" in user_choice({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert "GLIBC_TUNABLES" in user_choice({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
