"""Nothing the user owns is lost: exports, training outputs and plots are written through utils/atomic_files.py, so a
failed or refused write leaves what was there byte for byte and says one line naming the file.

Exports run in process on yolov5n.pt at 64 px (seconds each; PyTorch environment). The other writers are driven with
a fault injected into atomic_files._before_write: the k-th write (or the write of one named file) raises
OSError(ENOSPC), as a full disk does."""
import errno
import shutil
from pathlib import Path

import numpy as np
import pytest

from utils.backend import IS_TORCH

TEMP_MARK = "yolo-partial"
torch_only = pytest.mark.skipif(not IS_TORCH, reason="exports run in the PyTorch environment")


# ---------------------------------------------------------------------------------------------------------- helpers
def snapshot(folder):
    """{relative path: bytes} of every file under folder: what must come out of a failed write unchanged."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def temp_files(folder):
    return [p for p in Path(folder).rglob("*") if TEMP_MARK in p.name]


def fail_writes(monkeypatch, k=1, match=None, err=errno.ENOSPC):
    """From now on the k-th write (counting only writes whose path contains `match`) raises OSError(err). Returns
    the list of paths announced so far, to check the fault was reached."""
    import utils.atomic_files as af
    seen = []

    def before_write(path):
        if match is None or match in str(path):
            seen.append(Path(path))
            if len(seen) == k:
                raise OSError(err, "No space left on device")
    monkeypatch.setattr(af, "_before_write", before_write)
    return seen


# ---------------------------------------------------------------------------------------------------------- exports
@pytest.fixture(scope="module")
def first_export(yolov5n_pt, tmp_path_factory):
    """An earlier good export (ONNX and OpenVINO at 64 px) with a file the user put in the model folder."""
    if not IS_TORCH:
        pytest.skip("exports run in the PyTorch environment")
    pytest.importorskip("openvino")
    import export
    d = tmp_path_factory.mktemp("first_export")
    shutil.copy(yolov5n_pt, d / "yolov5n.pt")
    written, failed, _ = export.export_checkpoint(d / "yolov5n.pt", imgsz=[64], include=("onnx", "openvino"))
    assert not failed and len(written) == 2
    (d / "yolov5n_openvino_model" / "notes.txt").write_text("the user's own notes")
    return d


@pytest.fixture
def exported(first_export, tmp_path):
    """A private copy of the earlier export, for a test to re-export over."""
    d = tmp_path / "w"
    shutil.copytree(first_export, d)
    return d


@torch_only
def test_refused_onnx_reexport_leaves_the_earlier_file(exported, log_lines):
    """--opset 99 is refused before anything is written (it used to delete the earlier yolov5n.onnx)."""
    import export
    before = snapshot(exported)
    written, failed, _ = export.export_checkpoint(exported / "yolov5n.pt", imgsz=[64], include=("onnx",), opset=99)
    assert written == [] and failed == ["onnx"]
    assert snapshot(exported) == before and not temp_files(exported)
    lines = [ln for ln in log_lines if "failure" in ln]
    assert len(lines) == 1 and "ONNX" in lines[0] and "--opset 99" in lines[0] and "\n" not in lines[0]


@torch_only
def test_onnx_export_failing_mid_write_leaves_the_earlier_file(exported, monkeypatch, log_lines):
    """A failure after the exporter wrote its temporary file (the checker refusing it) removes only that file."""
    import onnx

    import export

    def refuse(model, *a, **kw):
        raise onnx.checker.ValidationError("injected: the checker refuses the graph")
    monkeypatch.setattr(onnx.checker, "check_model", refuse)
    before = snapshot(exported)
    written, failed, _ = export.export_checkpoint(exported / "yolov5n.pt", imgsz=[64], include=("onnx",))
    assert written == [] and failed == ["onnx"]
    assert snapshot(exported) == before and not temp_files(exported)
    assert [ln for ln in log_lines if "failure" in ln and "injected" in ln]


@torch_only
@pytest.mark.parametrize("k", [1, 4, 5])
def test_openvino_export_failing_on_its_kth_file_leaves_the_folder(exported, monkeypatch, k):
    """A full disk at the folder's first write, or at the rename of its .xml or .yaml (the writes are: the folder,
    the metadata in the temporary folder, then .bin, .xml, .yaml renamed in) leaves every file as it was: files
    already renamed in are put back, never half old, half new."""
    import export
    before = snapshot(exported)
    seen = fail_writes(monkeypatch, k=k, match="_openvino_model")
    written, failed, _ = export.export_checkpoint(exported / "yolov5n.pt", imgsz=[64], include=("openvino",))
    assert len(seen) == k and failed == ["openvino"] and written == []
    assert snapshot(exported) == before and not temp_files(exported)


@torch_only
def test_refused_openvino_int8_touches_nothing(exported, log_lines):
    """--include openvino --int8 is refused before anything is written: the earlier folder, the user's file in it
    and the earlier .onnx stay (it used to delete the whole folder)."""
    import export
    before = snapshot(exported)
    written, failed, _ = export.export_checkpoint(exported / "yolov5n.pt", imgsz=[64], include=("openvino",),
                                                  int8=True)
    assert written == [] and failed == ["openvino"]
    assert snapshot(exported) == before
    lines = [ln for ln in log_lines if "failure" in ln]
    assert len(lines) == 1 and "OpenVINO" in lines[0] and "--int8" in lines[0]


@torch_only
def test_reexport_replaces_the_model_and_keeps_the_users_file(exported):
    """A successful re-export renames the new model files in; the user's extra file stays; the earlier .onnx is not
    rewritten by an --include openvino export (its ONNX is made in a temporary folder)."""
    import export
    before = snapshot(exported)
    xml = exported / "yolov5n_openvino_model" / "yolov5n.xml"
    xml.write_text("<damaged/>")  # so that the re-export visibly replaces it
    written, failed, _ = export.export_checkpoint(exported / "yolov5n.pt", imgsz=[64], include=("openvino",))
    assert not failed and written == [str(exported / "yolov5n_openvino_model")]
    after = snapshot(exported)
    assert after["yolov5n_openvino_model/notes.txt"] == b"the user's own notes"
    assert after["yolov5n_openvino_model/yolov5n.xml"].startswith(b"<?xml") and b"<net " in \
        after["yolov5n_openvino_model/yolov5n.xml"]  # a model again (the converter numbers nodes differently)
    assert after["yolov5n.onnx"] == before["yolov5n.onnx"]
    assert set(after) == set(before) and not temp_files(exported)


@torch_only
def test_export_cli_refusal_is_one_line_and_exit_1(exported):
    """export.py's main: a refused format is one line with the reason, then the closing line; exit status 1."""
    import export
    from utils.errors import UserError
    before = snapshot(exported)
    with pytest.raises(UserError, match="not written: onnx"):
        export.main(export.parse_opt(["--weights", str(exported / "yolov5n.pt"), "--img", "64", "--include", "onnx",
                                      "--opset", "99"]))
    assert snapshot(exported) == before


