"""Fault injection around the one write module (utils/atomic_files.py calls _before_write(path) before every file
or folder output it writes): run an entry script in a child process with its k-th write failing with ENOSPC, EROFS
or EIO, or killed with SIGKILL after a delay, and check what it leaves (tests/test_adversarial/test_fault_injection.py).

One run:    python -c "import tests.helpers.faults as f; f.install(3, errno.ENOSPC, 'writes.log'); f.run_script(
            'detect.py', [...])"
Many runs:  ForkServer(): a child process that imports the framework, OpenCV and the model code once and then forks
            one process per run (a fork costs milliseconds; a fresh interpreter spends seconds importing the
            framework before the script's first line: measured in test_fault_injection.py's report).

The count is shared by the script's own child processes (the plot helpers are forked from it, loader workers too):
a multiprocessing.Value made before the script runs, so "the k-th write" is the k-th call of _before_write in the
whole process tree. Each call is appended to the write log (one line "<n>\t<path>", O_APPEND, so the log survives
SIGKILL and os._exit) -- the counting run (k=0) gives the number of writes of a tiny run and their paths.
"""
import errno as errno_mod
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ERRNOS = (errno_mod.ENOSPC, errno_mod.EROFS, errno_mod.EIO)
ENTRY_SCRIPTS = ("train.py", "val.py", "detect.py", "export.py", "segment/train.py", "segment/val.py",
                 "segment/predict.py", "classify/train.py", "classify/val.py", "classify/predict.py")
TEMP_MARK = "yolo-partial"


def install(k, err=errno_mod.ENOSPC, log=None):
    """Make the k-th write of this process tree fail with OSError(err) (k=0: count only); log each write's path."""
    import multiprocessing

    import utils.atomic_files as af
    count = multiprocessing.Value("q", 0)  # shared memory: the forked plot helpers and workers count on it too
    t0 = time.monotonic()
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log else None

    def before_write(path):
        with count.get_lock():
            count.value += 1
            n = count.value
        if log_fd is not None:
            os.write(log_fd, f"{n}\t{time.monotonic() - t0:.3f}\t{path}\n".encode("utf-8", "surrogateescape"))
        if k and n == k:
            raise OSError(err, os.strerror(err), str(path))

    af._before_write = before_write
    return count


def read_log(log, with_times=False):
    """[(n, path)] of a write log, in the order the writes were announced ([(n, seconds since the start, path)]
    with_times)."""
    try:
        text = Path(log).read_text("utf-8", "surrogateescape")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        n, _, rest = line.partition("\t")
        t, _, path = rest.partition("\t")
        if n.isdigit() and path:
            out.append((int(n), float(t), path) if with_times else (int(n), path))
    return sorted(out)


def run_script(script, argv):
    """Run an entry script (relative to the project, or an absolute path) as `python script argv...` would, in this
    process; returns its exit status (the scripts leave with os._exit on success, which ends this process with it)."""
    path = ROOT / script
    sys.argv = [str(path), *map(str, argv)]
    sys.path[0:0] = [str(path.parent)] if str(path.parent) not in sys.path else []
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------------------ the fork server
HEAVY_IMPORTS = ("cv2", "numpy", "yaml", "utils.backend", "models.yolo", "models.common", "utils.atomic_files",
                 "utils.dataloaders", "utils.plots", "matplotlib.pyplot")


def _child(req):
    """In the forked child: the run's own working folder and output files, the fault, then the script."""
    os.setpgid(0, 0)  # its own process group: the server can end the helpers a killed run leaves
    for fd, name in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    os.chdir(req["cwd"])
    for k, v in req.get("env", {}).items():
        os.environ[k] = v
    _fresh_exit_handlers()
    install(req["k"], req["errno"], req["log"])
    try:
        status = run_script(req["script"], req["argv"])
    except BaseException:  # a traceback is what the test is looking for: print it as the interpreter would
        import traceback
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _fresh_exit_handlers():
    """The exit handlers the server's imports registered, minus the framework's: OneFlow's session shutdown crashes in
    a forked copy (SIGSEGV at exit, measured with classify/val.py and classify/train.py, which exit 0 when run
    directly). logging's and multiprocessing's are registered again; the script's own imports add theirs."""
    import atexit
    import logging
    import multiprocessing.util
    atexit._clear()
    atexit.register(logging.shutdown)
    atexit.register(multiprocessing.util._exit_function)


