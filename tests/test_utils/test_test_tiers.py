"""The suite's own tiers (tests/helpers/tiers.py): measured slow tests leave the fast tier, and a OneFlow cover must
name a test that exists."""
import json

import pytest

from tests.helpers import tiers

pytestmark = pytest.mark.framework_free


class FakeItem:
    def __init__(self, nodeid, *markers):
        self.nodeid, self.markers = nodeid, list(markers)

    def get_closest_marker(self, name):
        return next((m for m in self.markers if m.name == name), None)

    def add_marker(self, marker):
        self.markers.append(marker.mark if hasattr(marker, "mark") else marker)


def test_a_test_measured_over_the_budget_becomes_slow(tmp_path, monkeypatch):
    monkeypatch.setattr(tiers, "DURATIONS_DIR", tmp_path)
    over, under, unknown = "tests/a.py::test_over", "tests/a.py::test_under", "tests/a.py::test_new"
    (tmp_path / "torch.json").write_text(json.dumps({over: tiers.FAST_TIER_BUDGET_S + 0.1,
                                                     under: tiers.FAST_TIER_BUDGET_S}))
    items = [FakeItem(over), FakeItem(under), FakeItem(unknown)]
    tiers.mark_measured_slow(items, "torch")
    assert [bool(i.get_closest_marker("slow")) for i in items] == [True, False, False]
    tiers.mark_measured_slow(items, "oneflow")  # no measurement for it: nothing changes
    assert [bool(i.get_closest_marker("slow")) for i in items] == [True, False, False]


def test_a_cover_must_name_a_test_that_exists():
    real = "tests/test_utils/test_test_tiers.py::test_a_cover_must_name_a_test_that_exists"
    item = FakeItem("tests/x.py::test_x", pytest.mark.oneflow_covered_by(real).mark)
    assert tiers.check_cover(item) == real
    tiers.apply_oneflow_covers([item], oneflow=True)
    skip = item.get_closest_marker("skip")
    assert skip is not None and real in skip.kwargs["reason"]
    for bad in ("tests/test_utils/test_test_tiers.py::test_gone", "tests/nope.py::test_x", "test_x", ""):
        with pytest.raises(pytest.UsageError, match="oneflow_covered_by"):
            tiers.check_cover(FakeItem("tests/x.py::test_x", pytest.mark.oneflow_covered_by(bad).mark))


def test_every_measured_test_id_still_names_a_test_file():
    """A renamed test file leaves stale ids behind: `make test-durations` rewrites the files."""
    for backend in ("torch", "oneflow"):
        for nodeid in tiers.measured_durations(backend):
            assert (tiers.ROOT / nodeid.split("::")[0]).is_file(), f"{backend}: {nodeid}"


def test_a_cover_that_is_itself_covered_fails_collection():
    """A chain of covers (A held by B, B left to the PyTorch suite) would leave A's OneFlow side untested."""
    here = "tests/test_utils/test_test_tiers.py"
    b, a = f"{here}::test_a_cover_must_name_a_test_that_exists", f"{here}::test_a_test_measured_over_the_budget_becomes_slow"
    chain = [FakeItem(a, pytest.mark.oneflow_covered_by(b).mark), FakeItem(b, pytest.mark.oneflow_covered_by(a).mark)]
    with pytest.raises(pytest.UsageError, match="itself left to the PyTorch suite"):
        tiers.apply_oneflow_covers(chain, oneflow=False)  # whichever suite collects them
    # a parametrized cover with one case left to run under OneFlow holds the others
    cases = [FakeItem(f"{b}[x]"), FakeItem(f"{b}[y]", pytest.mark.oneflow_covered_by(b).mark),
             FakeItem(a, pytest.mark.oneflow_covered_by(b).mark)]
    tiers.apply_oneflow_covers(cases, oneflow=True)
    assert [bool(i.get_closest_marker("skip")) for i in cases] == [False, True, True]
    cases[0].markers.append(pytest.mark.oneflow_covered_by(b).mark)  # now every case of b is covered
    with pytest.raises(pytest.UsageError, match="itself left"):
        tiers.apply_oneflow_covers(cases, oneflow=False)


def test_a_pytest_run_started_by_a_test_records_no_durations(tmp_path):
    """`make test-durations` records each test's time; a pytest run that a test starts (it inherits the recording
    folder) must not add its own tests' times, measured inside another test, to the suite's."""
    import os
    import subprocess
    import sys
    me = "tests/test_utils/test_test_tiers.py::test_a_cover_must_name_a_test_that_exists"
    for nested in (False, True):
        folder = tmp_path / str(nested)
        folder.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER")}
        env.update({tiers.RECORD_ENV: str(folder), "TREE_WATCH": "off", "YOLO_TEST_ZYGOTE": "off"})
        if nested:
            env["PYTEST_CURRENT_TEST"] = os.environ["PYTEST_CURRENT_TEST"]  # this test's, as a child sees it
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", me],
                           cwd=tiers.ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        recorded = [json.loads(ln)[0] for f in folder.glob("*.jsonl") for ln in f.read_text().splitlines()]
        assert recorded == ([] if nested else [me]), (nested, recorded)
