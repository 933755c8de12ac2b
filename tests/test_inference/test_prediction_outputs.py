"""What the prediction scripts and the hub write: names that never collide (sources with one file name, crops past
any counter), reruns that replace instead of appending (--exist-ok), and a write that fails stopping with one line
naming the path instead of "Results saved" over nothing."""
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import utils.atomic_files as atomic_files
from utils.atomic_files import OutputWriteError, TEMP_MARK
from utils.inference.outputs import DetectionOutputs, OutputNames

# The names, reruns and failed writes are the writers' (framework-free); the scripts' model call under OneFlow runs in
# test_detect.py (the segment and classify predict scripts': test_export_tasks.py's scripts on the .pt)
pytestmark = pytest.mark.oneflow_covered_by(
    "tests/test_scripts/test_detect.py::test_annotated_images_and_labels_written")

ROOT = Path(__file__).resolve().parents[2]
IMGSZ = (256, 256)
GIRAFFE, ZEBRA = "000000000025", "000000000034"  # one animal each, found by yolov5n at 256


@pytest.fixture(scope="module")
def cams(tmp_path_factory, coco128_dir):
    """cam1/0001.jpg (a giraffe) and cam2/0001.jpg (a zebra): two sources with one file name."""
    d = tmp_path_factory.mktemp("cams")
    for cam, stem in (("cam1", GIRAFFE), ("cam2", ZEBRA)):
        (d / cam).mkdir()
        shutil.copy(coco128_dir / "images" / "train2017" / f"{stem}.jpg", d / cam / "0001.jpg")
    return d


def _detect(weights, source, project, **kw):
    import detect
    return detect.run(weights=[str(weights)], source=str(source), imgsz=IMGSZ, project=project, name="exp", **kw)


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())


def _logged(caplog):
    return "\n".join(r.getMessage() for r in caplog.records)


@pytest.fixture
def project_log(caplog):
    """caplog that sees the project's logger (it does not propagate by default)."""
    from utils.log import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True
    with caplog.at_level("INFO", logger="yolov5"):
        yield caplog
    LOGGER.propagate = propagate


# ---------------------------------------------------------------- the layout (no model)

def test_flat_names_when_no_two_sources_share_a_stem():
    names = OutputNames(["/data/a/x.jpg", "/data/b/y.png"])
    assert names.of(0, "/data/a/x.jpg") == (Path("x.jpg"), "x")
    assert names.of(0, "/data/b/y.png") == (Path("y.png"), "y")


def test_sources_sharing_a_stem_keep_their_relative_paths():
    names = OutputNames(["/data/cams/cam1/0001.jpg", "/data/cams/cam2/0001.jpg", "/data/cams/cam2/0002.jpg"])
    assert names.of(0, "/data/cams/cam1/0001.jpg") == (Path("cam1/0001.jpg"), "cam1/0001")
    assert names.of(0, "/data/cams/cam2/0001.jpg") == (Path("cam2/0001.jpg"), "cam2/0001")
    assert names.of(0, "/data/cams/cam2/0002.jpg") == (Path("cam2/0002.jpg"), "cam2/0002")  # the whole run switches


def test_one_stem_in_one_folder_keeps_the_extension_and_streams_get_their_number():
    names = OutputNames(["/d/x.jpg", "/d/x.png", "/d/x.mp4"])
    stems = {names.of(0, f"/d/x.{e}")[1] for e in ("jpg", "png", "mp4")}
    assert stems == {"x.jpg", "x.png", "x.mp4"}  # labels/x.jpg.txt, ... and the video x.mp4.mp4: no two alike
    streams = OutputNames(["rtsp___a_live", "rtsp___b_live", "0"], stream=True)
    assert [streams.of(i, "ignored")[1] for i in range(3)] == ["rtsp___a_live", "rtsp___b_live", "0"]
    streams = OutputNames(["http://a/live", "http://b/live"], stream=True)
    assert [streams.of(i, "live")[1] for i in range(2)] == ["live_0", "live_1"]


