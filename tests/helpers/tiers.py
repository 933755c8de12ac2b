"""Which tests run where: the fast tier, and the tests the OneFlow suite leaves to the PyTorch suite.

The fast tier (`make test-fast`, `pytest -m "not slow"`) is every test that ran in under FAST_TIER_BUDGET_S seconds
the last time the whole suite was measured (tests/durations/<backend>.json, written by `make test-durations`),
besides the tests marked `slow` by hand. A measured test over the budget gets the `slow` marker at collection, so
the tier keeps its size as tests are added: a new test is fast until the next measurement says otherwise.

The OneFlow suite runs what can differ under OneFlow. A test whose OneFlow side another test holds (a cross-backend
equality test, or a smaller OneFlow run of the same path) carries `@pytest.mark.oneflow_covered_by("file::test")`;
the OneFlow suite skips it naming that test, and any suite fails at collection when the named test does not exist,
so a renamed or deleted cover cannot leave OneFlow silently untested.
"""
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DURATIONS_DIR = ROOT / "tests" / "durations"
# seconds of wall time, measured with both suites running side by side on 2 cores (`make test-durations`). On a
# 2-core AMD EPYC Zen 3, `make test-fast` took 4:39 with 3.0 s, and 3:35 with 2.0 s (PyTorch 2:05, OneFlow 1:22)
FAST_TIER_BUDGET_S = 2.0
RECORD_ENV = "YOLO_RECORD_DURATIONS"  # a folder: each test's wall time is appended there (see record)
# A pytest run that a test starts (the GPU kit's CUDA tier on the CPU, the tree watcher's own checks) inherits the
# variable naming the test that runs in its parent, and RECORD_ENV with it: its tests are not the suite's, and their
# times (run inside another test) would replace the suite's own for the same ids. Read once, at collection.
NESTED_RUN = "PYTEST_CURRENT_TEST" in os.environ


def durations_file(backend):
    return DURATIONS_DIR / f"{backend}.json"


def measured_durations(backend):
    """{test id: seconds} of the last measurement under backend ({} when there is none)."""
    f = durations_file(backend)
    return json.loads(f.read_text()) if f.is_file() else {}


def mark_measured_slow(items, backend):
    """Give the `slow` marker to every test measured over the budget (before `-m` deselects by marker)."""
    measured = measured_durations(backend)
    for item in items:
        if measured.get(item.nodeid, 0.0) > FAST_TIER_BUDGET_S and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


_COVER = re.compile(r"^(tests/[\w/]+\.py)::(\w+)$")


def check_cover(item):
    """The test named by item's oneflow_covered_by marker: 'tests/...py::test_name', a test that exists."""
    marker = item.get_closest_marker("oneflow_covered_by")
    if marker is None:
        return None
    name = marker.args[0] if marker.args else ""
    m = _COVER.match(name)
    if not m:
        raise pytest.UsageError(f"{item.nodeid}: oneflow_covered_by({name!r}) must name a test as "
                                "'tests/<path>.py::<test function>'")
    f = ROOT / m.group(1)
    if not f.is_file() or not re.search(rf"^def {m.group(2)}\(", f.read_text(), re.M):
        raise pytest.UsageError(f"{item.nodeid}: oneflow_covered_by names {name}, which does not exist: name the "
                                "test that now holds its OneFlow side, or remove the marker")
    return name


def _function_id(nodeid):
    return nodeid.split("[")[0]  # a parametrized test's cases share their function


def apply_oneflow_covers(items, oneflow):
    """Skip the covered tests under OneFlow. A cover must itself run there: a function whose every collected case
    is covered holds nobody's OneFlow side, so naming it fails collection (a chain of covers would leave OneFlow
    untested without a word). Functions not collected in this session (a run of one file) are not judged."""
    covers = {item.nodeid: check_cover(item) for item in items}
    cases = {}
    for item in items:
        cases.setdefault(_function_id(item.nodeid), []).append(item.nodeid)
    for nodeid, cover in covers.items():
        if cover in cases and all(covers[case] for case in cases[cover]):
            raise pytest.UsageError(f"{nodeid}: oneflow_covered_by names {cover}, which is itself left to the PyTorch "
                                    "suite under OneFlow: name a test that runs there")
    if oneflow:
        for item in items:
            if covers[item.nodeid]:
                item.add_marker(pytest.mark.skip(reason=f"its OneFlow side is held by {covers[item.nodeid]}"))


def record(item, seconds):
    """Append one test's wall time (setup, call and teardown) to the folder YOLO_RECORD_DURATIONS names, one file per
    process (pytest-xdist workers write side by side); scripts/record_durations.py merges them."""
    folder = os.environ.get(RECORD_ENV)
    if not folder or NESTED_RUN:
        return
    backend = os.environ.get("YOLO_BACKEND", "torch").strip().lower()
    with open(Path(folder) / f"{backend}.{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps([item.nodeid, round(seconds, 2)]) + "\n")