def _wait(pid, timeout):
    end = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            return None
        time.sleep(0.02)


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _serve_one(req):
    pid = os.fork()
    if pid == 0:
        _child(req)
    t0 = time.monotonic()
    killed, rc = False, None
    if req.get("kill_after") is not None:
        rc = _wait(pid, req["kill_after"])
        if rc is None:
            os.kill(pid, signal.SIGKILL)  # only the script's process, as the OOM killer does
            killed = True
    if rc is None:
        rc = _wait(pid, max(1.0, req["timeout"] - (time.monotonic() - t0)))
    if rc is None:
        os.killpg(pid, signal.SIGKILL)
        rc = _wait(pid, 10) or -9
        return {"rc": rc, "timed_out": True, "killed": killed, "lingering": False, "seconds": time.monotonic() - t0}
    lingering = False  # processes the script started that outlived it (plot helpers, loader workers)
    end = time.monotonic() + req.get("linger_s", 5.0)
    while _group_alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    if _group_alive(pid):
        lingering = True
        os.killpg(pid, signal.SIGKILL)
    return {"rc": rc, "timed_out": False, "killed": killed, "lingering": lingering, "seconds": time.monotonic() - t0}


def serve(imports=HEAVY_IMPORTS):
    """The fork server's loop: one JSON request a line on stdin, one JSON answer a line on stdout."""
    import importlib
    for name in imports:
        importlib.import_module(name)
    out = os.fdopen(os.dup(1), "w")
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = _serve_one(json.loads(line))
        except Exception:  # noqa: BLE001 (the test that asked is told, and the server goes on)
            import traceback
            answer = {"server_error": traceback.format_exc()}
        print(json.dumps(answer), file=out, flush=True)


class ForkServer:
    """A server process (this test process's interpreter and backend) that runs entry scripts in forked children."""

    def __init__(self, env=None, imports=HEAVY_IMPORTS):
        import subprocess
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_QUIET": "1", "OMP_NUM_THREADS": "1", **(env or {})}
        self.env.pop("_YOLO_BACKEND_ANNOUNCED", None)
        code = f"import tests.helpers.faults as f; f.serve({tuple(imports)!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code],
                                     cwd=ROOT, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        ready = self.proc.stdout.readline()
        if not ready.strip():
            raise RuntimeError(f"the fork server did not start (exit {self.proc.wait()})")

    def run(self, script, argv, folder, k=0, err=errno_mod.ENOSPC, kill_after=None, timeout=300, env=None):
        """Run script with argv in a forked child working in folder; returns a Run (rc, output, write log)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tag = f"{Path(script).stem}-{k}-{err}-{time.monotonic_ns()}"
        req = {"script": str(script), "argv": [str(a) for a in argv], "cwd": str(folder), "k": k, "errno": err,
               "kill_after": kill_after, "timeout": timeout, "env": env or {},
               "stdout": str(folder / f".{tag}.out"), "stderr": str(folder / f".{tag}.err"),
               "log": str(folder / f".{tag}.writes")}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the fork server died (exit {self.proc.wait()})")
        answer = json.loads(answer)
        if "server_error" in answer:
            raise RuntimeError(f"the fork server failed on {script}:\n{answer['server_error']}")
        return Run(req, answer)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait()


class Run:
    """What one run left: exit status, its output, the writes it announced (n, path)."""

    def __init__(self, req, answer):
        self.req, self.rc, self.killed = req, answer["rc"], answer["killed"]
        self.timed_out, self.lingering, self.seconds = answer["timed_out"], answer["lingering"], answer["seconds"]
        self.stdout, self.stderr = _read(req["stdout"]), _read(req["stderr"])  # '' when killed before opening them
        self.timed_writes = read_log(req["log"], with_times=True)
        self.writes = [(n, p) for n, _, p in self.timed_writes]
        for f in (req["stdout"], req["stderr"], req["log"]):
            Path(f).unlink(missing_ok=True)

    @property
    def failed_path(self):
        """The path whose write was made to fail (None when the run never reached its k-th write)."""
        k = self.req["k"]
        return next((p for n, p in self.writes if n == k), None) if k else None

    def error_lines(self):
        """The lines of the output that may report a failure, ANSI colours off: stderr's (the error that stops a run)
        and stdout's (the log, where a warning about an optional output goes, as in the official scripts)."""
        import re
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", x).strip() for x in (self.stderr + "\n" + self.stdout).splitlines()]
        return [x for x in lines if x]

    def describe(self):
        return (f"{self.req['script']} k={self.req['k']} errno={errno_mod.errorcode.get(self.req['errno'])} "
                f"kill_after={self.req['kill_after']} rc={self.rc} failed write={self.failed_path}\n"
                f"--- stderr (last 2000 chars) ---\n{self.stderr[-2000:]}")


