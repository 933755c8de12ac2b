"""Follow-ups of the fourth reliability round, each an invariant checked in-process and fast:

1. only regular files are read as images, labels and caches, by every dataset (detection, segmentation,
   classification): a FIFO named like one, listed or swapped in after the listing, is skipped or refused in one
   line, never read (a read would block for good);
2. an error raised in a DataLoader worker prints as its original one line, not the worker's folded traceback, under
   both frameworks (their own ExceptionWrapper builds the text here)."""
import os
import threading

import cv2
import numpy as np
import pytest

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")


# ---- 1. FIFOs and other special files ----------------------------------------------------------------------------
def _unblock(folder):
    """Give every FIFO under folder a writer that closes at once: a reader blocked on one sees EOF and returns."""
    for dirpath, _, names in os.walk(folder):
        for name in names:
            p = os.path.join(dirpath, name)
            if not os.path.isfile(p) and os.path.exists(p):
                try:
                    os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:  # no reader waiting on it
                    pass


def within_deadline(fn, folder, seconds=20):
    """('ok', fn()) or ('raised', exception), fn run in a thread with a deadline: a call that blocks on a FIFO fails
    the test (and is then released) instead of hanging the suite."""
    result = []

    def target():
        try:
            result.append(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            result.append(("raised", e))

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        _unblock(folder)
        t.join(5)
        pytest.fail(f"blocked for {seconds} s: a FIFO was opened as a file")
    return result[0]


def _image(path, value=100, size=(32, 48)):
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((*size, 3), value, np.uint8))
    return path


def _yolo_dataset(root, n=3):
    """root/images/{0..n-1}.jpg with one box each in root/labels/."""
    for i in range(n):
        _image(root / "images" / f"{i}.jpg", 40 * i + 20)
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"{i}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    return root


