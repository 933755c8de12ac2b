"""Every value read from a YAML or checkpoint is checked where it is read: a bad one is one line naming the file,
the key and the value (a UserError the entry scripts print and exit 1 on), never a traceback or a runaway
allocation. Runs under both backends (CI runs the suite once per YOLO_BACKEND)."""
import errno
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from utils.errors import UserError, one_line

ROOT = Path(__file__).resolve().parents[2]
BOMB = "\n".join([f"{c}: &{c} [{','.join([('*' + p) if p else 'lol'] * 9)}]"
                  for p, c in zip(["", *"abcdefgh"], "abcdefghi")]) + "\nnames: *i\n"  # 9**9 strings


def _one_line_error(fn, *args, match=None, **kwargs):
    with pytest.raises(UserError) as e:
        fn(*args, **kwargs)
    msg = str(e.value)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    if match:
        assert all(m in msg for m in ([match] if isinstance(match, str) else match)), msg
    return msg


# ------------------------------------------------------------------------------------------------- data YAMLs
@pytest.fixture
def data_dir(tmp_path):
    (tmp_path / "images").mkdir()
    return tmp_path


@pytest.mark.parametrize("text,key", [
    ("train: images\nval:\nnames: [a]\n", "val"),
    ("train: images\nval: images\nnames: 5\n", "names"),
    ("train: images\nval: images\nnames: [a]\nnc: abc\n", "nc"),
    ("path: 123\ntrain: images\nval: images\nnames: [a]\n", "path"),
    ("train: 7\nval: images\nnames: [a]\n", "train"),
    ("train: images\nval: images\nnames: {0: [x, y]}\n", "names"),
    ("- train\n- val\n", "list"),
    ("", "empty"),
    ("train: [images\n", "not valid YAML"),
])
def test_data_yaml_wrong_type_or_missing_is_one_line(data_dir, text, key):
    from utils.dataset_config import check_dataset
    f = data_dir / "d.yaml"
    f.write_text(text)
    _one_line_error(check_dataset, str(f), autodownload=False, match=[str(f), key])


def test_data_yaml_alias_bomb_is_refused_at_once(data_dir):
    from utils.dataset_config import check_dataset
    f = data_dir / "bomb.yaml"
    f.write_text(f"path: {data_dir}\ntrain: images\nval: images\n" + BOMB)
    assert f.stat().st_size < 600
    t = time.perf_counter()
    _one_line_error(check_dataset, str(f), autodownload=False, match=[str(f), "aliases"])
    assert time.perf_counter() - t < 2  # was 82 s to an 8 GB MemoryError


def test_data_yaml_names_bounded_and_plain(data_dir):
    from utils.dataset_config import MAX_CLASSES, check_dataset
    base = {"path": str(data_dir), "train": "images", "val": "images"}
    _one_line_error(check_dataset, {**base, "names": [str(i) for i in range(MAX_CLASSES + 1)]}, match="names")
    d = check_dataset({**base, "names": {0: "person", 1: 7}})
    assert d["names"] == {0: "person", 1: "7"} and d["nc"] == 2
    assert check_dataset({**base, "nc": "3"})["names"] == {0: "class0", 1: "class1", 2: "class2"}


# -------------------------------------------------------------------------------------------------- hyp files
def _hyp(tmp_path, **change):
    h = yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())
    h.update(change)
    for k in [k for k, v in change.items() if v is None]:
        del h[k]
    f = tmp_path / "hyp.yaml"
    f.write_text("\n".join(f"{k}: {v}" for k, v in h.items()) + "\n")
    return f


def test_hyp_numeric_text_is_taken_as_the_number(tmp_path):
    from utils.engine.hyp import load_hyp
    f = _hyp(tmp_path, lr0="1e-3")
    assert yaml.safe_load(f.read_text())["lr0"] == "1e-3"  # PyYAML reads it as text
    assert load_hyp(f)["lr0"] == 0.001