def _read(f):
    try:
        return Path(f).read_text("utf-8", "replace")
    except FileNotFoundError:
        return ""


# ------------------------------------------------------------------------------------------------------- checks
_DIGESTS = {}  # (path, size, mtime_ns, inode) -> sha256: a file left as it was is not read again


def file_digests(*folders, skip_prefix="."):
    """{path: sha256} of every file under the folders (our own .<tag>.* run files left out); a file whose size,
    modification time and inode are unchanged since it was last hashed is not read again."""
    import hashlib
    out = {}
    for folder in folders:
        for p in Path(folder).rglob("*"):
            if p.name.startswith(skip_prefix) or not p.is_file():
                continue
            st = p.stat()
            key = (str(p), st.st_size, st.st_mtime_ns, st.st_ino)
            if key not in _DIGESTS:
                _DIGESTS[key] = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p)] = _DIGESTS[key]
    return out


def temp_files(*folders):
    return sorted(str(p) for folder in folders for p in Path(folder).rglob(f"*{TEMP_MARK}*"))


def incomplete_reason(path):
    """Why the file under a final name is not a whole output ('' when it is, or when its kind is not checked)."""
    p = Path(path)
    suffix = p.suffix.lower()
    try:
        if p.is_dir():
            return ""
        size = p.stat().st_size
        if suffix in (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"):
            import cv2
            import numpy as np
            if size == 0 or cv2.imdecode(np.fromfile(str(p), np.uint8), cv2.IMREAD_UNCHANGED) is None:
                return f"an image that does not decode ({size} bytes)"
        elif suffix == ".csv":
            rows = [r for r in p.read_text().splitlines() if r.strip()]
            widths = {len(r.split(",")) for r in rows}
            if not rows or len(widths) > 1:
                return f"a CSV with rows of {sorted(widths)} fields"
        elif suffix in (".pt", ".zip", ".cache") and size:
            import zipfile
            with open(p, "rb") as f:
                magic = f.read(4)
            if magic == b"PK\x03\x04":
                with zipfile.ZipFile(p) as z:
                    bad = z.testzip()
                if bad:
                    return f"a zip with a damaged member {bad}"
        elif suffix in (".yaml", ".yml"):
            import yaml
            yaml.safe_load(p.read_text())
        elif suffix == ".json":
            json.loads(p.read_text())
        elif suffix == ".txt" and p.parent.name == "labels":
            for i, row in enumerate(p.read_text().splitlines(), 1):
                parts = row.split()
                if parts and (len(parts) < 5 or any(not _is_number(x) for x in parts)):
                    return f"a label row {i} cut short: {row!r}"
        elif size == 0 and suffix in (".pt", ".onnx", ".torchscript", ".xml", ".bin"):
            return "an empty model file"
    except Exception as e:  # noqa: BLE001 (any failure to read it back is the finding)
        return f"unreadable: {type(e).__name__}: {e}"
    return ""


def _is_number(x):
    try:
        float(x)
        return True
    except ValueError:
        return False