@needs_fifo
def test_label_check_refuses_fifo_image_label_and_jpeg_in_one_line(tmp_path):
    from utils.data.files import NotRegularFileError
    from utils.data.labels import _check_jpeg_end, _verify_pair
    root = _yolo_dataset(tmp_path / "d", 1)
    os.mkfifo(root / "images" / "pipe.jpg")  # swapped in after a listing: the check must not read it
    status, out = within_deadline(lambda: _verify_pair((str(root / "images" / "pipe.jpg"),
                                                        str(root / "labels" / "pipe.txt"), "p: ")), tmp_path)
    assert status == "ok" and out[0] is None and out[7] == 1, out
    assert "pipe.jpg" in out[8] and "FIFO" in out[8] and "\n" not in out[8], out[8]
    status, err = within_deadline(lambda: _check_jpeg_end(str(root / "images" / "pipe.jpg"), ""), tmp_path)
    assert status == "raised" and isinstance(err, NotRegularFileError), err
    # a FIFO label file is named (it was counted as a missing label before, and read it would block)
    (root / "labels" / "0.txt").unlink()
    os.mkfifo(root / "labels" / "0.txt")
    status, out = within_deadline(lambda: _verify_pair((str(root / "images" / "0.jpg"),
                                                        str(root / "labels" / "0.txt"), "")), tmp_path)
    assert status == "ok" and out[0] is None and str(root / "labels" / "0.txt") in out[8] and "FIFO" in out[8]
    # a regular pair still passes, with its box
    (root / "labels" / "0.txt").unlink()
    (root / "labels" / "0.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    out = _verify_pair((str(root / "images" / "0.jpg"), str(root / "labels" / "0.txt"), ""))
    assert out[0] == str(root / "images" / "0.jpg") and out[1].shape == (1, 5) and tuple(out[2]) == (48, 32)


@needs_fifo
def test_detection_and_segment_datasets_skip_or_refuse_fifos(tmp_path):
    from utils.data.dataset import LoadImagesAndLabels
    from utils.segment.dataset import LoadImagesAndSegments
    root = _yolo_dataset(tmp_path / "d", 3)
    os.mkfifo(root / "images" / "x.jpg")  # listed: skipped with a warning
    (root / "labels" / "2.txt").unlink()
    os.mkfifo(root / "labels" / "2.txt")  # its image dropped, the FIFO named
    for cls in (LoadImagesAndLabels, LoadImagesAndSegments):
        status, ds = within_deadline(lambda: cls(str(root / "images"), img_size=64, batch_size=2), tmp_path)
        assert status == "ok", ds
        assert sorted(os.path.basename(f) for f in ds.im_files) == ["0.jpg", "1.jpg"], ds.im_files
        (tmp_path / "d" / "labels.cache").unlink(missing_ok=True)
    # an image swapped for a FIFO after the scan: one line naming it when the loader reaches it
    (root / "images" / "1.jpg").unlink()
    os.mkfifo(root / "images" / "1.jpg")
    status, err = within_deadline(lambda: ds[1], tmp_path)
    assert status == "raised" and "1.jpg" in str(err) and "FIFO" in str(err) and "\n" not in str(err), err


@needs_fifo
def test_label_cache_named_by_a_fifo_is_ignored_not_read(tmp_path):
    from utils.data.label_cache import read_cache
    os.mkfifo(tmp_path / "labels.cache")
    status, out = within_deadline(lambda: read_cache(tmp_path / "labels.cache", "k", []), tmp_path)
    assert status == "ok" and out is None


@needs_fifo
def test_classification_dataset_skips_and_refuses_fifos(tmp_path):
    from utils.classify.dataset import ClassificationDataError, ClassificationDataset, read_image
    from utils.classify.npy_cache import read_image_npy
    for c in ("ant", "bee"):
        for i in range(2):
            _image(tmp_path / "d" / c / f"{i}.jpg", 50 + 60 * i)
    os.mkfifo(tmp_path / "d" / "ant" / "x.jpg")  # would hang classify/train.py's first epoch
    status, ds = within_deadline(lambda: ClassificationDataset(tmp_path / "d", imgsz=32), tmp_path)
    assert status == "ok" and len(ds) == 4, ds
    status, items = within_deadline(lambda: [ds[i] for i in range(len(ds))], tmp_path)
    assert status == "ok" and [int(y) for _, y in items] == [0, 0, 1, 1]
    # swapped in after the listing: refused in one line naming it
    (tmp_path / "d" / "bee" / "1.jpg").unlink()
    os.mkfifo(tmp_path / "d" / "bee" / "1.jpg")
    status, err = within_deadline(lambda: ds[3], tmp_path)
    assert status == "raised" and isinstance(err, ClassificationDataError), err
    assert "bee/1.jpg" in str(err) and "FIFO" in str(err) and "\n" not in str(err), err
    status, err = within_deadline(lambda: read_image(str(tmp_path / "d" / "ant" / "x.jpg")), tmp_path)
    assert status == "raised" and isinstance(err, ClassificationDataError), err
    # a FIFO at a --cache disk file's name: treated as damaged (warned), never read
    os.mkfifo(tmp_path / "x.jpg.cls.0123456789.npy")
    status, out = within_deadline(lambda: read_image_npy(tmp_path / "x.jpg.cls.0123456789.npy"), tmp_path)
    assert status == "ok" and out is None


# ---- 2. errors raised in DataLoader workers -------------------------------------------------------------------------
def _rebuilt_by_the_framework(exc):
    """exc raised, wrapped and re-raised by the running backend's own ExceptionWrapper, as a DataLoader rebuilds an
    error from one of its workers in the main process: what the main process catches."""
    import importlib

    from utils.backend import torch
    wrapper = importlib.import_module(f"{torch.__name__}._utils").ExceptionWrapper
    try:
        try:
            raise exc
        except BaseException:
            wrapped = wrapper(where="in DataLoader worker process 3")
        wrapped.reraise()
    except BaseException as e:  # noqa: BLE001 (the test looks at it)
        return e
    raise AssertionError("reraise() raised nothing")


def test_a_data_error_from_a_worker_prints_as_its_original_line():
    from utils.data.labels import LabelError
    from utils.errors import UserError, one_line, worker_original_message
    message = "train: Label class 7 exceeds nc=3 in /d/labels/a.txt, line 2 (image /d/images/a.jpg)"
    e = _rebuilt_by_the_framework(LabelError(message))
    assert type(e) is LabelError and isinstance(e, UserError)
    assert str(e) == message and one_line(e, "train") == message[len("train: "):]
    # not a UserError (the image reader's FileNotFoundError, which the entry scripts print too): one_line finds it
    message = "image /d/images/b.jpg cannot be read ([Errno 2] No such file or directory: '/d/images/b.jpg')"
    e = _rebuilt_by_the_framework(FileNotFoundError(message))
    assert type(e) is FileNotFoundError and "Traceback" in str(e) and len(str(e)) > len(message)
    assert one_line(e) == message
    # a message of several lines keeps them all (joined by one_line); chained exceptions give the last one
    e = _rebuilt_by_the_framework(ValueError("first line\nsecond: line"))
    assert worker_original_message(e) == "first line\nsecond: line" and one_line(e) == "first line second: line"
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise LabelError("outer: label file /d/x.txt") from inner
    except LabelError as chained:
        e = _rebuilt_by_the_framework(chained)
    assert str(e) == "outer: label file /d/x.txt"
    # an empty message, and text that only looks like the frameworks' (no 'Original' line) stay as they are
    assert str(_rebuilt_by_the_framework(LabelError(""))) == ""
    text = "Caught LabelError in DataLoader worker process 1. and then some"
    assert worker_original_message(text) == text and str(LabelError(text)) == text


def test_a_dataset_error_raised_in_a_real_worker_is_one_short_line(tmp_path):
    from utils.backend import torch
    from utils.data.dataset import LoadImagesAndLabels
    from utils.errors import one_line
    root = _yolo_dataset(tmp_path / "d", 2)
    ds = LoadImagesAndLabels(str(root / "images"), img_size=64, batch_size=2)
    (root / "images" / "1.jpg").write_bytes(b"")  # damaged after the scan: the worker's reader raises
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1, collate_fn=ds.collate_fn)
    with pytest.raises(FileNotFoundError) as info:
        next(iter(loader))
    assert "worker process" in str(info.value)  # rebuilt by the framework from the worker's traceback
    line = one_line(info.value)
    assert str(root / "images" / "1.jpg") in line and "Traceback" not in line and len(line) < 300, line


