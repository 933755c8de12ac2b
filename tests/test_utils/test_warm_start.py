"""The suite's warm start (tests/helpers/zygote.py): a process started through the launcher must look, to the test that
started it, like a fresh `python`: its arguments, folder, environment, sys.path, descriptors, standard streams, exit
status, death by signal, signal delivery and death with its launcher."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import zygote
from tests.helpers.process_helpers import alive
from utils.backend import BACKEND

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the warm start serves the suites on Linux")


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    from tests.conftest import REAL_PYTHON
    if BACKEND != "torch":
        pytest.skip("the PyTorch server's fidelity (its processes are the same Python code under either backend)")
    server, path = zygote.start(REAL_PYTHON, str(tmp_path_factory.mktemp("zygote")))
    assert server is not None, path
    yield path
    zygote.stop(server)


def _run(launcher, args, **kw):
    return subprocess.run([launcher, *args], capture_output=True, text=True, timeout=120, **kw)


def test_arguments_folder_environment_and_exit_status(launcher, tmp_path):
    code = ("import os, sys, torch; print(sys.argv, os.getcwd(), os.environ.get('X'), 'HOME' in os.environ, "
            "torch.get_num_threads()); sys.exit(3)")
    r = _run(launcher, ["-c", code, "a"], cwd=tmp_path, env={"X": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin"})
    assert r.returncode == 3 and r.stdout == f"['-c', 'a'] {tmp_path} 1 False 1\n", r.stderr


def test_a_script_runs_as_main_with_its_folder_first_and_a_traceback_of_its_own(launcher, tmp_path):
    (tmp_path / "s.py").write_text("import atexit, sys\nprint(__name__, __file__, sys.argv, sys.path[:2])\n"
                                   "atexit.register(print, 'atexit')\nraise ValueError('boom')\n")
    r = _run(launcher, ["s.py", "x"], cwd=tmp_path, env={"PYTHONPATH": "/p"})
    assert r.returncode == 1
    assert r.stdout == f"__main__ {tmp_path / 's.py'} ['s.py', 'x'] ['{tmp_path}', '/p']\natexit\n"
    assert r.stderr.splitlines()[1] == f'  File "{tmp_path / "s.py"}", line 4, in <module>', r.stderr
    assert "zygote" not in r.stderr and "runpy" not in r.stderr


def test_the_interpreter_exit_runs_threads_atexit_and_the_teardown(launcher, tmp_path):
    """What a script leaves to the interpreter's exit happens: a non-daemon thread is waited for, atexit handlers
    run, and a file left open with buffered data is flushed when the teardown closes it."""
    code = ("import atexit, threading, time\nleft_open = open('buffered.txt', 'w')\nleft_open.write('flushed')\n"
            "atexit.register(lambda: open('atexit.txt', 'w').write('ran'))\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), open('thread.txt', 'w').write('waited'))).start()\n")
    r = _run(launcher, ["-c", code], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(tmp_path / f).read_text() for f in ("buffered.txt", "atexit.txt", "thread.txt")] == [
        "flushed", "ran", "waited"]


def test_modules_and_standard_input(launcher):
    assert _run(launcher, ["-m", "json.tool"], input='{"a": 1}').stdout == '{\n    "a": 1\n}\n'
    assert _run(launcher, ["-c", "import sys; print(sys.stdin.read()[::-1])"], input="abc").stdout == "cba\n"


def test_death_by_signal_and_keyboard_interrupt_are_relayed(launcher):
    assert _run(launcher, ["-c", "import os; os.kill(os.getpid(), 9)"]).returncode == -9
    r = _run(launcher, ["-c", "raise KeyboardInterrupt"])
    assert r.returncode == -signal.SIGINT and r.stderr.endswith("KeyboardInterrupt\n")


def test_signals_reach_the_process_and_it_dies_with_its_launcher(launcher, tmp_path):
    code = ("import os, signal, sys, time\nopen('pid', 'w').write(str(os.getpid()))\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\nprint('up', flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([launcher, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "up\n"
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 7
    p = subprocess.Popen([launcher, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "up\n"
    run_pid = int((tmp_path / "pid").read_text())
    assert run_pid != p.pid  # the run process is the server's fork, not the launcher itself
    p.kill()
    p.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(run_pid):
        time.sleep(0.05)
    assert not alive(run_pid)


def test_a_signal_before_the_server_names_the_run_process_still_reaches_it(tmp_path):
    """The window the suite's load opens by chance, held open on purpose: a stand-in server starts the run process
    and answers with its pid only after the test has signalled the launcher. The signal must reach it anyway."""
    import socket
    import threading
    from tests.conftest import REAL_PYTHON
    address = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(1)
    path = zygote.write_launcher(str(tmp_path), REAL_PYTHON, address, os.getsid(0))
    child_code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
                  "print('up', flush=True)\ntime.sleep(60)\n")
    request_in, may_answer, seen = threading.Event(), threading.Event(), {}

    def stand_in_server():
        conn, _ = listener.accept()
        with conn:
            _, fds = zygote._receive_message(conn)  # the launcher relays signals from here on
            for fd in fds:
                os.close(fd)
            child = subprocess.Popen([REAL_PYTHON, "-c", child_code], stdout=subprocess.PIPE, text=True)
            seen["up"] = child.stdout.readline()
            request_in.set()
            may_answer.wait(30)
            zygote._send_message(conn, {"pid": child.pid})
            try:
                seen["code"] = child.wait(20)
            except subprocess.TimeoutExpired:
                child.kill()
                seen["code"] = "still running 20 s after the signal"
            zygote._send_message(conn, {"code": child.wait()})

    server = threading.Thread(target=stand_in_server, daemon=True)
    server.start()
    p = subprocess.Popen([path, "-c", "pass"], stdout=subprocess.DEVNULL)
    try:
        assert request_in.wait(60) and seen["up"] == "up\n"
        p.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the launcher has taken the signal before it learns whom it is for
        may_answer.set()
        server.join(60)
        assert seen["code"] == 7
        assert p.wait(30) == 7
    finally:
        may_answer.set()
        if p.poll() is None:
            p.kill()
        listener.close()


def test_inherited_descriptors_are_handed_over(launcher):
    r, w = os.pipe()
    p = subprocess.Popen([launcher, "-c", f"import os; os.write({w}, b'through fd {w}')"], pass_fds=[w])
    assert p.wait(60) == 0
    os.close(w)
    assert os.read(r, 100) == f"through fd {w}".encode()
    os.close(r)


@pytest.mark.parametrize("args, env, kw", [
    (["-I", "-c", "import sys; print(sys.flags.isolated)"], {}, {}),  # an option it does not reproduce
    (["-c", "import os; print(os.getpid() == os.getsid(0))"], {}, {"start_new_session": True}),
    (["-c", "print('off')"], {"YOLO_TEST_ZYGOTE": "off"}, {}),
])
def test_what_it_cannot_reproduce_runs_the_real_interpreter(launcher, args, env, kw):
    code = "import os; print(os.getppid())"
    p = subprocess.run([launcher, *args[:-1], args[-1] + "; " + code], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=120, **kw)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == str(os.getpid())  # exec'd in place: the test's own child, no server between


@pytest.mark.skipif(BACKEND != "oneflow", reason="the OneFlow suite's server")
def test_oneflow_processes_import_it_after_the_fork_with_the_libraries_preloaded(tmp_path):
    """The OneFlow suite's server holds no framework (OneFlow's runtime threads must start in the process that uses
    them); its processes find the preloaded libraries imported and import OneFlow themselves, and it works."""
    from tests.conftest import REAL_PYTHON
    server, path = zygote.start(REAL_PYTHON, str(tmp_path), framework="none")
    assert server is not None, path
    try:
        code = ("import sys; before = [m in sys.modules for m in ('oneflow', 'torch', 'matplotlib.pyplot', 'cv2')]; "
                "import oneflow; print(before, float(oneflow.ones(2, 3).sum()))")
        r = _run(path, ["-c", code], cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.strip() == "[False, False, True, True] 6.0", r.stdout + r.stderr
    finally:
        zygote.stop(server)
