"""The tree watcher (tests/helpers/tree_watch.py, wired for every test in tests/conftest.py): it sees each kind of
change, excuses only declared outputs (this test's or a concurrently running test's), costs little, and fails a test
end to end."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import tree_watch
from tests.helpers.tree_watch import TreeWatch, declared_match, differences, snapshot

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    """A project-like tree and a read-only-data-like tree in tmp_path, and a registry of its own."""
    monkeypatch.setattr(tree_watch, "REGISTRY", tmp_path / "registry")
    root, shared = tmp_path / "project", tmp_path / "shared"
    for d in ("utils", "runs", ".git", ".venv-torch/lib", "utils/__pycache__", "data/images"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "utils" / "a.py").write_text("x = 1\n")
    (root / "data" / "images" / "a.jpg").write_bytes(b"\xff\xd8 image")
    (shared / "coco" / "labels").mkdir(parents=True)
    (shared / "coco" / "labels" / "1.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    return root, shared


def _watch(root, shared, *patterns):
    w = TreeWatch(root, shared)
    w.allow(*patterns)
    w.start("fake::test")
    return w


def test_every_kind_of_change_is_named(fake_tree):
    root, shared = fake_tree
    w = _watch(root, shared)
    (root / "yaml.py").write_text("import os\n")  # appeared
    (root / "utils" / "a.py").unlink()  # vanished
    f = root / "train.py"
    st = f.stat()
    f.write_text("print('TRAIN')\n")  # same size, new content: the mtime shows it
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    os.chmod(root / "data" / "images" / "a.jpg", 0o600)  # mode only
    problems = "\n".join(w.finish())
    for name, what in (("yaml.py", "appeared"), ("utils/a.py", "vanished"), ("train.py", "changed"),
                       ("data/images/a.jpg", "changed")):
        assert f"{root / name}: {what}" in problems


def test_excluded_folders_and_declared_outputs_are_not_reported(fake_tree):
    root, shared = fake_tree
    w = _watch(root, shared, "runs", "data/*.cache")
    (root / ".git" / "index").write_text("x")
    (root / ".venv-torch" / "lib" / "site.py").write_text("x")
    (root / "utils" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    (root / "runs" / "train" / "exp").mkdir(parents=True)
    (root / "runs" / "train" / "exp" / "last.pt").write_bytes(b"x")
    (root / "data" / "labels.cache").write_bytes(b"x")
    assert w.finish() == []


def test_a_declared_glob_excuses_only_what_it_matches():
    assert declared_match("runs/train/exp/w.pt", ["runs"])
    assert declared_match("yolov5n.onnx", ["*.onnx"])
    assert not declared_match("runs2/x", ["runs"])
    assert not declared_match("utils/yaml.py", ["*.onnx"])


def test_shared_data_is_read_only_even_for_a_file_written_and_removed(fake_tree):
    """Nothing may write into the shared data; a file created and removed again still changes its folder."""
    root, shared = fake_tree
    folder = shared / "coco" / "labels"
    w = _watch(root, shared, "*")  # declarations cover the project only, never the shared data
    time.sleep(0.01)  # a coarse file-system clock must see a new folder time
    (folder / "train.cache").write_bytes(b"x")
    (folder / "train.cache").unlink()
    (folder / "1.txt").write_text("0 0.5 0.5 0.1 0.2\n")
    problems = "\n".join(w.finish())
    assert f"{folder}: changed (shared test data is read-only)" in problems
    assert f"{folder / '1.txt'}: changed" in problems


@pytest.mark.fresh_python  # knows its processes by pid
def test_a_concurrent_tests_declared_output_is_excused_and_an_undeclared_change_names_it(fake_tree, tmp_path):
    """make test runs two suites in one checkout: what the other suite's running test declared is not this test's
    fault; anything else still fails, and the message names the other process's test."""
    root, shared = fake_tree
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from tests.helpers import tree_watch as t; t.REGISTRY = Path(sys.argv[2]); "
            "t.publish('other::test_export', ['*.onnx']); print('ready', flush=True); time.sleep(60)")
    other = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(tmp_path / "registry")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "ready"
        w = _watch(root, shared)
        (root / "yolov5n.onnx").write_bytes(b"onnx")
        (root / "stray.txt").write_text("x")
        problems = w.finish()
    finally:
        other.kill()
        other.wait()
    text = "\n".join(problems)
    assert "yolov5n.onnx" not in text
    assert f"{root / 'stray.txt'}: appeared" in text and "other::test_export" in text and str(other.pid) in text
    # the other process is gone: its declaration no longer excuses anything
    w = _watch(root, shared)
    (root / "yolov5n.onnx").write_bytes(b"onnx, again")
    assert [p for p in w.finish() if "yolov5n.onnx" in p]


def test_snapshot_cost_is_small(root_dir, shared_dir):
    """The price every test pays twice: one snapshot of the project tree and of the shared data. Measured here (best
    of 5) and bounded loosely, so that a slow machine does not fail it but a quadratic walk would."""
    def best(f):
        times = []
        for _ in range(5):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)
    project = best(lambda: snapshot(root_dir))
    shared = best(lambda: snapshot(shared_dir, folder_times=True))
    n = len(snapshot(root_dir)) + len(snapshot(shared_dir, folder_times=True))
    print(f"snapshot: project {project * 1e3:.1f} ms, shared {shared * 1e3:.1f} ms, {n} entries")
    assert project + shared < 0.25, f"{(project + shared) * 1e3:.0f} ms per snapshot of {n} entries"


def test_differences_are_sorted_and_complete():
    before = {"a": ("file", 1, 1, 0o644), "b": ("file", 1, 1, 0o644), "d": ("dir", 0, 0, 0o755)}
    after = {"a": ("file", 2, 1, 0o644), "c": ("file", 1, 1, 0o644), "d": ("dir", 0, 0, 0o700)}
    assert differences(before, after) == [("a", "changed"), ("b", "vanished"), ("c", "appeared"), ("d", "changed")]


def test_a_test_that_writes_into_the_shared_data_fails_at_teardown(tmp_path):
    """End to end through tests/conftest.py's hooks: an inner pytest run (YOLO_SHARED_DIR pointed at a folder of this
    test) whose test writes into the 'shared data' is failed at teardown naming the file; a declared project output
    and a test that writes only to its tmp_path pass."""
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    tests = tmp_path / "inner"
    tests.mkdir()
    (tests / "test_inner.py").write_text(
        "import os\nfrom pathlib import Path\n"
        f"SHARED = Path({str(shared)!r})\n"
        "def test_writes_shared():\n    (SHARED / 'data' / 'labels.cache').write_text('x')\n"
        "def test_writes_tmp(tmp_path):\n    (tmp_path / 'x').write_text('x')\n")
    env = {**os.environ, "YOLO_SHARED_DIR": str(shared), "PYTHONPATH": str(ROOT), "TREE_WATCH": "on"}
    env.pop("PYTEST_ADDOPTS", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                        "--rootdir", str(tests), str(tests / "test_inner.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "ERROR at teardown of test_writes_shared" in out, out
    assert f"{shared / 'data' / 'labels.cache'}: appeared (shared test data is read-only)" in out, out
    assert "2 passed, 1 error" in out, out  # the writing test's call passed; its teardown is the error