# ---- 3. val.py --save-txt writes each label file whole ------------------------------------------------------------
SHAPES = [((64, 64), ((1.0, 1.0), (0.0, 0.0)))]  # an original 64 x 64 image, letterboxed without change
DET = np.array([[8, 8, 24, 40, 0.9, 1]], np.float32)  # xyxy, conf, class on that image


def _validate_once(kind, save_dir, preds, paths):
    """One validation run's --save-txt over images `paths` (one per batch) with the detections `preds`."""
    from utils.evaluation.evaluator import DetectionEvaluator
    from utils.segment.evaluator import SegmentationEvaluator
    targets = np.zeros((0, 6), np.float32)
    if kind == "detect":
        ev = DetectionEvaluator(3, {0: "a", 1: "b", 2: "c"}, save_dir=save_dir, save_txt=True)
        for pred, path in zip(preds, paths):
            ev.update([pred], targets, SHAPES, (64, 64), [path])
    else:
        ev = SegmentationEvaluator(3, {0: "a", 1: "b", 2: "c"}, save_dir=save_dir, save_txt=True)
        for pred, path in zip(preds, paths):
            pred = np.concatenate([pred, np.zeros((len(pred), 32), np.float32)], 1)  # 32 mask coefficients
            ev.update([pred], np.zeros((1, 32, 16, 16), np.float32), targets, np.zeros((0, 16, 16), np.uint8),
                      SHAPES, (64, 64), [path])


@pytest.mark.parametrize("kind", ["detect", "segment"])
def test_val_save_txt_rerun_replaces_label_files_and_same_stems_do_not_merge(tmp_path, kind):
    labels = tmp_path / "exp" / "labels"
    line = "1 0.25 0.375 0.25 0.5\n"
    _validate_once(kind, tmp_path / "exp", [DET, DET[:0]], ["/d/a.jpg", "/d/none.jpg"])
    assert (labels / "a.txt").read_text() == line and not (labels / "none.txt").exists()  # no rows, no file
    # the same run folder again (--exist-ok): a.txt replaced, not appended to; b gets no rows now: an empty file
    (labels / "b.txt").write_text("0 0.5 0.5 0.1 0.1\n")  # an earlier run's file
    _validate_once(kind, tmp_path / "exp", [DET, DET[:0]], ["/d/a.jpg", "/d/b.jpg"])
    assert (labels / "a.txt").read_text() == line and (labels / "b.txt").read_text() == ""
    # two images of one run with one stem: each keeps its rows
    _validate_once(kind, tmp_path / "exp2", [DET, DET[:0], DET], ["/d/x/0001.jpg", "/d/y/0001.jpg", "/d/z/0001.png"])
    assert sorted(p.name for p in (tmp_path / "exp2" / "labels").iterdir()) == ["0001.txt", "0001_2.txt"]
    assert all(p.read_text() == line for p in (tmp_path / "exp2" / "labels").iterdir())


