"""The tree watcher (used by tests/conftest.py for every test that runs code which may write files): a snapshot of the
project's tree and of the shared, read-only test data before a test and after it; the test fails naming every path
that appeared, vanished or changed outside its run folder (pytest's tmp_path, outside the project) and the outputs it
declares with @pytest.mark.writes("relative/path", "glob/*.onnx", ...).

A snapshot records (size, mtime_ns, mode) of each file and symbolic link (links are not followed) and the existence
and mode of each folder, listed with os.scandir. A folder's own modification time is left out in the project tree:
Python's __pycache__ folders (excluded) change their parent's, and so would a concurrent suite's files. In the shared
tree, which nothing may write, folders' times count too, so that a file written there and removed again is caught.

Concurrent suites. `make test` runs the PyTorch and the OneFlow suites side by side in one checkout (the second on
pytest-xdist workers). A change that another process made during this test's window must not fail this test when it is
an output that other test declared: each watching process publishes its running test's declared outputs in a small
registry folder outside the project (one file per process id, removed when the test ends), and a change is excused when
any live process declared it. An undeclared change by another process is a bug of that other test; it fails that test
too, and the message here names the concurrent processes so that the reader looks there first.
"""
import fnmatch
import json
import os
import stat
import tempfile
from pathlib import Path

# Never watched: version control, environments, byte-code caches and pytest's cache (written by the interpreter and
# the tools, not by the project's code; pytest.ini turns the cache off, a user's -p cacheprovider turns it on).
EXCLUDED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache"})
EXCLUDED_PREFIXES = (".venv",)
REGISTRY = Path(tempfile.gettempdir()) / f"yolo-tree-watch-{os.getuid()}"


def snapshot(root, skip=(), folder_times=False):
    """{relative path: (kind, size, mtime_ns, mode)} of everything under root, not following links; skip: absolute
    paths of folders not to enter (a test's tmp_path when it lies inside root)."""
    skip = {os.fspath(s) for s in skip}
    out = {}
    stack = [(os.fspath(root), "")]  # (folder, its path relative to root with a trailing slash)
    while stack:
        folder, prefix = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError:  # removed meanwhile, or unreadable: what is under it is simply not listed
            continue
        with it:
            for e in it:
                name = e.name
                if name in EXCLUDED_NAMES or name.startswith(EXCLUDED_PREFIXES) or (skip and e.path in skip):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                rel = prefix + name
                if stat.S_ISDIR(st.st_mode):
                    out[rel] = ("dir", 0, st.st_mtime_ns if folder_times else 0, st.st_mode)
                    stack.append((e.path, rel + "/"))
                else:
                    out[rel] = ("file", st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def differences(before, after):
    """[(path, 'appeared' | 'vanished' | 'changed')], sorted."""
    out = [(p, "appeared") for p in after.keys() - before.keys()]
    out += [(p, "vanished") for p in before.keys() - after.keys()]
    out += [(p, "changed") for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(out)


def declared_match(rel, patterns):
    """True when rel (a path relative to the watched root) is one of the declared outputs: the path itself, a path
    under a declared folder, or a glob match."""
    for p in patterns:
        p = p.rstrip("/")
        if rel == p or rel.startswith(p + "/") or fnmatch.fnmatchcase(rel, p):
            return True
    return False


# ------------------------------------------------------------------------------ the registry of running tests
def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def publish(test_id, patterns):
    """Tell concurrent watchers what this process's running test may write (and that a test is running)."""
    try:
        REGISTRY.mkdir(exist_ok=True)
        tmp = REGISTRY / f".{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"test": test_id, "writes": list(patterns)}))
        os.replace(tmp, REGISTRY / f"{os.getpid()}.json")
    except OSError:
        pass  # the registry is a courtesy to the other suite: a read-only /tmp costs only excuses


def withdraw():
    try:
        (REGISTRY / f"{os.getpid()}.json").unlink(missing_ok=True)
    except OSError:
        pass


def others():
    """{pid: {"test": id, "writes": [...]}} of the other live processes whose tests are running now."""
    out = {}
    try:
        entries = list(os.scandir(REGISTRY))
    except OSError:
        return out
    for e in entries:
        if not e.name.endswith(".json"):
            continue
        try:
            pid = int(e.name[:-5])
        except ValueError:
            continue
        if pid == os.getpid() or not _alive(pid):
            continue
        try:
            out[pid] = json.loads(Path(e.path).read_text())
        except (OSError, ValueError):
            continue
    return out


class TreeWatch:
    """One test's watch over the project tree (root) and the read-only shared tree (shared, may be None)."""

    def __init__(self, root, shared=None, skip=()):
        self.root, self.shared, self.skip = Path(root), (Path(shared) if shared else None), tuple(skip)
        self.patterns = []
        self.concurrent = {}

    def allow(self, *patterns):
        """More declared outputs (relative to the project root, globs allowed), e.g. from inside a test."""
        self.patterns += [str(p) for p in patterns]

    def start(self, test_id):
        publish(test_id, self.patterns)
        self.concurrent = others()
        self.before = self._take()

    def _take(self):
        shared = snapshot(self.shared, folder_times=True) if self.shared and self.shared.is_dir() else {}
        return snapshot(self.root, self.skip), shared

    def finish(self):
        """The lines of a failure message ([] when nothing undeclared changed)."""
        try:
            (root_before, shared_before), (root_after, shared_after) = self.before, self._take()
            concurrent = {**self.concurrent, **others()}
        finally:
            withdraw()
        excused = [p for info in concurrent.values() for p in info.get("writes", ())]
        lines = [f"{self.root / p}: {what}" for p, what in differences(root_before, root_after)
                 if not declared_match(p, self.patterns + excused)]
        lines += [f"{self.shared / p}: {what} (shared test data is read-only)"
                  for p, what in differences(shared_before, shared_after)]
        if lines and concurrent:
            lines.append("(tests running meanwhile in other processes: "
                         + ", ".join(f"{pid}: {i.get('test')}" for pid, i in sorted(concurrent.items())) + ")")
        return lines
