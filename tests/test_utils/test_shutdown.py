"""utils/shutdown.py: an entry script's process leaves without the interpreter's teardown of its heap, and the exit
work it relies on still happens (atexit handlers, buffered stdout/stderr); a running non-daemon thread is waited for."""
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import atexit, sys, threading, time
sys.path.insert(0, {root!r})
from utils.shutdown import leave_quickly
heap = [{{"i": i, "self": None}} for i in range(3_000_000)]  # a large live heap, as a framework leaves
for d in heap[::2]:
    d["self"] = d  # half of them in reference cycles
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
    end = time.time()
    assert p.returncode == 0, p.stderr
    return end - float(p.stderr.split()[-1]), flag.read_text().split(), p.stdout


def test_exit_skips_the_teardown_but_not_the_exit_work(tmp_path):
    slow, ran_slow, out_slow = _shutdown(tmp_path, False)
    fast, ran_fast, out_fast = _shutdown(tmp_path, True)
    assert ran_fast == ran_slow == ["atexit"] and out_fast == out_slow == "unflushed"
    assert fast < 0.6 * slow, (fast, slow)


def test_a_running_thread_is_waited_for(tmp_path):
    _, ran, out = _shutdown(tmp_path, True, thread=True)
    assert sorted(ran) == ["atexit", "thread"] and out == "unflushed"


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
