"""detect.py and the Python inference API on real coco128 images, a corrupt file and a small video."""
import cv2
import numpy as np
import pytest

IMGSZ = 256
STEMS = ("000000000025", "000000000030", "000000000034")  # a giraffe, a vase, a zebra

# sources, writers and messages are framework-free; detect.py's model call under OneFlow:
DETECT_UNDER_ONEFLOW = "tests/test_scripts/test_detect.py::test_annotated_images_and_labels_written"


@pytest.fixture(scope="module")
def source(tmp_path_factory, coco128_dir):
    d = tmp_path_factory.mktemp("src")
    for s in STEMS:
        (d / f"{s}.jpg").symlink_to(coco128_dir / "images" / "train2017" / f"{s}.jpg")
    (d / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg" * 10)  # unreadable
    return d


@pytest.fixture(scope="module")
def detect_run(source, yolov5n_pt, tmp_path_factory):
    import detect
    project = tmp_path_factory.mktemp("runs")
    save_dir = detect.run(weights=[str(yolov5n_pt)], source=str(source), imgsz=(IMGSZ, IMGSZ), save_txt=True,
                          save_conf=True, save_csv=True, save_crop=True, project=project, name="exp")
    return save_dir


def test_annotated_images_and_labels_written(detect_run, source):
    for s in STEMS:
        out = cv2.imread(str(detect_run / f"{s}.jpg"))
        src = cv2.imread(str(source / f"{s}.jpg"))
        assert out is not None and out.shape == src.shape  # drawn on the original image, same size
        assert np.abs(out.astype(int) - src).sum() > 0  # something was drawn
    labels = {p.stem: np.loadtxt(p, ndmin=2) for p in (detect_run / "labels").glob("*.txt")}
    assert set(labels) == set(STEMS)
    for rows in labels.values():
        assert rows.shape[1] == 6  # cls x y w h conf
        assert np.all((rows[:, 1:5] > 0) & (rows[:, 1:5] <= 1)) and np.all(rows[:, 5] >= 0.25)
    # The animals in these images are found (COCO ids: giraffe 23, zebra 22), boxes normalized to the original
    assert 23 in labels["000000000025"][:, 0] and 22 in labels["000000000034"][:, 0]
    assert (detect_run / "predictions.csv").read_text().startswith("Image Name,Prediction,Confidence")
    assert any((detect_run / "crops").rglob("*.jpg"))


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
def test_corrupt_image_is_reported_and_skipped(source, yolov5n_pt, tmp_path, capfd, caplog):
    import detect
    from utils.general import LOGGER
    propagate, LOGGER.propagate = LOGGER.propagate, True  # let caplog see the project logger too
    try:
        with caplog.at_level("INFO", logger="yolov5"):
            save_dir = detect.run(weights=[str(yolov5n_pt)], source=str(source), imgsz=(160, 160), project=tmp_path,
                                  name="exp")
    finally:
        LOGGER.propagate = propagate
    captured = capfd.readouterr()
    text = captured.out + captured.err + caplog.text
    assert "broken.jpg" in text and "skipping" in text
    assert sorted(p.stem for p in save_dir.glob("*.jpg")) == sorted(STEMS)  # the rest were processed


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
def test_video_keeps_frame_count(coco128_dir, yolov5n_pt, tmp_path):
    import detect
    frame = cv2.imread(str(coco128_dir / "images" / "train2017" / "000000000025.jpg"))
    frame = cv2.resize(frame, (192, 128))
    video = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (192, 128))
    n = 5
    for k in range(n):
        writer.write(np.roll(frame, 8 * k, axis=1))
    writer.release()
    cap = cv2.VideoCapture(str(video))
    if int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) != n:
        pytest.skip("this OpenCV build cannot write/read mp4v video")
    save_dir = detect.run(weights=[str(yolov5n_pt)], source=str(video), imgsz=(128, 128), project=tmp_path,
                          name="exp", save_txt=True)
    out = save_dir / "clip.mp4"
    cap = cv2.VideoCapture(str(out))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == n
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == n
    assert int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)) == 192 and int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)) == 128