@pytest.mark.parametrize("change,words", [
    (dict(lr0=".nan"), ["lr0", "finite"]), (dict(lr0=".inf"), ["lr0", "finite"]),
    (dict(lr0="-0.01"), ["lr0", "range"]), (dict(momentum="1.5"), ["momentum", "range"]),
    (dict(lr0="fast"), ["lr0", "not a number"]), (dict(box=None), ["missing box"]),
    (dict(fliplr="[0.5]"), ["fliplr"]),
])
def test_hyp_bad_values_refused_at_load(tmp_path, change, words):
    from utils.engine.hyp import load_hyp
    f = _hyp(tmp_path, **change)
    _one_line_error(load_hyp, f, match=[str(f), *words])


@pytest.mark.parametrize("text", ["", "lr0: [0.01\n", "- 0.01\n", "!!python/object/apply:os.getcwd []\n"])
def test_hyp_empty_or_broken_file_is_one_line(tmp_path, text):
    from utils.engine.hyp import load_hyp
    f = tmp_path / "hyp.yaml"
    f.write_text(text)
    _one_line_error(load_hyp, f, match=str(f))


def test_hyp_dict_from_a_checkpoint_is_checked_too():
    from utils.engine.hyp import load_hyp
    h = yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())
    _one_line_error(load_hyp, {**h, "lr0": float("nan")}, match="lr0")


# ------------------------------------------------------------------------------------------------ model YAMLs
def _model_yaml(tmp_path, edit):
    d = yaml.safe_load((ROOT / "models/yolov5n.yaml").read_text())
    edit(d)
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["backbone"][1].__setitem__(2, "NotAModule"), ["NotAModule", "unknown module"]),
    (lambda d: d["backbone"][1][3].__setitem__(0, "128"), ["layer 1"]),
    (lambda d: d.pop("anchors"), ["missing anchors"]),
    (lambda d: d.__setitem__("nc", "abc"), ["nc"]),
    (lambda d: d["backbone"][1][3].__setitem__(0, 10 ** 7), ["layer 1", "width"]),
    (lambda d: d.__setitem__("width_multiple", float("nan")), ["width_multiple"]),
])
def test_model_yaml_bad_values_are_one_line(tmp_path, edit, words):
    from models.yolo import DetectionModel
    f = _model_yaml(tmp_path, edit)
    msg = _one_line_error(DetectionModel, str(f), match=["m.yaml", *words])
    assert not msg.startswith(("'", '"'))  # a KeyError subclass, printed as its message


def test_model_yaml_unknown_module_is_still_a_key_error(tmp_path):
    from models.yolo import DetectionModel
    with pytest.raises(KeyError):
        DetectionModel(str(_model_yaml(tmp_path, lambda d: d["head"][0].__setitem__(2, "Nope"))))


@pytest.mark.parametrize("text", ["", BOMB, "[1, 2]\n"])
def test_model_yaml_empty_bomb_or_list_is_one_line(tmp_path, text):
    from models.yolo import DetectionModel
    f = tmp_path / "m.yaml"
    f.write_text(text)
    _one_line_error(DetectionModel, str(f), match=str(f))


# ------------------------------------------------------------------------------------------------ checkpoints
def _v8_checkpoint(path):
    """What an Ultralytics 8 file looks like to a reader: a zip whose pickle names ultralytics.nn.tasks classes."""
    pk = b"\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01cultralytics.nn.tasks\nDetectionModel\nq\x02)\x81q\x03}q\x04bs."
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("v8/data.pkl", pk)
        z.writestr("v8/version", "3\n")
    return path


def _bare_state_dict(path, yolov5n_pt):
    from utils.checkpoint import load_any, save_checkpoint
    sd = load_any(yolov5n_pt)["model"]["state_dict"]
    save_checkpoint({k: np.asarray(v, dtype=np.float32) for k, v in list(sd.items())[:6]}, path)
    return path