# ---------------------------------------------------------------- detect.py runs

def test_two_sources_with_one_name_give_two_pictures_and_two_label_files(cams, yolov5n_pt, tmp_path):
    save_dir = _detect(yolov5n_pt, cams / "*" / "0001.jpg", tmp_path, save_txt=True, save_crop=True)
    assert (save_dir / "cam1" / "0001.jpg").is_file() and (save_dir / "cam2" / "0001.jpg").is_file()
    assert not (save_dir / "0001.jpg").exists()
    for cam in ("cam1", "cam2"):  # each picture is its own image, drawn on
        out, src = cv2.imread(str(save_dir / cam / "0001.jpg")), cv2.imread(str(cams / cam / "0001.jpg"))
        assert out.shape == src.shape and np.abs(out.astype(int) - src).sum() > 0
    cam1 = np.loadtxt(save_dir / "labels" / "cam1" / "0001.txt", ndmin=2)
    cam2 = np.loadtxt(save_dir / "labels" / "cam2" / "0001.txt", ndmin=2)
    assert 23 in cam1[:, 0] and 22 not in cam1[:, 0]  # the giraffe's file has the giraffe only
    assert 22 in cam2[:, 0] and 23 not in cam2[:, 0]  # the zebra's the zebra
    crops = {str(p.relative_to(save_dir / "crops")) for p in (save_dir / "crops").rglob("*.jpg")}
    assert {"giraffe/cam1/0001.jpg", "zebra/cam2/0001.jpg"} <= crops


