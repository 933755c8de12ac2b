"""A warm start for the suite's Python processes: one server process imports PyTorch once (about 3 CPU-seconds per
process on a 2-core machine, the largest part of most script tests), and OpenCV, pandas and matplotlib (PRELOADED),
and every `python ...` the tests start forks from it instead of starting afresh.

The tests keep starting processes as they always did (`subprocess.run([sys.executable, "train.py", ...])`, docs blocks
calling `python`): the suite points `sys.executable` (and the `python` on the docs blocks' PATH) at a small launcher
script. The launcher is a real process with the pid the test sees. It hands the server its argument list, folder,
environment, umask, resource limits and every open file descriptor (SCM_RIGHTS), the server forks a run process that
takes them over and runs the script exactly as `python` would (the script's folder first on sys.path, PYTHONPATH,
`-c`, `-m`, `-u`, atexit handlers, exit status, death by signal), and the launcher relays the outcome:
- the exit status, or death by the same signal;
- signals sent to the launcher (SIGINT, SIGTERM, ...) are forwarded to the run process;
- the run process kills itself when the launcher dies (SIGKILL included), as a killed `python` would be gone.
Whatever the launcher cannot reproduce runs the real interpreter instead (exec, same pid): interpreter options other
than -u/-B, a launcher in a session of its own (a test that signals a process group), PYTHONHASHSEED,
multiprocessing's spawn children, or YOLO_TEST_ZYGOTE=off in the environment. The OneFlow suite's server imports
no framework (OneFlow starts its runtime threads at import, and a process forked after that is not safe): its
processes still skip the PRELOADED libraries' imports, and import OneFlow themselves, after the fork.

Stdlib only at the top: the launcher runs with `python -SE` and must start in milliseconds."""
import json
import os
import signal
import socket
import struct
import sys

_MAX_FDS = 200
_FORWARDED = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                          signal.SIGUSR2, signal.SIGALRM, signal.SIGCONT, signal.SIGWINCH)]
_LIMITS = [n for n in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_NPROC",
                       "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_RSS", "RLIMIT_MEMLOCK")]