@pytest.mark.parametrize("kind,words", [("seg", ["segmentation", "segment/"]),
                                        ("cls", ["classification", "classify/"]),
                                        ("v8", ["Ultralytics YOLOv8", "pip install ultralytics"]),
                                        ("bare", ["bare state dict"]), ("nomodel", ["no YOLOv5 model"])])
def test_foreign_checkpoints_named_for_val_detect_and_train(tmp_path, shared_dir, yolov5n_pt, kind, words):
    from utils.checkpoint import save_checkpoint
    from utils.engine.initial_model import pretrained_model
    from utils.inference import load_model
    f = {"seg": lambda: shared_dir / "weights/yolov5n-seg-coco128.pt",
         "cls": lambda: shared_dir / "weights/yolov5n-cls-coco128cls.pt",
         "v8": lambda: _v8_checkpoint(tmp_path / "v8.pt"),
         "bare": lambda: _bare_state_dict(tmp_path / "sd.pt", yolov5n_pt),
         "nomodel": lambda: save_checkpoint({"epoch": 3, "optimizer": None}, tmp_path / "o.pt")}[kind]()
    # val.py, detect.py (DetectMultiBackend itself loads seg/cls checkpoints, as official; their loader names them)
    _one_line_error(load_model, str(f), device="cpu", match=[str(f), *words])
    _one_line_error(pretrained_model, str(f), "", 80, match=[str(f), *words])  # train.py --weights


# --------------------------------------------------------------------------------------------------- detect.py
def _huge_png(path, w=40000, h=40000):
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
    return path


@pytest.fixture
def mixed_source(tmp_path, coco128_dir):
    src = tmp_path / "src"
    src.mkdir()
    _huge_png(src / "a_huge.png")
    shutil.copy(coco128_dir / "images/train2017/000000000009.jpg", src / "b.jpg")
    (src / "c_broken.mp4").write_bytes(b"\0" * 2000)
    name = b"d_\xff\xfe.jpg"  # not UTF-8: Python hands it on with surrogate escapes
    shutil.copy(coco128_dir / "images/train2017/000000000025.jpg", bytes(src) + b"/" + name)
    return src


def test_detect_sources_report_each_bad_file_and_go_on(mixed_source, tmp_path):
    from utils.dataloaders import LoadImages
    from utils.inference.outputs import DetectionOutputs
    from utils.inference.sources import ReadableFrames
    frames = ReadableFrames(LoadImages(str(mixed_source), img_size=160))
    (tmp_path / "out").mkdir()
    out = DetectionOutputs(tmp_path / "out", {0: "x"})
    seen = []
    for path, _, im0, cap, _ in frames:
        seen.append(Path(path).name)
        out.write(0, Path(path), im0, np.zeros((0, 6)), 0, "image", cap)  # imwrite of such a name crashed OpenCV
    out.close()
    assert frames.skipped == 2 and seen[0] == "b.jpg" and len(seen) == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b.jpg", "d__xff_xfe.jpg"]  # escaped, made safe


def test_pixel_limit_and_unopenable_video_messages(mixed_source):
    from utils.data.media import LoadImages
    ds = iter(LoadImages(str(mixed_source), img_size=160))
    with pytest.raises(FileNotFoundError, match="CV_IO_MAX_IMAGE_PIXELS"):
        next(ds)
    next(ds), next(ds)
    with pytest.raises(FileNotFoundError, match="c_broken.mp4 cannot be opened"):
        next(ds)
    with pytest.raises(StopIteration):
        next(ds)