def test_a_txt_list_with_one_name_twice_gives_two_label_files(cams, yolov5n_pt, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text(f"{cams / 'cam1' / '0001.jpg'}\n{cams / 'cam2' / '0001.jpg'}\n")
    save_dir = _detect(yolov5n_pt, listing, tmp_path / "runs", save_txt=True)
    assert _files(save_dir / "labels") == ["cam1/0001.txt", "cam2/0001.txt"]


def test_one_folder_keeps_the_flat_ultralytics_layout(cams, yolov5n_pt, tmp_path):
    save_dir = _detect(yolov5n_pt, cams / "cam1", tmp_path, save_txt=True)
    assert _files(save_dir) == ["0001.jpg", "labels/0001.txt"]


def test_exist_ok_rerun_replaces_labels_and_predictions_instead_of_appending(cams, yolov5n_pt, tmp_path, project_log):
    kw = dict(save_txt=True, save_csv=True, save_conf=True, exist_ok=True)
    first = _detect(yolov5n_pt, cams / "*" / "0001.jpg", tmp_path, **kw)
    once = {f: (first / f).read_text() for f in _files(first) if f.endswith((".txt", ".csv"))}
    assert len(once) == 3 and all(once.values())
    second = _detect(yolov5n_pt, cams / "*" / "0001.jpg", tmp_path, **kw)
    assert second == first
    assert {f: (first / f).read_text() for f in once} == once  # equal to one run's rows, not doubled
    assert "2 labels saved" in _logged(project_log)
    # a rerun that finds nothing leaves no earlier run's rows behind
    _detect(yolov5n_pt, cams / "*" / "0001.jpg", tmp_path, conf_thres=0.99, **kw)
    assert (first / "labels" / "cam1" / "0001.txt").read_text() == ""
    assert not [f for f in _files(first) if TEMP_MARK in f]


def test_crops_past_any_counter_never_overwrite(tmp_path):
    """ultralytics numbered crops up to 9999 and then wrote every further crop over one old file."""
    from utils.plots import save_one_box
    folder = tmp_path / "crops" / "person"
    folder.mkdir(parents=True)
    old = [folder / "x.jpg"] + [folder / f"x-{n}.jpg" for n in range(2, 10001)]
    old[0].write_bytes(b"an old crop")
    for f in old[1:]:
        os.link(old[0], f)  # 10,000 names of one file: quick to make, and a name written over gets a new inode
    inode = old[0].stat().st_ino
    im = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    crop = save_one_box([4, 4, 40, 40], im, file=folder / "x.jpg", BGR=True)
    save_one_box([4, 4, 40, 40], im, file=folder / "x.png", BGR=True)  # saved as a JPEG: never over x.jpg either
    assert all(f.stat().st_ino == inode for f in old) and old[0].read_bytes() == b"an old crop"  # all as they were
    new = sorted(set(folder.iterdir()) - set(old))
    assert [f.name for f in new] == ["x-10001.jpg", "x-10002.jpg"]
    assert all(cv2.imread(str(f)).shape == crop.shape for f in new)  # whole crops


def test_many_crops_of_one_stem_in_one_run_all_stay(tmp_path):
    out = DetectionOutputs(tmp_path, {0: "person"}, save_img=False, save_crop=True, sources=["/v/clip.mp4"])
    im = np.full((64, 64, 3), 90, np.uint8)
    det = np.array([[4, 4, 30, 30, 0.9, 0], [20, 20, 60, 60, 0.8, 0]], np.float32)
    with out:
        for frame in range(1, 31):  # a video's frames: one stem
            out.write(0, Path("/v/clip.mp4"), im, det.copy(), frame, "video", None)
    crops = sorted(p.name for p in (tmp_path / "crops" / "person").iterdir())
    assert len(crops) == 60 and "clip.jpg" in crops and "clip-60.jpg" in crops and out.saved == 60


# ---------------------------------------------------------------- failures: one line, nothing claimed

def _read_only(path):
    raise OSError(errno.EROFS, "Read-only file system")


@pytest.mark.parametrize("fault", ["read-only", "imwrite-false"])
def test_a_failed_image_write_stops_with_one_line_and_no_results_saved(cams, yolov5n_pt, tmp_path, monkeypatch,
                                                                       project_log, fault):
    if fault == "read-only":  # tests run as root, so a chmod would not stop the write: the module's fault hook does
        monkeypatch.setattr(atomic_files, "_before_write", _read_only)
    else:  # OpenCV reports a failed write by returning False
        monkeypatch.setattr(cv2, "imwrite", lambda *a, **k: False)
    with pytest.raises(OutputWriteError) as e:
        _detect(yolov5n_pt, cams / "cam1", tmp_path, save_txt=True)
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "exp") in msg and "0001" in msg
    assert ("read-only" in msg) if fault == "read-only" else ("OpenCV" in msg)
    assert "Results saved" not in _logged(project_log)
    assert not [f for f in _files(tmp_path) if TEMP_MARK in f]


def test_a_failed_label_write_is_one_line_not_a_traceback(cams, yolov5n_pt, tmp_path, monkeypatch):
    def labels_read_only(path):
        if path.suffix == ".txt":
            _read_only(path)
    monkeypatch.setattr(atomic_files, "_before_write", labels_read_only)
    with pytest.raises(OutputWriteError, match=r"could not write .*labels.*0001\.txt: the file system is read-only"):
        _detect(yolov5n_pt, cams / "cam1", tmp_path, save_txt=True, nosave=True)


def test_predictions_csv_is_this_runs_own_and_fails_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "predictions.csv").write_text("Image Name,Prediction,Confidence\nold.jpg,cat,0.50\n")
    im, det = np.full((64, 64, 3), 90, np.uint8), np.array([[4, 4, 30, 30, 0.9, 0]], np.float32)
    out = DetectionOutputs(tmp_path, {0: "person"}, save_img=False, save_csv=True)
    with out:
        out.write(0, Path("/d/a.jpg"), im, det.copy(), 0, "image", None)
        assert "old.jpg" in (tmp_path / "predictions.csv").read_text()  # replaced only when this run's is whole
    assert (tmp_path / "predictions.csv").read_text().splitlines() == ["Image Name,Prediction,Confidence",
                                                                      "a.jpg,person,0.90"]
    monkeypatch.setattr(atomic_files, "_before_write", _read_only)
    out = DetectionOutputs(tmp_path, {0: "person"}, save_img=False, save_csv=True)
    with pytest.raises(OutputWriteError, match=r"predictions\.csv: the file system is read-only"):
        with out:
            out.write(0, Path("/d/b.jpg"), im, det.copy(), 0, "image", None)
    assert "a.jpg" in (tmp_path / "predictions.csv").read_text()


