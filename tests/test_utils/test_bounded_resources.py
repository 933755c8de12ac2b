"""Bounded resources: processes end with their parent (utils/child_processes.py) and run at its priority, the
checkpoint reader bounds what a file may make it allocate (utils/checkpoint/torch_reader.py), only regular files are
opened as images and labels (utils/data/files.py), plots stay within a memory bound whatever the number of classes
(utils/metrics.py)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")


def _alive(pid):
    """A process that runs (a zombie waiting for its reaper counts as gone: it holds no memory)."""
    if LINUX:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _wait_gone(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


# ---- 1. children end with their parent -----------------------------------------------------------------------
PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
import utils.child_processes as cp
if {fallback!r}:
    cp._PRCTL = None  # as where prctl is missing: the pipe and pid watch must end the helpers
from utils.plot_jobs import PlotJobs
jobs = PlotJobs(processes=True, warm_matplotlib=False)
jobs.submit("nothing", time.sleep, 0)
jobs.wait()
print(" ".join(str(h.process.pid) for h in jobs._helpers), flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="plot helpers are forked")
@pytest.mark.parametrize("fallback", [False, True], ids=["prctl", "pipe-watch"])
def test_plot_helpers_end_when_their_parent_is_killed(fallback):
    """The out-of-memory killer's SIGKILL runs no clean-up in the parent: the helpers must still go, at once."""
    env = {**os.environ, "YOLO_PLOT_PROCESSES": "1"}
    p = subprocess.Popen([sys.executable, "-c", PARENT.format(root=str(ROOT), fallback=fallback)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        helpers = [int(x) for x in line.split()]
        assert len(helpers) == 2 and all(_alive(h) for h in helpers), (line, p.stderr.read() if p.poll() else "")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        left = _wait_gone(helpers, 5.0)
        assert not left, f"plot helpers {left} outlived their SIGKILLed parent"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _child_of_gone_parent(use_prctl):
    import utils.child_processes as cp
    if not use_prctl:
        cp._PRCTL = None
    cp.end_with_parent(parent_pid=-1)  # a pid that is not our parent: as if it had died before the call
    time.sleep(30)
    os._exit(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
@pytest.mark.parametrize("use_prctl", [True, False], ids=["prctl", "pipe-watch"])
def test_a_child_whose_parent_died_before_it_asked_ends_at_once(use_prctl):
    """The race prctl leaves open (the parent gone between fork and prctl) is closed by the getppid check."""
    import multiprocessing
    proc = multiprocessing.get_context("fork").Process(target=_child_of_gone_parent, args=(use_prctl,))
    t = time.monotonic()
    proc.start()
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL, proc.exitcode
    assert time.monotonic() - t < 5


# A process that lowers its priority cannot raise it again (unprivileged), and the project waits for every process
# it starts (plot helpers, loader workers, converters): one started at a lower priority turns outside load into a
# stall (utils/plot_jobs.py's _serve has the figures). The calls that would do it are refused wherever they appear.
PRIORITY_CALLS = {"nice", "setpriority", "sched_setscheduler", "sched_setattr", "SCHED_IDLE", "SCHED_BATCH",
                  "PRIO_PROCESS", "PRIO_PGRP", "PRIO_USER"}


def test_no_process_of_the_project_runs_at_a_lower_priority_than_its_starter():
    import ast
    skip = {"tests", "site", "__pycache__"}
    found = []
    for f in sorted(ROOT.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if any(part in skip or part.startswith(".") for part in rel.parts):
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name in PRIORITY_CALLS or (isinstance(node, ast.Constant) and node.value in ("nice", "renice")):
                found.append(f"{rel.as_posix()}:{node.lineno} {name or node.value}")
    assert not found, found


# ---- 2. the checkpoint reader bounds what a file may make it allocate -----------------------------------------
def _tensor(key, size, stride, offset=0, storage="FloatStorage", numel=1):
    from utils.checkpoint.pickle_writer import Call, Global, PersistentId, ordered_dict
    pid = PersistentId(("storage", Global("torch", storage), key, "cpu", numel))
    return Call(Global("torch._utils", "_rebuild_tensor_v2"), (pid, offset, tuple(size), tuple(stride), False,
                                                              ordered_dict([])))


def _crafted_pt(path, tree, storages, compress=None):
    """A torch zip archive holding tree (pickle_writer nodes) and storages {key: raw bytes}."""
    import zipfile

    from utils.checkpoint.pickle_writer import PickleWriter
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x/data.pkl", PickleWriter().dumps(tree))
        for key, raw in storages.items():
            zf.writestr(f"x/data/{key}", raw, compress_type=compress or zipfile.ZIP_STORED)
    return path


def _refused(path, *words):
    """Every public reader refuses the file with one line that names it."""
    from utils.checkpoint import CheckpointError, load_any
    from utils.checkpoint.torch_reader import read_pytorch_file
    for read in (read_pytorch_file, load_any):
        t = time.monotonic()
        with pytest.raises(CheckpointError) as e:
            read(path)
        msg = str(e.value)
        assert str(path) in msg and "\n" not in msg and all(w in msg for w in words), msg
        assert time.monotonic() - t < 5, "refused only after spending its time"


def test_a_stride0_view_cannot_ask_for_gigabytes(tmp_path):
    """1 float viewed as 2^17 x 2^17 (stride 0): 16 GiB asked of the reader by a file of about 1 KB."""
    import struct
    f = _crafted_pt(tmp_path / "bomb.pt", {"w": _tensor("0", (1 << 17, 1 << 17), (0, 0))},
                    {"0": struct.pack("<f", 1.0)})
    assert f.stat().st_size < 2000
    _refused(f, "repeats its storage")


def test_a_real_expansion_still_loads(tmp_path):
    """Detect's anchor_grid is an expanded view (6 values as (1, 3, 80, 80, 2)): within the bound, it loads."""
    import numpy as np

    from utils.checkpoint.torch_reader import read_pytorch_file
    anchors = np.arange(6, dtype=np.float32)
    f = _crafted_pt(tmp_path / "grid.pt", {"g": _tensor("0", (1, 3, 80, 80, 2), (6, 2, 0, 0, 1), numel=6)},
                    {"0": anchors.tobytes()})
    g = read_pytorch_file(f)["g"].array
    assert g.shape == (1, 3, 80, 80, 2) and (g[0, :, 5, 7] == anchors.reshape(3, 2)).all()


def test_a_compressed_storage_is_refused_before_it_inflates(tmp_path):
    """A deflated member declaring 64 MiB of zeros (a few KB on disk): refused before anything is inflated."""
    import zipfile
    n = 16 << 20
    f = _crafted_pt(tmp_path / "zipbomb.pt", {"w": _tensor("0", (n,), (1,), numel=n)}, {"0": bytes(4 * n)},
                    compress=zipfile.ZIP_DEFLATED)
    assert f.stat().st_size < 200_000
    _refused(f, "compressed")


def test_a_storage_must_hold_what_the_pickle_declares(tmp_path):
    f = _crafted_pt(tmp_path / "short.pt", {"w": _tensor("0", (10,), (1,), numel=10)}, {"0": bytes(4)})
    _refused(f, "storage 0 holds 4 bytes")


def test_a_storage_size_forged_past_the_end_of_the_file(tmp_path):
    """The central directory claims 1 GiB for a stored 4-byte member: refused before reading (a read of the
    declared size would allocate it)."""
    import struct
    n = 1 << 28
    f = _crafted_pt(tmp_path / "forged.pt", {"w": _tensor("0", (n,), (1,), numel=n)}, {"0": bytes(4)})
    data = bytearray(f.read_bytes())
    at = data.index(b"x/data/0", data.index(b"PK\x01\x02")) - 46  # the storage's central entry (name at +46)
    assert data[at:at + 4] == b"PK\x01\x02"
    struct.pack_into("<II", data, at + 20, 4 * n, 4 * n)  # compressed and uncompressed sizes
    f.write_bytes(bytes(data))
    _refused(f, "past the file")


def test_many_views_of_one_storage_stay_within_the_files_budget(tmp_path):
    """Each view lies inside its storage, but 300 full copies of a 1 MB storage are 300 MB from a 1 MB file."""
    n = 1 << 18
    tree = {f"w{i}": _tensor("0", (n,), (1,), numel=n) for i in range(300)}
    f = _crafted_pt(tmp_path / "views.pt", tree, {"0": bytes(4 * n)})
    _refused(f, "past")


@pytest.mark.parametrize("payload,words", [
    # numpy.dtype('f8') whose state claims 'holds Python objects' (flags 63): numpy would then read the array's
    # bytes as object pointers (a crash, or worse); then an array of that dtype
    (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R(K\x01K\x01\x85cnumpy\n"
     b"dtype\nX\x02\x00\x00\x00f8\x89\x88\x87R(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tb"
     b"\x89C\x08AAAAAAAAtb.", "state numpy never writes"),
    (b"\x80\x02cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87R.", "not a plain"),  # an object dtype
    (b"\x80\x02c__builtin__\nbytearray\n\x8a\x05\x00\x00\x00\x00\x01\x85R.", "bytearray(int)"),  # 2^32 zero bytes
    (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n\x8a\x05\x00\x00\x00\x00\x01\x85C\x01b\x87R.",
     "_reconstruct"),  # an array of 2^32 elements before its state
])
def test_numpy_and_bytes_in_a_pickle_are_checked_before_they_allocate_or_crash(tmp_path, payload, words):
    import zipfile
    f = tmp_path / "np.pt"
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("x/data.pkl", payload)
    _refused(f, words)


def test_numpy_values_in_a_checkpoint_still_round_trip(tmp_path):
    """What numpy's own pickling writes (arrays, scalars, dtypes of either byte order, strings) still loads."""
    import pickle
    import zipfile

    import numpy as np

    from utils.checkpoint.torch_reader import read_pytorch_file
    obj = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "f": np.asfortranarray(np.ones((2, 3), np.int16)),
           "s": np.float64(0.5), "d": np.dtype(">i4"), "u": np.array(["ab", "c"]), "b": bytearray(b"xy")}
    f = tmp_path / "np_ok.pt"
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("x/data.pkl", pickle.dumps(obj, protocol=2))
    back = read_pytorch_file(f)
    assert (back["a"] == obj["a"]).all() and back["a"].dtype == np.float32 and (back["f"] == 1).all()
    assert back["s"] == 0.5 and back["d"] == np.dtype(">i4") and list(back["u"]) == ["ab", "c"]
    assert back["b"] == b"xy"


# ---- 3. only regular files are opened as images and labels ----------------------------------------------------
def _run_limited(fn, seconds=20):
    """fn() in a forked child with a deadline: a call that blocks (on a FIFO) fails the test instead of hanging it."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            q.put(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 (handed to the test as it is)
            q.put(("raised", f"{type(e).__name__}: {e}"))

    p = ctx.Process(target=child)
    p.start()
    p.join(seconds)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail(f"blocked for {seconds} s (a FIFO opened as a file?)")
    return q.get(timeout=5)


@pytest.fixture
def folder_with_fifo(tmp_path, coco128_dir):
    import shutil
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(next((coco128_dir / "images" / "train2017").glob("*.jpg")), images / "a.jpg")
    os.mkfifo(images / "x.jpg")  # named like an image; opening it for reading blocks until a writer comes
    os.mkfifo(images / "clip.mp4")
    return images


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_listings_skip_a_fifo_named_like_an_image_with_a_warning(folder_with_fifo):
    import logging

    from utils.data.files import list_image_files
    from utils.data.media import LoadImages
    status, files = _run_limited(lambda: list_image_files(str(folder_with_fifo)))
    assert status == "ok" and [os.path.basename(f) for f in files] == ["a.jpg"], files
    status, files = _run_limited(lambda: LoadImages(str(folder_with_fifo)).files)
    assert status == "ok" and [os.path.basename(f) for f in files] == ["a.jpg"], files
    records = []  # the warnings, from the same listings here (they return at once now)
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("yolov5")
    logger.addHandler(handler)
    try:
        list_image_files(str(folder_with_fifo))
        LoadImages(str(folder_with_fifo))
    finally:
        logger.removeHandler(handler)
    warnings = [r.getMessage() for r in records if "not regular files" in r.getMessage()]
    assert len(warnings) == 2 and all(str(folder_with_fifo / "x.jpg") in w and "FIFO" in w for w in warnings)
    assert "clip.mp4" in warnings[1]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_reading_a_fifo_as_an_image_or_label_is_refused_in_one_line(folder_with_fifo):
    from utils.data.files import is_regular_file, open_regular_file
    from utils.data.media import read_image
    fifo = str(folder_with_fifo / "x.jpg")
    status, msg = _run_limited(lambda: read_image(fifo))
    assert status == "raised" and msg.startswith("FileNotFoundError") and fifo in msg and "FIFO" in msg, msg
    assert "\n" not in msg
    status, msg = _run_limited(lambda: open_regular_file(fifo, "r").read())
    assert status == "raised" and fifo in msg and "not a regular file" in msg, msg
    assert not is_regular_file(fifo) and is_regular_file(folder_with_fifo / "a.jpg")
    assert read_image(str(folder_with_fifo / "a.jpg")).ndim == 3


# ---- 4. plots stay within a memory bound whatever the number of classes ---------------------------------------
CONFUSION_10K = """
import pickle, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from utils.metrics import ConfusionMatrix
nc = 10000  # the project's own limit on classes
cm = ConfusionMatrix(nc)
rng = np.random.default_rng(0)
for c in range(nc):  # every class: a missed label (background column) and a hit; some confusions and false alarms
    cm.process_batch(None, np.array([c]))
    cm._add(c, c)
pairs = rng.integers(0, nc, (20000, 2))
for p, t in pairs:
    cm._add(p, t)
    cm._add(p, nc)
blob = pickle.dumps(cm)  # what a plot helper is handed
t0 = time.monotonic()
pickle.loads(blob).plot(save_dir={out!r}, names=[str(i) for i in range(nc)])
tp, fp = cm.tp_fp()
hits = nc + int((pairs[:, 0] == pairs[:, 1]).sum())
# VmHWM: this program's own peak (ru_maxrss would include the forking parent's size: Linux keeps it across exec)
hwm_kb = int(next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")).split()[1])
print(len(blob), hwm_kb // 1024, time.monotonic() - t0,
      int(tp.sum()) == hits and int(fp.sum()) == nc + 2 * len(pairs) - hits)
"""


def test_a_10000_class_confusion_matrix_is_counted_and_drawn_within_bounded_memory(tmp_path):
    """Before, the counts alone were 800 MB resident (transparent huge pages turn the background column's one cell
    per row into the whole matrix) and drawing took 12.7 GB."""
    p = subprocess.run([sys.executable, "-c", CONFUSION_10K.format(root=str(ROOT), out=str(tmp_path))],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    blob, peak_mb, seconds, counts_exact = p.stdout.split()
    assert int(blob) < 2_000_000, "the matrix was pickled dense"
    assert int(peak_mb) < 1024, f"peak RSS {peak_mb} MB"  # the interpreter, numpy, matplotlib and a framework
    assert float(seconds) < 60
    assert (tmp_path / "confusion_matrix.png").stat().st_size > 10_000
    assert counts_exact == "True"  # tp_fp() from the kept counts


def test_grouped_confusion_cells_are_shares_of_the_true_classes():
    """Above MATRIX_CELLS classes, cells are class ranges; a drawn column still sums to 1 when normalized, and the
    counts kept (tp_fp, matrix) are the exact per-class ones."""
    import numpy as np

    from utils.metrics import MATRIX_CELLS, ConfusionMatrix, _matrix_for_plot
    nc = 3 * MATRIX_CELLS - 1  # classes in ranges of 3 (the last range holds 2)
    cm = ConfusionMatrix(nc)
    for c in range(nc):
        cm._add(c, c)
    cm._add(5, 0)  # a class-0 label predicted as class 5: drawn cell (1, 0)
    cm._add(nc, nc - 1)  # the last class missed once
    array, edges = _matrix_for_plot(cm._coo(), nc, normalize=True)
    assert array.shape == (MATRIX_CELLS + 1, MATRIX_CELLS + 1) and list(edges[:3]) == [0, 3, 6]
    np.testing.assert_allclose(array[:, :-1].sum(0), 1, atol=1e-6)
    np.testing.assert_allclose([array[0, 0], array[1, 0]], [(0.5 + 1 + 1) / 3, 0.5 / 3], atol=1e-6)
    np.testing.assert_allclose(array[-1, -2], 0.5 / 2, atol=1e-6)  # the last range holds two classes
    dense = cm.matrix
    tp, fp = cm.tp_fp()
    assert dense.shape == (nc + 1, nc + 1) and dense[5, 0] == 1 and tp.sum() == nc and fp.sum() == 1


def test_curve_plots_draw_a_bounded_number_of_curves(tmp_path, monkeypatch):
    import numpy as np

    from utils import metrics
    px, n = np.linspace(0, 1, 1000), 3000
    drawn = []
    monkeypatch.setattr(metrics, "save_figure", lambda fig, path, **kw: drawn.append(len(fig.axes[0].lines)))
    py = np.random.default_rng(0).random((n, 1000))
    metrics.plot_mc_curve(px, py, tmp_path / "F1_curve.png", names=[str(i) for i in range(n)])
    metrics.plot_pr_curve(px, list(py), np.zeros((n, 10)), tmp_path / "PR_curve.png", names=[str(i) for i in range(n)])
    assert drawn == [metrics.MAX_CURVES + 1] * 2, drawn  # the sample of class curves, and the mean of all