# ------------------------------------------------------------------------------------------------ wire format
def _send_message(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    header = struct.pack("!I", len(data))
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
    sock.sendmsg([header + data], ancillary)


def _receive_message(sock):
    """(object, [received fds]); the fds arrive with the first bytes of the message."""
    fds = []
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack("!I", buf[:4])[0]:
        data, ancdata, _, _ = sock.recvmsg(1 << 16, socket.CMSG_SPACE(_MAX_FDS * 4))
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(struct.unpack(f"{len(payload) // 4}i", payload[: len(payload) // 4 * 4]))
        if not data:
            raise ConnectionError("the other side closed the connection")
        buf += data
    size = struct.unpack("!I", buf[:4])[0]
    return json.loads(buf[4:4 + size]), fds


# ------------------------------------------------------------------------------------------------ the launcher
def _plain_invocation(argv):
    """(mode, target, rest, unbuffered) for `python [-u] [-B] (script | -c code | -m module) args...`, or None when
    the command line asks for anything else (then the real interpreter runs it)."""
    unbuffered, i = False, 0
    while i < len(argv) and argv[i] in ("-u", "-B"):
        unbuffered |= argv[i] == "-u"
        i += 1
    if i >= len(argv):
        return None
    head = argv[i]
    if head in ("-c", "-m"):
        if i + 1 >= len(argv):
            return None
        return head[1], argv[i + 1], argv[i + 2:], unbuffered
    if head.startswith("-") or head == "":
        return None
    return "s", head, argv[i + 1:], unbuffered


def _open_fds(exclude):
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in exclude:
            continue
        try:
            os.fstat(fd)
        except OSError:  # the listing's own descriptor, gone already
            continue
        fds.append(fd)
    return sorted(fds)


def _use_real_interpreter(real, argv):
    os.execv(real, [real, *argv])


def launcher_main(real, address, session):
    """The launcher's body; `session` is the server's session id (a launcher in another one runs `real` itself)."""
    argv = sys.argv[1:]
    plain = _plain_invocation(argv)
    env = dict(os.environ)
    off = env.get("YOLO_TEST_ZYGOTE", "on").strip().lower() == "off"
    if (plain is None or off or "PYTHONHASHSEED" in env or "--multiprocessing-fork" in argv
            or os.getsid(0) != session):
        _use_real_interpreter(real, argv)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        _use_real_interpreter(real, argv)
    fds = _open_fds({sock.fileno()})
    if len(fds) > _MAX_FDS:
        sock.close()
        _use_real_interpreter(real, argv)
    import resource
    limits = {n: list(resource.getrlimit(getattr(resource, n))) for n in _LIMITS if hasattr(resource, n)}
    mode, target, rest, unbuffered = plain
    mask = os.umask(0)
    os.umask(mask)
    request = {"mode": mode, "target": target, "args": rest, "unbuffered": unbuffered, "cwd": os.getcwd(),
               "env": env, "umask": mask, "limits": limits, "fds": fds, "launcher": os.getpid()}
    # Relaying starts before the request goes out: the run process may be running (and the test may signal this
    # launcher) before the server's reply names it. A signal from that window is held and delivered on the reply.
    run = {"pid": None, "held": []}

    def forward(signum, _frame):
        if run["pid"] is None:
            run["held"].append(signum)
            return
        try:
            os.kill(run["pid"], signum)
        except ProcessLookupError:
            pass

    for s in _FORWARDED:
        signal.signal(s, forward)
    _send_message(sock, request, fds)
    reply, _ = _receive_message(sock)
    run["pid"] = reply["pid"]
    while run["held"]:
        forward(run["held"].pop(0), None)
    outcome, _ = _receive_message(sock)
    if outcome.get("signal"):
        sig = outcome["signal"]
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(outcome["code"])


def write_launcher(folder, real, address, session, names=("python", "python3")):
    """A `bin/` folder under `folder`: launchers named `names` and links to every other entry of the real
    interpreter's folder (pip, mkdocs, ... stay reachable for a PATH that puts this folder first). Returns the path of
    the first launcher."""
    real = os.path.abspath(real)
    here = os.path.dirname(os.path.abspath(__file__))
    project = os.path.dirname(os.path.dirname(here))
    bin_dir = os.path.join(folder, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    venv_bin = os.path.dirname(real)
    for entry in os.listdir(venv_bin):
        if entry not in names and not entry.startswith("python"):
            link = os.path.join(bin_dir, entry)
            if not os.path.lexists(link):
                os.symlink(os.path.join(venv_bin, entry), link)
    text = (f"#!{real} -SE\n# The suite's warm-start launcher (tests/helpers/zygote.py); not part of the project.\n"
            f"import sys\nsys.path.insert(0, {project!r})\n"
            f"from tests.helpers.zygote import launcher_main\nlauncher_main({real!r}, {address!r}, {session!r})\n")
    for n in names:
        path = os.path.join(bin_dir, n)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    return os.path.join(bin_dir, names[0])


# ------------------------------------------------------------------------------------------------ the run process
def _take_fds(wanted, received):
    """Make each received descriptor the number it had in the launcher; close every other one."""
    import fcntl
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 1024) for fd in received]
    keep = set(high)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    for target, fd in zip(wanted, high):
        os.dup2(fd, target, inheritable=True)
    for fd in high:
        os.close(fd)


def _die_with_launcher(launcher):
    """The launcher stands for this process in the test's eyes: when it is gone (killed, even by SIGKILL), so is this
    one. A daemon thread waits on its pidfd."""
    import select
    import threading
    try:
        pidfd = os.pidfd_open(launcher)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
        return

    def watch():
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll()
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="zygote-launcher-watch", daemon=True).start()


def _fresh_streams(env, unbuffered):
    import io
    unbuffered = unbuffered or bool(env.get("PYTHONUNBUFFERED"))
    encoding = (env.get("PYTHONIOENCODING") or "").split(":")[0] or "utf-8"

    def stream(fd, mode, errors):
        try:
            os.fstat(fd)
        except OSError:
            return None
        raw = io.FileIO(fd, mode, closefd=False)
        tty = raw.isatty()
        if mode == "r":
            return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding, errors=errors, line_buffering=tty)
        buffered = io.BufferedWriter(raw)
        return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, line_buffering=tty or (fd == 2),
                                write_through=unbuffered or fd == 2)

    sys.stdin = sys.__stdin__ = stream(0, "r", "strict")
    sys.stdout = sys.__stdout__ = stream(1, "w", "strict")
    sys.stderr = sys.__stderr__ = stream(2, "w", "backslashreplace")


def _reset_signals():
    signal.set_wakeup_fd(-1)
    for s in range(1, signal.NSIG):
        if s in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python's start-up leaves them
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _print_exception(exc):
    """The traceback as `python` prints it: from the script's first frame, without this module's and runpy's."""
    import traceback
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, os.path.abspath(__file__))
                              or tb.tb_frame.f_code.co_filename.endswith(("runpy.py", "<frozen runpy>"))):
        tb = tb.tb_next
    if sys.excepthook is sys.__excepthook__:
        traceback.print_exception(type(exc), exc, tb)
    else:
        sys.excepthook(type(exc), exc, tb)


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run(request, base_path, default_threads, real):
    import random
    import runpy
    import warnings
    env = request["env"]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    import resource
    for name, (soft, hard) in request["limits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass
    mode, target = request["mode"], request["target"]
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    first = {"s": os.path.dirname(os.path.abspath(target)), "c": "", "m": os.getcwd()}[mode]
    sys.path[:] = [first, *extra, *base_path]
    sys.argv = [target if mode == "s" else "-c" if mode == "c" else target, *request["args"]]
    sys.executable = real
    random.seed()
    import numpy as np
    np.random.seed()
    if "torch" in sys.modules:  # imported by the server: its thread count is the one a fresh process would take
        import torch
        threads = env.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else default_threads)
    if env.get("PYTHONWARNINGS"):  # the server started without it: its filters are the start-up ones
        warnings._processoptions(env["PYTHONWARNINGS"].split(","))
    code = 0
    try:
        if mode == "s" and os.path.isfile(target):
            _run_as_main(os.path.abspath(target))  # __file__ absolute as since Python 3.9; sys.argv[0] as given
        elif mode == "s":  # a folder or zip file with a __main__.py
            runpy.run_path(target, run_name="__main__")
        elif mode == "m":
            runpy._run_module_as_main(target, alter_argv=True)
        else:
            _run_as_main("<string>", target)
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt as e:
        _print_exception(e)
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException as e:
        _print_exception(e)
        code = 1
    return code