def test_detector_api_path_and_array_agree(coco128_dir, yolov5n_pt):
    from utils.inference import Detector
    det = Detector(str(yolov5n_pt), device="cpu", imgsz=IMGSZ)
    path = coco128_dir / "images" / "train2017" / "000000000025.jpg"
    im0 = cv2.imread(str(path))
    (a,) = det.predict(str(path))
    (b,) = det.predict(im0)
    (c,) = det.predict(np.ascontiguousarray(im0[..., ::-1]), rgb=True)
    assert a["path"] == str(path) and b["path"] is None
    for r in (b, c):
        np.testing.assert_allclose(r["boxes"], a["boxes"], atol=1e-3)
        np.testing.assert_allclose(r["scores"], a["scores"], atol=1e-5)
    assert len(a["boxes"]) and "giraffe" in a["names"]
    h, w = im0.shape[:2]
    assert np.all(a["boxes"][:, [0, 2]] <= w) and np.all(a["boxes"][:, [1, 3]] <= h) and np.all(a["boxes"] >= 0)
    assert a["classes"].dtype.kind == "i" and len(a["names"]) == len(a["classes"]) == len(a["scores"])


def test_cli_flags_parse():
    import detect
    opt = detect.parse_opt(["--weights", "w.pt", "--img", "320", "--classes", "0", "2", "--agnostic-nms",
                            "--vid-stride", "2", "--hide-conf", "--line-thickness", "1"])
    assert opt.imgsz == [320, 320] and opt.classes == [0, 2] and opt.agnostic_nms and opt.vid_stride == 2
    assert opt.conf_thres == 0.25 and opt.iou_thres == 0.45 and opt.max_det == 1000


@pytest.fixture(scope="module")
def square_source(tmp_path_factory, coco128_dir):
    """Square copies of the images: the .pt's minimal letterbox then equals the square one that exported models
    (fixed input shape) take, so all formats see the same pixels."""
    d = tmp_path_factory.mktemp("square")
    for s in STEMS:
        im = cv2.imread(str(coco128_dir / "images" / "train2017" / f"{s}.jpg"))
        cv2.imwrite(str(d / f"{s}.png"), cv2.resize(im, (256, 256), interpolation=cv2.INTER_AREA))
    return d


def _labels(save_dir):
    return {p.stem: np.loadtxt(p, ndmin=2) for p in sorted((save_dir / "labels").glob("*.txt"))}


def test_detect_on_exported_models_equals_pt(square_source, yolov5n_pt, tmp_path):
    from utils.backend import IS_TORCH
    if not IS_TORCH:
        pytest.skip("exports run in the PyTorch environment")
    import shutil

    import detect
    import export
    shutil.copy(yolov5n_pt, tmp_path / "yolov5n.pt")
    export.run(weights=str(tmp_path / "yolov5n.pt"), imgsz=[IMGSZ], include=("onnx", "torchscript"))
    runs = {}
    for w in ("yolov5n.pt", "yolov5n.onnx", "yolov5n.torchscript"):
        runs[w] = _labels(detect.run(weights=[str(tmp_path / w)], source=str(square_source), imgsz=(IMGSZ, IMGSZ),
                                     save_txt=True, save_conf=True, project=tmp_path / "runs", name=w))
    ref = runs["yolov5n.pt"]
    assert set(ref) == set(STEMS) and 22 in ref["000000000034"][:, 0]  # the zebra is found
    for w in ("yolov5n.onnx", "yolov5n.torchscript"):
        assert set(runs[w]) == set(ref), w
        for s in ref:
            assert runs[w][s].shape == ref[s].shape, (w, s)
            np.testing.assert_allclose(runs[w][s], ref[s], atol=2e-4, err_msg=f"{w} {s}")  # %g: 6 digits


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
def test_save_format_pascal_voc_is_normalized_xyxy(square_source, yolov5n_pt, tmp_path):
    import detect
    kw = dict(weights=[str(yolov5n_pt)], source=str(square_source), imgsz=(128, 128), save_txt=True, nosave=True,
              project=tmp_path)
    yolo = _labels(detect.run(save_format=0, name="yolo", **kw))
    voc = _labels(detect.run(save_format=1, name="voc", **kw))
    assert set(yolo) == set(voc) and len(yolo)
    for s in yolo:
        c, x, y, w, h = yolo[s].T
        np.testing.assert_allclose(voc[s], np.stack([c, x - w / 2, y - h / 2, x + w / 2, y + h / 2], 1), atol=2e-6)
        assert np.all(voc[s][:, 3] > voc[s][:, 1]) and np.all(voc[s][:, 1:] <= 1)
    from utils.errors import UserError
    with pytest.raises(UserError, match="--save-format 2"):
        detect.run(save_format=2, name="bad", **kw)
    assert detect.parse_opt(["--save-format", "1"]).save_format == 1 and detect.parse_opt([]).save_format == 0