def test_output_folder_puts_back_what_a_failed_rename_replaced(tmp_path, monkeypatch):
    """utils/atomic_files.output_folder on its own: the third of three renames fails; the two files already renamed
    in are put back, the new sub-folder removed, the user's file untouched."""
    from utils.atomic_files import OutputWriteError, output_folder
    d = tmp_path / "model"
    d.mkdir()
    for name, text in (("a.bin", "old a"), ("b.xml", "old b"), ("notes.txt", "mine")):
        (d / name).write_text(text)
    before = snapshot(d)
    fail_writes(monkeypatch, k=4)  # 1: the folder, 2-4: a.bin, b.xml, sub/c.txt
    with pytest.raises(OutputWriteError, match="model"):
        with output_folder(d) as tmp:
            for name in ("a.bin", "b.xml", "sub/c.txt"):
                (tmp / name).parent.mkdir(exist_ok=True)
                (tmp / name).write_text("new " + name)
    assert snapshot(d) == before and not (d / "sub").exists() and not temp_files(tmp_path)


# --------------------------------------------------------------------------------------------------- training files
def test_results_csv_full_disk_leaves_the_previous_file(tmp_path, monkeypatch):
    from utils.loggers import ResultsWriteError, Loggers
    lg = Loggers(tmp_path, include=())
    for epoch in range(2):
        lg.on_fit_epoch_end([0.1 * epoch] * 13, epoch)
    before = snapshot(tmp_path)
    seen = fail_writes(monkeypatch, k=1)
    with pytest.raises(ResultsWriteError) as e:
        lg.on_fit_epoch_end([0.3] * 13, 2)
    assert seen == [tmp_path / "results.csv"]
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "results.csv") in msg and "No space left" in msg
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)