def test_video_written_under_a_temporary_name_and_a_writer_that_cannot_open_is_one_line(tmp_path, monkeypatch):
    im = np.full((64, 96, 3), 90, np.uint8)
    out = DetectionOutputs(tmp_path, {0: "x"}, sources=["/v/clip.avi"])
    with out:
        for frame in range(1, 4):
            out.write(0, Path("/v/clip.avi"), im.copy(), np.zeros((0, 6), np.float32), frame, "stream", None)
        assert not (tmp_path / "clip.mp4").exists()  # only a finished video takes its name
    assert _files(tmp_path) == ["clip.mp4"] and out.saved == 1

    class ClosedWriter:
        def __init__(self, *a, **k):
            pass

        def isOpened(self):
            return False
    monkeypatch.setattr(cv2, "VideoWriter", ClosedWriter)
    out = DetectionOutputs(tmp_path / "b", {0: "x"}, sources=["/v/clip.avi"])
    with pytest.raises(OutputWriteError, match=r"could not write .*clip\.mp4: .*video writer") as e:
        with out:
            out.write(0, Path("/v/clip.avi"), im.copy(), np.zeros((0, 6), np.float32), 1, "stream", None)
    assert "\n" not in str(e.value) and _files(tmp_path / "b") == []  # its temporary file removed


@pytest.mark.parametrize("script", ["segment", "classify"])
def test_segment_and_classify_predict_fail_in_one_line(script, shared_dir, cams, tmp_path, monkeypatch):
    monkeypatch.setattr(cv2, "imwrite", lambda *a, **k: False)
    if script == "segment":
        from segment.predict import run
        weights, kw = "yolov5n-seg-coco128.pt", dict(imgsz=(128, 128))
    else:
        from classify.predict import run
        weights, kw = "yolov5n-cls-coco128cls.pt", dict(imgsz=(64, 64))
    with pytest.raises(OutputWriteError, match=r"could not write .*0001\.jpg: OpenCV") as e:
        run(weights=shared_dir / "weights" / weights, source=cams / "cam1", project=tmp_path, name="p", **kw)
    assert "\n" not in str(e.value)


def test_segment_and_classify_labels_are_replaced_on_rerun(shared_dir, cams, tmp_path):
    from classify.predict import run
    kw = dict(weights=shared_dir / "weights" / "yolov5n-cls-coco128cls.pt", source=cams / "*" / "0001.jpg",
              imgsz=(64, 64), project=tmp_path, name="p", save_txt=True, exist_ok=True, nosave=True)
    save_dir = run(**kw)
    once = (save_dir / "labels" / "cam1" / "0001.txt").read_text()
    run(**kw)
    assert (save_dir / "labels" / "cam1" / "0001.txt").read_text() == once and len(once.splitlines()) == 5
    assert _files(save_dir) == ["labels/cam1/0001.txt", "labels/cam2/0001.txt"]