# ---------------------------------------------------------------------------------------- --cache disk, csv
def test_truncated_npy_is_named_removed_and_rebuilt(tmp_path, coco128_dir, caplog):
    from utils.dataloaders import LoadImagesAndLabels
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in ("000000000009", "000000000025"):
        shutil.copy(coco128_dir / f"images/train2017/{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / f"labels/train2017/{n}.txt", tmp_path / "labels")
    ds = LoadImagesAndLabels(str(tmp_path / "images"), img_size=96, batch_size=2, cache_images="disk")
    good = np.load(ds.npy_files[0])
    f = Path(ds.npy_files[0])
    f.write_bytes(f.read_bytes()[:300])  # cut short, as a full disk or a kill leaves it
    im = ds.load_image(0)[0]
    np.testing.assert_array_equal(im, good)
    assert str(f) in caplog.text and "damaged" in caplog.text
    np.testing.assert_array_equal(np.load(f), good)  # rebuilt


def test_full_disk_while_writing_results_csv(tmp_path, monkeypatch):
    import utils.loggers as loggers
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "last.pt").write_bytes(b"good checkpoint")
    lg = loggers.Loggers(tmp_path, include=())
    lg.on_fit_epoch_end([0.1] * 13, 0)
    before = lg.csv.read_bytes()
    real = loggers.write_atomically

    def full_disk(path, write, **kw):
        def half(f):
            class Half:
                def write(self, b):
                    f.write(b[: len(b) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device")
            write(Half())
        return real(path, half, **kw)
    monkeypatch.setattr(loggers, "write_atomically", full_disk)
    with pytest.raises(loggers.ResultsWriteError) as e:
        lg.on_fit_epoch_end([0.2] * 13, 1)
    assert "No space left" in str(e.value) and "--resume" in str(e.value) and "\n" not in str(e.value)
    assert lg.csv.read_bytes() == before  # nothing half-written replaced it
    assert (tmp_path / "weights" / "last.pt").read_bytes() == b"good checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "weights"]  # no temporary file left


def test_user_error_line_drops_a_repeated_script_prefix():
    e = FileNotFoundError("\033[34m\033[1mval: \033[0mNo images found in /x.\nSupported formats ...")
    assert one_line(e, "val") == "No images found in /x. Supported formats ..."
    assert one_line(e, "train").startswith("\033[34m")  # training's val split keeps its 'val: '


@pytest.mark.framework_free  # the sources' checks, before and beside the model: the same under both backends
@pytest.mark.slow
def test_val_on_empty_folder_says_val_once(tmp_path, yolov5n_pt):
    import os
    import subprocess
    (tmp_path / "images").mkdir()
    names = yaml.safe_load((ROOT / "data/coco128.yaml").read_text())["names"]
    (tmp_path / "d.yaml").write_text(yaml.safe_dump({"path": str(tmp_path), "train": "images", "val": "images",
                                                     "names": names}))
    p = subprocess.run([sys.executable, "val.py", "--weights", str(yolov5n_pt), "--data", str(tmp_path / "d.yaml"),
                        "--imgsz", "64", "--device", "cpu", "--project", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300,
                       env={**os.environ, "YOLO_QUIET": "1"})
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert "No images found" in last and "val: " in last and "val: val:" not in last.replace("\033[0m", "") \
        .replace("\033[34m\033[1m", "").replace("\033[31m\033[1m", ""), last


# ------------------------------------------------------------------------------ values a checkpoint carries
@pytest.mark.parametrize("key,value", [("epochs", "abc"), ("imgsz", 10 ** 9), ("batch_size", [16]),
                                       ("optimizer", "Lion"), ("rect", "yes"), ("label_smoothing", float("nan"))])
def test_resume_refuses_a_checkpoint_whose_options_are_wrong(tmp_path, key, value):
    import train
    from utils.checkpoint import save_checkpoint
    (tmp_path / "weights").mkdir()
    last = tmp_path / "weights" / "last.pt"
    opt = {k: v for k, v in vars(train.parse_opt(True, args=[])).items()}
    save_checkpoint({"epoch": 0, "model": None, "optimizer": {"state": {}}, "opt": {**opt, key: value}}, last)
    _one_line_error(train.resume_opt, train.parse_opt(True, args=["--resume", str(last)]),
                    match=[str(last), key, "--weights"])


@pytest.mark.parametrize("attr,value", [("nc", "eighty"), ("yaml", "yolov5n.yaml"), ("state_dict", [1, 2]),
                                        ("stride", ["a"]), ("class_weights", ["x"])])
def test_stored_model_attributes_are_checked(yolov5n_pt, attr, value):
    from models.from_record import build_model
    from utils.checkpoint import load_any
    rec = load_any(yolov5n_pt)["model"]
    rec[attr] = value
    _one_line_error(build_model, rec, source="c.pt", match="c.pt")


def test_checkpoint_class_names_are_checked_where_detect_reads_them():
    from utils.inference.format_loader import ModelLoadError, _names_dict
    assert _names_dict(["a", 7]) == {0: "a", 1: "7"} and _names_dict({"0": "a"}) == {0: "a"}
    for bad in (5, {0: ["x"]}, list(range(10 ** 5)), None):
        with pytest.raises(ModelLoadError):
            _names_dict(bad, "c.pt")


# ------------------------------------------------------------------------------------------ whole scripts
def _run(args, cwd=ROOT):
    import os
    import subprocess
    p = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, timeout=600,
                       env={**os.environ, "YOLO_QUIET": "1"})
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


@pytest.mark.framework_free  # the sources' checks, before and beside the model: the same under both backends
@pytest.mark.slow
def test_detect_process_reports_bad_files_and_goes_on(mixed_source, tmp_path, yolov5n_pt):
    rc, out = _run(["detect.py", "--weights", yolov5n_pt, "--source", mixed_source, "--imgsz", 64, "--device", "cpu",
                    "--project", tmp_path / "runs", "--name", "e"])
    assert rc == 0 and "Traceback" not in out, out[-3000:]
    assert "CV_IO_MAX_IMAGE_PIXELS" in out and "c_broken.mp4 cannot be opened" in out and "2 unreadable" in out
    assert sorted(p.name for p in (tmp_path / "runs" / "e").iterdir()) == ["b.jpg", "d__xff_xfe.jpg"]


@pytest.mark.slow
def test_detect_with_nothing_readable_exits_1(tmp_path, yolov5n_pt):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg" * 10)
    (src / "b.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not a video" * 10)
    rc, out = _run(["detect.py", "--weights", yolov5n_pt, "--source", src, "--imgsz", 64, "--device", "cpu",
                    "--project", tmp_path / "runs", "--name", "e"])
    assert rc == 1 and "Traceback" not in out, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert "none of the 2 image(s) or video(s)" in last and str(src) in last, out[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["train-seg", "val-cls", "detect-v8", "train-nan-hyp"])
def test_scripts_stop_in_one_line(tmp_path, coco128_dir, shared_dir, case):
    data = tmp_path / "d.yaml"
    data.write_text(yaml.safe_dump({"path": str(coco128_dir), "train": "images/train2017",
                                    "val": "images/train2017", "names": ["x"] * 80}))
    hyp = _hyp(tmp_path, lr0=".nan")
    seg, cls = shared_dir / "weights/yolov5n-seg-coco128.pt", shared_dir / "weights/yolov5n-cls-coco128cls.pt"
    common = ["--device", "cpu", "--imgsz", 64, "--project", tmp_path / "runs"]
    args, words = {
        "train-seg": (["train.py", "--weights", seg, "--data", data, "--epochs", 1, *common], ["segmentation"]),
        "val-cls": (["val.py", "--weights", cls, "--data", data, *common], ["classification"]),
        "detect-v8": (["detect.py", "--weights", _v8_checkpoint(tmp_path / "v8.pt"), "--source",
                       coco128_dir / "images/train2017/000000000009.jpg", *common], ["YOLOv8"]),
        "train-nan-hyp": (["train.py", "--weights", "", "--cfg", "yolov5n.yaml", "--hyp", hyp, "--data", data,
                           "--epochs", 1, *common], ["lr0", "finite"]),
    }[case]
    rc, out = _run(args)
    last = out.strip().splitlines()[-1]
    assert rc == 1 and "Traceback" not in out and all(w in last for w in words), out[-3000:]
    assert not list((tmp_path / "runs").rglob("*.pt"))