def _write_video(path, frame, n=5):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (frame.shape[1], frame.shape[0]))
    for k in range(n):
        writer.write(np.roll(frame, 8 * k, axis=1))
    writer.release()
    if int(cv2.VideoCapture(str(path)).get(cv2.CAP_PROP_FRAME_COUNT)) != n:
        pytest.skip("this OpenCV build cannot write/read mp4v video")


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
def test_streams_file_reads_a_local_video_as_a_stream(coco128_dir, yolov5n_pt, tmp_path):
    """A .streams file lists sources; a video served over http from this machine stands in for a camera (a .streams
    file may list only camera indexes and rtsp/rtmp/http/https URLs): the frames come through the reader thread, are
    annotated into one video per source, and the run ends with the video."""
    import detect
    from tests.helpers.stream_server import serve_folder
    frame = cv2.resize(cv2.imread(str(coco128_dir / "images" / "train2017" / "000000000025.jpg")), (192, 128))
    _write_video(tmp_path / "clip.mp4", frame)
    (tmp_path / "clip").write_bytes((tmp_path / "clip.mp4").read_bytes())  # no extension: a stream, not a file URL
    base = serve_folder(tmp_path)
    (tmp_path / "cams.streams").write_text(f"{base}/clip\n")

    from utils.streams import LoadStreams
    ds = LoadStreams(str(tmp_path / "cams.streams"), img_size=128, stride=32)
    batches = list(ds)
    assert len(ds) == 1 and ds.mode == "stream" and 1 <= len(batches) <= 5
    sources, im, im0, cap, s = batches[0]
    assert im.shape == (1, 3, 96, 128) and im.dtype == np.uint8 and im0[0].shape == (128, 192, 3) and cap is None

    save_dir = detect.run(weights=[str(yolov5n_pt)], source=str(tmp_path / "cams.streams"), imgsz=(128, 128),
                          save_txt=True, project=tmp_path, name="exp")
    out = cv2.VideoCapture(str(save_dir / "clip.mp4"))
    assert int(out.get(cv2.CAP_PROP_FRAME_COUNT)) >= 1 and out.read()[0]
    assert int(out.get(cv2.CAP_PROP_FRAME_WIDTH)) == 192 and int(out.get(cv2.CAP_PROP_FRAME_HEIGHT)) == 128
    assert list((save_dir / "labels").glob("clip_*.txt"))  # labels per frame, as for videos


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
def test_missing_camera_and_unreachable_stream_say_so(yolov5n_pt, tmp_path):
    import detect
    from utils.streams import StreamError
    if cv2.VideoCapture(0).isOpened():
        pytest.skip("a camera is attached")
    kw = dict(weights=[str(yolov5n_pt)], imgsz=(64, 64), project=tmp_path)
    with pytest.raises(StreamError, match=r"--source 0: nothing to read \(camera 0 could not be opened"):
        detect.run(source="0", **kw)
    with pytest.raises(StreamError, match="rtsp://127.0.0.1:9/live: nothing to read"):  # port 9: nothing listens
        detect.run(source="rtsp://127.0.0.1:9/live", **kw)
    with pytest.raises(StreamError, match="downloads nothing"):
        detect.run(source="https://example.com/bus.jpg", **kw)
    assert not list(tmp_path.glob("exp*"))  # no empty run folders left behind


@pytest.mark.oneflow_covered_by(DETECT_UNDER_ONEFLOW)
@pytest.mark.slow
def test_cli_camera_missing_is_one_line(yolov5n_pt, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path
    if cv2.VideoCapture(0).isOpened():
        pytest.skip("a camera is attached")
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "detect.py", "--weights", str(yolov5n_pt), "--source", "0", "--img", "64",
                        "--project", str(tmp_path)], cwd=root, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(root), "YOLO_QUIET": "1"})
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    # the log (stdout) got as far as the model; stderr holds one line, ours (no OpenCV warnings beside it)
    assert " summary: " in p.stdout, p.stdout[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--source 0" in lines[0] and "camera" in lines[0], p.stderr[-2000:]