def test_val_save_one_txt_writes_the_file_whole(tmp_path):
    import val
    f = tmp_path / "a.txt"
    f.write_text("0 0.5 0.5 0.1 0.1\n")
    val.save_one_txt(DET, False, (64, 64), f)
    assert f.read_text() == "1 0.25 0.375 0.25 0.5\n"


# ---- 4. children end with their parent ------------------------------------------------------------------------------
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

LOADER_PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
from utils.backend import torch
from utils.data.sampler import SeedWorker

class Slow(torch.utils.data.Dataset):  # a worker stuck in a read, as on a hung share or a FIFO
    def __len__(self):
        return 4
    def __getitem__(self, i):
        print("child", os.getpid(), flush=True)
        time.sleep(300)
        return i

next(iter(torch.utils.data.DataLoader(Slow(), batch_size=1, num_workers=1, worker_init_fn=SeedWorker(0, 0))))
"""

DOWNLOAD_PARENT = """
import sys
sys.path.insert(0, {root!r})
from utils.dataset_config import run_download
run_download("bash -c 'echo child $$; exec sleep 300'", {{}}, {tmp!r})
"""


def _alive(pid):
    """pid runs (a zombie left to a reaper that never comes counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def _child_outlives_killed_parent(code, seconds=5):
    """Run parent `code`, which prints 'child <pid>' once its child runs; SIGKILL the parent; True when the child
    still runs `seconds` later (it is then killed here)."""
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env={**os.environ, "YOLO_QUIET": "1"})
    child = None
    try:
        deadline = time.monotonic() + 120
        for line in parent.stdout:  # the framework's import takes seconds
            if line.startswith("child "):
                child = int(line.split()[1])
                break
            assert time.monotonic() < deadline
        assert child, "the parent never started its child"
        parent.kill()  # as the OOM killer does: the parent runs nothing more
        parent.wait()
        end = time.monotonic() + seconds
        while _alive(child) and time.monotonic() < end:
            time.sleep(0.1)
        return _alive(child)
    finally:
        parent.kill()
        parent.wait()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's")
def test_a_loader_worker_ends_with_its_sigkilled_parent():
    assert not _child_outlives_killed_parent(LOADER_PARENT.format(root=str(ROOT)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's")
def test_a_consented_download_script_ends_with_its_sigkilled_parent(tmp_path):
    assert not _child_outlives_killed_parent(DOWNLOAD_PARENT.format(root=str(ROOT), tmp=str(tmp_path)))


FORKS = """
import os, sys, threading
sys.path.insert(0, {root!r})
from utils.child_processes import forked_by_main_thread

def fork_and_report():
    pid = os.fork()
    if pid == 0:
        os._exit(int(forked_by_main_thread()))
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

out = [fork_and_report()]
t = threading.Thread(target=lambda: out.append(fork_and_report()))
t.start(); t.join()
print(out)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_child_knows_whether_the_main_thread_forked_it():
    """A loader iterated in a helper thread forks its workers there: the death signal would follow that thread, so
    such a worker watches its parent's pid instead."""
    p = subprocess.run([sys.executable, "-c", FORKS.format(root=str(ROOT))], capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.strip() == "[1, 0]", p.stdout + p.stderr


def test_a_guarded_program_keeps_its_exit_status_output_and_name(tmp_path):
    from utils.child_processes import run_ending_with_parent
    p = run_ending_with_parent(["/bin/sh", "-c", "echo out; exit 3"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 3 and p.stdout == "out\n" and p.args == ["/bin/sh", "-c", "echo out; exit 3"]
    with pytest.raises(subprocess.CalledProcessError, match=r"\['/bin/sh', '-c', 'exit 4'\].*status 4"):
        run_ending_with_parent(["/bin/sh", "-c", "exit 4"], check=True)