def test_ndjson_full_disk_leaves_the_previous_file(tmp_path, monkeypatch):
    from utils.atomic_files import OutputWriteError
    from utils.loggers import KEYS, Loggers
    from utils.loggers.options import LogOptions
    lg = Loggers(tmp_path, LogOptions(ndjson_file=True), include=())
    lg.on_fit_epoch_end([0.1] * len(KEYS), 0)
    before = (tmp_path / "results.ndjson").read_bytes()
    fail_writes(monkeypatch, k=1, match="results.ndjson")
    with pytest.raises(OutputWriteError) as e:
        lg.on_fit_epoch_end([0.2] * len(KEYS), 1)
    assert "results.ndjson" in str(e.value) and "\n" not in str(e.value)
    assert (tmp_path / "results.ndjson").read_bytes() == before and not temp_files(tmp_path)


def test_new_run_replaces_an_old_results_csv_with_its_first_row_only(tmp_path, monkeypatch):
    """--exist-ok: a new run's results.csv starts fresh, but the earlier one is kept until that first row is
    written (a run that stops before its first epoch, or whose first write fails, leaves it)."""
    from utils.loggers import Loggers, ResultsWriteError, read_results_csv
    from utils.loggers.options import LogOptions
    old = Loggers(tmp_path, include=())
    for epoch in range(3):
        old.on_fit_epoch_end([0.5] * 13, epoch)
    before = snapshot(tmp_path)
    new = Loggers(tmp_path, LogOptions(resume=False), include=())
    assert snapshot(tmp_path) == before  # nothing deleted at the start
    with monkeypatch.context() as m:
        fail_writes(m, k=1)
        with pytest.raises(ResultsWriteError):
            new.on_fit_epoch_end([0.9] * 13, 0)
    assert snapshot(tmp_path) == before
    new.on_fit_epoch_end([0.9] * 13, 0)
    new.on_fit_epoch_end([0.8] * 13, 1)
    assert [r["epoch"] for r in read_results_csv(tmp_path / "results.csv")] == [0, 1]
    resumed = Loggers(tmp_path, LogOptions(resume=True), include=())
    resumed.on_fit_epoch_end([0.7] * 13, 2)  # a resumed run appends
    assert [r["epoch"] for r in read_results_csv(tmp_path / "results.csv")] == [0, 1, 2]


def test_checkpoint_full_disk_stops_in_one_line_and_keeps_last_pt(tmp_path, monkeypatch):
    """The training loop's save: an OutputWriteError becomes the trainer's one-line error naming last.pt; the
    previous last.pt is byte-identical and no temporary file stays."""
    from utils.checkpoint.zip_writer import atomic_write
    from utils.engine.errors import TrainingError
    from utils.engine.hooks import save_ckpt
    from utils.errors import UserError
    last = tmp_path / "weights" / "last.pt"
    atomic_write(last, lambda f: f.write(b"PK\x03\x04 the previous checkpoint"))
    before = snapshot(tmp_path)
    fail_writes(monkeypatch, k=1)
    with pytest.raises(TrainingError) as e:
        save_ckpt({"epoch": 3}, last)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value) and str(last) in str(e.value)
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)


def test_checkpoint_killed_mid_write_leaves_a_temp_name_of_the_exact_shape(tmp_path):
    """A write that raises half way through (a full disk inside the zip writer) leaves last.pt whole; while it runs
    the data goes to last.pt.<host>.<pid>.yolo-partial.pt, the shape run-folder clean-up removes."""
    import os

    from utils.atomic_files import OutputWriteError, is_stale_temp_file
    from utils.checkpoint.zip_writer import atomic_write
    last = tmp_path / "last.pt"
    last.write_bytes(b"previous")
    names = []

    def half(f):
        names.append(Path(f.name).name)
        f.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(OutputWriteError, match="last.pt"):
        atomic_write(last, half)
    assert last.read_bytes() == b"previous" and not temp_files(tmp_path)
    (name,) = names
    assert name.startswith("last.pt.") and name.endswith(f".{os.getpid()}.{TEMP_MARK}.pt")
    assert not is_stale_temp_file(tmp_path / name)  # this process is alive: never someone else's to remove


# ------------------------------------------------------------------------------------------------- plots and files
def _results_csv(folder):
    from utils.loggers import Loggers
    lg = Loggers(folder, include=())
    for epoch in range(3):
        lg.on_fit_epoch_end([0.1 * (epoch + 1)] * 13, epoch)


def _draw_results(folder):
    from utils.plots import plot_results
    plot_results(file=folder / "results.csv")


