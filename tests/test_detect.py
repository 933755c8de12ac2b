"""detect.py and the Python inference API on real coco128 images, a corrupt file and a small video."""
import cv2
import numpy as np
import pytest

IMGSZ = 256
STEMS = ("000000000025", "000000000030", "000000000034")  # a giraffe, a vase, a zebra


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
