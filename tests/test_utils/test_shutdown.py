"""utils/shutdown.py: an entry script's process leaves without the interpreter's teardown of its heap, and the exit
work it relies on still happens (atexit handlers, buffered stdout/stderr); a running non-daemon thread is waited for."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# a fresh interpreter's teardown is what is measured (the warm start's forks tear down a larger heap)
pytestmark = pytest.mark.fresh_python
SCRIPT = """
import atexit, sys, threading, time
sys.path.insert(0, {root!r})
from utils.shutdown import leave_quickly


class TornDown:  # freed only by the interpreter's teardown of the heap: its __del__ marks that it ran
    def __del__(self, _open=open):
        _open({flag!r}, "a").write("teardown\\n")


heap = [{{"i": i, "self": None}} for i in range(300_000)]  # a large live heap, as a framework leaves
for d in heap[::2]:
    d["self"] = d  # half of them in reference cycles
heap.append(TornDown())
atexit.register(lambda: open({flag!r}, "a").write("atexit\\n"))
if {thread}:
    threading.Thread(target=lambda: (time.sleep(0.5), open({flag!r}, "a").write("thread\\n"))).start()
sys.stdout.write("unflushed")
sys.stderr.write(str(time.time()))
if {quick}:
    leave_quickly()
"""


def _shutdown(tmp_path, quick, thread=False):
    flag = tmp_path / f"flag{quick}{thread}"
    code = SCRIPT.format(root=str(ROOT), flag=str(flag), quick=quick, thread=thread)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return flag.read_text().split(), p.stdout


def test_exit_skips_the_teardown_but_not_the_exit_work(tmp_path):
    """What the quick exit saves is the teardown of the heap (measured once: 1.2 against 2.1 CPU-s for 3 million
    objects, 0.9 s of it the teardown); asserted here is that it is skipped, not how long it takes."""
    ran_slow, out_slow = _shutdown(tmp_path, False)
    ran_fast, out_fast = _shutdown(tmp_path, True)
    assert ran_slow == ["atexit", "teardown"]  # the normal exit: exit work, then the heap's teardown
    assert ran_fast == ["atexit"] and out_fast == out_slow == "unflushed"  # skipped, and nothing else


def test_a_running_thread_is_waited_for(tmp_path):
    ran, out = _shutdown(tmp_path, True, thread=True)
    assert sorted(ran) == ["atexit", "teardown", "thread"] and out == "unflushed"  # the normal exit, after the thread


def test_a_profiled_run_keeps_the_normal_exit(tmp_path):
    """python -m cProfile -o FILE writes its file after the script: the quick exit steps aside."""
    script = tmp_path / "s.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom utils.shutdown import leave_quickly\n"
                      "print('done')\nleave_quickly()\n")
    out = tmp_path / "p.prof"
    p = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(script)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "done" in p.stdout, p.stderr
    assert out.is_file() and out.stat().st_size > 0
