"""Shared fixtures. The suite runs once per backend (YOLO_BACKEND=torch in .venv-torch, YOLO_BACKEND=oneflow in
.venv-oneflow); cross-backend tests run a snippet under the other one through `other_python`."""
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_QUIET", "1")
# Hypothesis keeps caches (constants, unicode tables) in ./.hypothesis by default: in the temporary folder instead, so
# that the property tests write nothing into the project (read when first needed, so setting it here is in time).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), f"hypothesis-{os.getuid()}"))
# Without an NVIDIA GPU, Triton kernels (utils/backend/torch_ciou_triton.py) run in Triton's interpreter so that their
# maths is still tested; it must be set before triton is first imported.
if not (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
    os.environ.setdefault("TRITON_INTERPRET", "1")

SHARED = Path(os.environ.get("YOLO_SHARED_DIR", ROOT.parent / "shared"))


# ------------------------------------------------------------------------------------------------ warm start
# Most script tests spend their time importing PyTorch (about 3 CPU-seconds a process on 2 cores), matplotlib, pandas
# and OpenCV. `sys.executable` (and `python` on the docs blocks' PATH) is a launcher whose processes fork from one
# server that imported them once (tests/helpers/zygote.py says what it reproduces of a fresh `python`, and when it
# runs the real one instead; the OneFlow suite's server imports no framework). YOLO_TEST_ZYGOTE=off turns it off for
# a session, or for one process in its environment.
ZYGOTE = os.environ.get("YOLO_TEST_ZYGOTE", "on").strip().lower()
REAL_PYTHON = sys.executable


def _start_warm_python(config):
    if ZYGOTE not in ("on", "off"):
        raise pytest.UsageError(f"YOLO_TEST_ZYGOTE={ZYGOTE!r}: use on (the default) or off")
    from utils.backend import BACKEND
    xdist_controller = not hasattr(config, "workerinput") and config.getoption("numprocesses", default=None)
    if ZYGOTE == "off" or sys.platform != "linux" or xdist_controller:
        return  # (pytest-xdist's controller runs no test: its workers start their own servers)
    from tests.helpers import zygote
    folder = tempfile.mkdtemp(prefix="yolo-zygote-")
    # OneFlow's runtime threads start at import: its processes fork from a server without it (zygote.py)
    server, launcher = zygote.start(REAL_PYTHON, folder, framework="torch" if BACKEND == "torch" else "none")
    if server is None:
        config.issue_config_time_warning(pytest.PytestWarning(f"warm start off: {launcher}"), stacklevel=2)
        shutil.rmtree(folder, ignore_errors=True)
        return
    config.stash[_ZYGOTE] = (server, folder)
    sys.executable = launcher


def pytest_unconfigure(config):
    started = config.stash.get(_ZYGOTE, None)
    if started:
        from tests.helpers import zygote
        sys.executable = REAL_PYTHON
        zygote.stop(started[0])
        shutil.rmtree(started[1], ignore_errors=True)


_ZYGOTE = pytest.StashKey()


@pytest.fixture(autouse=True)
def _fresh_python_where_marked(request, monkeypatch):
    """@pytest.mark.fresh_python: the test knows its processes by the pid that Popen gives (a lock's holder, a
    temporary file's name, a launcher it kills): they must be real interpreters, not the warm start's forks."""
    if request.node.get_closest_marker("fresh_python"):
        monkeypatch.setenv("YOLO_TEST_ZYGOTE", "off")


# ------------------------------------------------------------------------------------------------ the tree watcher
# Every test runs under tests/helpers/tree_watch.py: a snapshot of the project's tree (without .git, .venv*,
# __pycache__) and of the shared test data (read-only) is taken before the test's setup (so that what its module's
# fixtures write is seen too) and after its teardown; the test fails ("ERROR at teardown") naming each path that
# appeared, vanished or changed there, other than the outputs it declares with @pytest.mark.writes(...). The run
# folders go to tmp_path, outside the project, so they are never in the watched trees. The cost is measured in
# tests/test_adversarial/test_tree_watch.py (about 10 ms per snapshot of both trees on a loaded 2-core machine).
# An edit made by hand while a test runs shows as a change too: TREE_WATCH=off (read by the tests only) turns the
# watcher off for such a session; CI and `make test` keep it on.
_WATCH = pytest.StashKey()
TREE_WATCH = os.environ.get("TREE_WATCH", "on").strip().lower()


def pytest_configure(config):
    if TREE_WATCH not in ("on", "off"):
        raise pytest.UsageError(f"TREE_WATCH={TREE_WATCH!r}: use on (the default) or off")
    _start_warm_python(config)
    config.addinivalue_line(
        "markers", "writes(*paths): outputs the test may write inside the project folder (paths or globs relative to "
        "its root); the tree watcher fails the test for any other change there or in the shared test data")
    config.addinivalue_line(
        "markers", "fresh_python: the python processes the test starts are real interpreters (it knows them by pid), "
        "not the warm start's forks")
    config.addinivalue_line(
        "markers", "framework_free: the code under test imports no framework (or does the same on both): it runs in "
        "the PyTorch suite only")
    config.addinivalue_line(
        "markers", "oneflow_covered_by(test): another test (tests/<path>.py::<name>) holds this test's OneFlow side: "
        "it runs in the PyTorch suite only (tests/helpers/tiers.py)")


# A test module whose subject is framework-free code (archives, YAML and settings parsing, the write module, the
# tree watcher, flag tables, results rendering) gives the same result under both backends; running it again in the
# OneFlow suite only spends the two cores' time (the suite must stay under 20 minutes). Such a module sets
# `pytestmark = pytest.mark.framework_free`, and the OneFlow suite skips it, saying so.
# The fast tier and the OneFlow suite's covered tests: tests/helpers/tiers.py (tryfirst: the `slow` markers it adds are
# there before `-m "not slow"` deselects).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    from tests.helpers import tiers
    backend = os.environ.get("YOLO_BACKEND", "torch").strip().lower()
    tiers.mark_measured_slow(items, backend)
    tiers.apply_oneflow_covers(items, oneflow=backend == "oneflow")
    if backend != "oneflow":
        return
    skip = pytest.mark.skip(reason="framework-free code: tested once, in the PyTorch suite")
    for item in items:
        if item.get_closest_marker("framework_free"):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    from tests.helpers import tiers
    start = time.monotonic()
    try:
        return (yield)
    finally:
        tiers.record(item, time.monotonic() - start)


def _watch_for(item):
    from tests.helpers.tree_watch import TreeWatch
    skip = []
    if item.config.option.basetemp:  # tmp_path lies wherever --basetemp says: never watch it
        skip.append(Path(item.config.option.basetemp).resolve())
    watch = TreeWatch(ROOT, SHARED if SHARED.is_dir() else None, skip=skip)
    for marker in item.iter_markers("writes"):
        watch.allow(*marker.args)
    return watch


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    watch = item.stash[_WATCH] = _watch_for(item)
    if TREE_WATCH == "on":
        watch.start(item.nodeid)
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    watch = item.stash.get(_WATCH, None) if TREE_WATCH == "on" else None
    try:
        result = yield
    except BaseException:
        if watch is not None:
            watch.finish()
        raise
    if watch is not None:
        problems = watch.finish()
        if problems:
            pytest.fail("this test changed files outside its tmp_path (write run folders to tmp_path, pass --project, "
                        "or declare a project output with @pytest.mark.writes; a hand edit made meanwhile shows here "
                        "too: TREE_WATCH=off):\n  " + "\n  ".join(problems), pytrace=False)
    return result


@pytest.fixture
def tree_watch(request):
    """The running test's watcher: tree_watch.allow("path/or/glob") declares an output found only at run time."""
    return request.node.stash[_WATCH]


class _LogLines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(autouse=True)
def _project_logger_as_found():
    """The project logger's level, propagation and switch as each test found them, put back after it. A command's
    main() may quiet the logger for its process (the benchmarks set WARNING); a test that calls one must not leave a
    later test on the same worker unable to read the INFO lines it checks (test_classify_predict_top5 failed so,
    after test_conv_grad and test_loss_reads)."""
    from utils.log import LOGGER
    found = LOGGER.level, LOGGER.propagate, LOGGER.disabled
    yield
    if (LOGGER.level, LOGGER.propagate, LOGGER.disabled) != found:
        LOGGER.setLevel(found[0])  # setLevel, not the attribute: it also clears the loggers' cache of levels
        LOGGER.propagate, LOGGER.disabled = found[1:]


@pytest.fixture
def log_lines():
    """The messages the project's logger ('yolov5') gives during the test, INFO and up, as a list of strings."""
    from utils.log import LOGGER
    h, level = _LogLines(), LOGGER.level
    LOGGER.addHandler(h)
    LOGGER.setLevel(min(level, logging.INFO) if level else logging.INFO)
    yield h.lines
    LOGGER.removeHandler(h)
    LOGGER.setLevel(level)


@pytest.fixture(scope="session")
def root_dir():
    return ROOT


@pytest.fixture(scope="session")
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not found: the shared test data sits beside the project")
    return SHARED


@pytest.fixture(scope="session")
def coco128_dir(shared_dir):
    return shared_dir / "data" / "coco128"


@pytest.fixture(scope="session")
def yolov5n_pt(shared_dir):
    return shared_dir / "weights" / "yolov5n.pt"


@pytest.fixture(scope="session")
def ref_a(shared_dir):
    import numpy as np
    return dict(np.load(shared_dir / "reference" / "ref_A.npz"))


class OtherBackend:
    """Runs Python code under the backend this process is not using."""

    def __init__(self, backend, python):
        self.backend = backend
        self.python = str(python)
        self.env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
        self.env.pop("_YOLO_BACKEND_ANNOUNCED", None)

    def run(self, code, timeout=600, cwd=ROOT):
        """Run code with `python -c`; returns stdout, raises AssertionError with stderr when it fails."""
        p = subprocess.run([self.python, "-c", code], cwd=cwd, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        assert p.returncode == 0, f"{self.backend} snippet failed ({p.returncode}):\n{p.stderr[-4000:]}"
        return p.stdout


@pytest.fixture(scope="session")
def other_python():
    from utils.backend import BACKEND
    other = "torch" if BACKEND == "oneflow" else "oneflow"
    python = Path(os.environ.get(f"YOLO_{other.upper()}_PYTHON", ROOT / f".venv-{other}" / "bin" / "python"))
    if not python.exists():
        pytest.skip(f"no {other} environment at {python} ('make setup' builds it)")
    return OtherBackend(other, python)