def _draw_labels(folder):
    from utils.plots import plot_labels
    rng = np.random.default_rng(0)
    labels = np.concatenate([rng.integers(0, 3, (20, 1)), rng.uniform(0.2, 0.5, (20, 4))], 1)
    plot_labels(labels, names=["a", "b", "c"], save_dir=folder)


def _draw_batch(folder):
    from utils.plots import plot_images
    images = np.full((2, 3, 64, 64), 128, np.uint8)
    targets = np.array([[0, 1, 0.5, 0.5, 0.2, 0.2], [1, 0, 0.3, 0.3, 0.1, 0.2]], np.float32)
    plot_images(images, targets, fname=folder / "train_batch0.jpg", names=["a", "b"])


def _draw_classify_batch(folder):
    from utils.classify.plots import plot_classification_batch
    plot_classification_batch(np.full((4, 3, 32, 32), 90, np.uint8), [0, 1, 0, 1], None,
                              folder / "train_images.jpg", names=["cat", "dog"])


def _draw_evolve(folder):
    from utils.evolve import record
    from utils.plots import plot_evolve
    for i in range(3):
        record([0.5, 0.5, 0.4 + i / 10, 0.2, 0.1, 0.1, 0.1], {"lr0": 0.01 * (i + 1), "momentum": 0.9}, folder)
    plot_evolve(folder / "evolve.csv")


DRAWINGS = {"results.png": _draw_results, "labels.jpg": _draw_labels, "train_batch0.jpg": _draw_batch,
            "train_images.jpg": _draw_classify_batch, "evolve.png": _draw_evolve}


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_plot_full_disk_leaves_the_previous_picture(name, tmp_path, monkeypatch):
    """Each picture drawn a second time onto a full disk: the first one stays byte for byte, the error names it."""
    from utils.atomic_files import OutputWriteError
    _results_csv(tmp_path)
    DRAWINGS[name](tmp_path)
    assert (tmp_path / name).stat().st_size > 0
    before = snapshot(tmp_path)
    seen = fail_writes(monkeypatch, k=1, match=name)
    with pytest.raises(OutputWriteError) as e:
        DRAWINGS[name](tmp_path)
    assert seen and name in str(e.value) and "\n" not in str(e.value)
    after = snapshot(tmp_path)
    assert after[name] == before[name] and not temp_files(tmp_path)


def test_evolve_files_full_disk_keep_the_previous_rows(tmp_path, monkeypatch):
    """evolve.csv is appended by rewriting it whole: a failed append leaves every earlier row and no half row;
    a failed hyp_evolve.yaml leaves the earlier one."""
    from utils.atomic_files import OutputWriteError
    from utils.evolve import read_evolve_csv, record
    hyp = {"lr0": 0.01, "momentum": 0.9}
    for i in range(2):
        record([0.5, 0.5, 0.4, 0.2 + i / 10, 0.1, 0.1, 0.1], hyp, tmp_path)
    before = snapshot(tmp_path)
    for k, name in ((1, "evolve.csv"), (2, "hyp_evolve.yaml")):
        with monkeypatch.context() as m:
            seen = fail_writes(m, k=k)
            with pytest.raises(OutputWriteError, match=name):
                record([0.6, 0.6, 0.6, 0.6, 0.1, 0.1, 0.1], hyp, tmp_path)
        assert seen[-1].name == name
        assert (tmp_path / name).read_bytes() == before[name] and not temp_files(tmp_path)
        if name == "evolve.csv":
            assert snapshot(tmp_path) == before
    assert len(read_evolve_csv(tmp_path / "evolve.csv")[1]) == 3  # the second try's row, once


def test_coco_json_full_disk_leaves_the_previous_predictions(tmp_path, monkeypatch):
    from utils.atomic_files import OutputWriteError
    from utils.evaluation.coco_json import CocoPredictions
    preds = CocoPredictions(tmp_path, "yolov5n")
    preds.add(np.array([[10, 10, 50, 60, 0.9, 0]], np.float32), "images/000000000009.jpg")
    preds.save_and_evaluate()
    before = snapshot(tmp_path)
    preds.add(np.array([[1, 1, 5, 6, 0.5, 1]], np.float32), "images/000000000010.jpg")
    fail_writes(monkeypatch, k=1)
    with pytest.raises(OutputWriteError, match="yolov5n_predictions.json"):
        preds.save_and_evaluate()
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)