def _run_as_main(filename, source=None):
    import io
    import types
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=__builtins__, __spec__=None, __package__=None, __loader__=None)
    if source is None:
        main.__file__, main.__cached__ = filename, None
        with io.open_code(filename) as f:
            source = f.read()
    sys.modules["__main__"] = main
    exec(compile(source, filename, "exec"), main.__dict__)


def _finish(code=0):
    for s in (sys.stdout, sys.stderr):
        try:
            if s is not None:
                s.flush()
        except (OSError, ValueError):
            code = code or 120
    return code


def _become(request, received, base_path, default_threads, real, server_objects=()):
    """In the forked run process: take over the launcher's descriptors and state, run, and leave as `python` does:
    SystemExit rises out of the server's loop, so the interpreter's own exit runs (waiting for threads, atexit
    handlers, flushing the streams, the teardown that closes what the script left open). Never returns."""
    try:
        _reset_signals()
        for obj in server_objects:  # closed as objects, so that none closes a reused descriptor number later
            obj.close()
        _take_fds(request["fds"], received)
        _die_with_launcher(request["launcher"])
        _fresh_streams(request["env"], request["unbuffered"])
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    raise SystemExit(_run(request, base_path, default_threads, real))


# ------------------------------------------------------------------------------------------------ the server
# Besides PyTorch, the libraries nearly every script process imports, each a second or so of CPU per process (a
# tiny train.py run imported matplotlib.pyplot in each of its two plot helpers and pandas in the run: 2.6 of its 13
# CPU-seconds). Imported as the project imports them (matplotlib with its Agg backend: utils/plots.py), and none
# starts a thread. A test that checks what a fresh interpreter has imported runs with YOLO_TEST_ZYGOTE=off.
PRELOADED = ("cv2", "pandas", "matplotlib.pyplot")


def _preload():
    import importlib
    for name in PRELOADED:
        try:
            if name == "matplotlib.pyplot":
                import matplotlib
                matplotlib.use("Agg")  # plotting-backend choice: as utils/plots.py's pyplot(), before pyplot loads
            importlib.import_module(name)
        except Exception:  # a missing library is imported (and reported) by the script that needs it
            pass


def serve(address, real, framework="torch"):
    """Import PyTorch (framework "torch"; "none": no framework, OneFlow's suite, whose runtime threads must start
    after the fork) and the PRELOADED libraries, then fork one run process per launcher connection and report how
    it ended."""
    import ctypes
    import selectors
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: gone with the suite that started it
    import numpy  # noqa: F401  (imported before the fork, with the framework)
    if framework == "torch":
        import torch  # noqa: F401
    _preload()
    default_threads = len(os.sched_getaffinity(0))  # torch's own default without OMP_NUM_THREADS
    base_path = sys.path[1:]  # without this file's folder; the server starts without PYTHONPATH
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w.fileno())
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    running = {}  # pid -> the launcher's connection
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, received = _receive_message(conn)
                except (OSError, ValueError, ConnectionError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    _become(request, received, base_path, default_threads, real,
                            (selector, listener, wake_r, wake_w, conn, *running.values()))
                for fd in received:
                    os.close(fd)
                running[pid] = conn
                try:
                    _send_message(conn, {"pid": pid})
                except OSError:
                    pass
            else:
                try:
                    wake_r.recv(4096)
                except BlockingIOError:
                    pass
                _reap(running)


def _reap(running):
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = running.pop(pid, None)
        if conn is None:
            continue
        outcome = ({"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status)
                   else {"code": os.waitstatus_to_exitcode(status)})
        try:
            _send_message(conn, outcome)
        except OSError:
            pass
        conn.close()


# ------------------------------------------------------------------------------------------------ the suite's side
def start(real, folder, ready_limit_s=120, framework="torch"):
    """Start a server for the interpreter `real` in `folder`, with `framework` ("torch" or "none") imported;
    returns (server process, launcher path), or (None, reason) when it cannot start (the suite then starts real
    interpreters, as before)."""
    import subprocess
    if not hasattr(os, "pidfd_open"):
        return None, "os.pidfd_open is missing (Linux 5.3 and Python 3.9 needed)"
    address = os.path.join(folder, "zygote.sock")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS", "PYTHONHASHSEED")}
    proc = subprocess.Popen([real, os.path.abspath(__file__), address, real, framework], cwd=folder, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    import select
    ready, _, _ = select.select([proc.stdout], [], [], ready_limit_s)
    if not ready or proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        return None, f"the server did not start within {ready_limit_s} s"
    return proc, write_launcher(folder, real, address, os.getsid(0))


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except Exception:
        proc.kill()


if __name__ == "__main__":
    serve(*sys.argv[1:4])