@pytest.mark.slow
def test_detect_on_a_read_only_folder_exits_1_with_one_line(cams, yolov5n_pt, tmp_path):
    """As a process: one line naming the file, exit status 1, no traceback and no 'Results saved'."""
    code = (
        "import errno, runpy, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import utils.atomic_files as af\n"
        "def read_only(path):\n"
        "    raise OSError(errno.EROFS, 'Read-only file system')\n"
        "af._before_write = read_only\n"
        f"sys.argv = ['detect.py', '--weights', {str(yolov5n_pt)!r}, '--source', {str(cams / 'cam1')!r},\n"
        f"            '--imgsz', '128', '--project', {str(tmp_path / 'runs')!r}, '--save-txt']\n"
        f"runpy.run_path({str(ROOT / 'detect.py')!r}, run_name='__main__')\n")
    env = {**os.environ, "YOLO_QUIET": "0"}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    text = p.stdout + p.stderr
    assert p.returncode == 1, text
    lines = [ln for ln in text.splitlines() if "could not write" in ln]
    assert len(lines) == 1 and "exp/labels/0001.txt" in lines[0] and "read-only" in lines[0], text
    assert "Traceback" not in text and "Results saved" not in text


# ---------------------------------------------------------------- the hub's Detections.save / crop

def _detections(files):
    from models.autoshape import Detections
    from utils.backend import from_numpy
    ims = [np.full((64, 64, 3), 40 * (k + 1), np.uint8) for k in range(len(files))]
    pred = [from_numpy(np.array([[4, 4, 40, 40, 0.9, 0]], np.float32)) for _ in files]
    return Detections(ims, pred, list(files), names={0: "person"}, shape=(1, 3, 64, 64))


def test_hub_save_keeps_two_inputs_with_one_name_and_crops_stay_unique(tmp_path):
    d = _detections(["x.jpg", "x.jpg"])
    d.save(save_dir=tmp_path / "exp", exist_ok=True)
    a, b = cv2.imread(str(tmp_path / "exp" / "x.jpg")), cv2.imread(str(tmp_path / "exp" / "x2.jpg"))
    assert a is not None and b is not None and a.mean() < b.mean()  # two images, neither over the other
    d.crop(save_dir=tmp_path / "exp", exist_ok=True)
    d.crop(save_dir=tmp_path / "exp", exist_ok=True)
    crops = sorted(p.name for p in (tmp_path / "exp" / "crops" / "person").iterdir())
    assert crops == ["x-2.jpg", "x-3.jpg", "x-4.jpg", "x.jpg"]  # two calls, two crops each: none replaced


def test_hub_save_failure_is_one_line_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_files, "_before_write", _read_only)
    d = _detections(["x.jpg"])
    with pytest.raises(OutputWriteError, match=r"x\.jpg: the file system is read-only") as e:
        d.save(save_dir=tmp_path / "exp", exist_ok=True)
    assert "\n" not in str(e.value)
    with pytest.raises(OutputWriteError, match=r"crops.*x\.jpg"):
        d.crop(save_dir=tmp_path / "exp", exist_ok=True)
    assert _files(tmp_path) == []  # no temporary file, no empty reserved name


def test_label_lines_print_the_official_digits():
    """The official detect.py and val.py divide float32 tensors (`torch.tensor(xyxy) / gn`) and print with %g: the
    same boxes give the same text here (369 / 640 prints 0.576563 in float32 and 0.576562 in float64)."""
    from utils.backend import torch
    from utils.boxes import xyxy2xywh
    from utils.inference.label_txt import VOC_FORMAT, YOLO_FORMAT, label_lines
    shape = (480, 640, 3)
    det = np.array([[369, 0, 629, 238, 0.75, 45], [17, 131, 453, 479, 0.5, 0], [0, 3, 1, 5, 0.25, 7]], np.float32)
    gn = torch.tensor(shape)[[1, 0, 1, 0]]
    for save_format in (YOLO_FORMAT, VOC_FORMAT):
        official = []
        for *xyxy, conf, cls in det.tolist():  # the official loop's expression, in the backend's float32 tensors
            box = torch.tensor([xyxy], dtype=torch.float32)
            coords = ((xyxy2xywh(box) if save_format == YOLO_FORMAT else box) / gn).view(-1).tolist()
            official.append(("%g " * 5).rstrip() % (cls, *coords))
        assert label_lines(det, shape, save_format=save_format) == official
    assert label_lines(det, shape, save_format=VOC_FORMAT)[0].split()[1] == "0.576563"
