"""Adversarial inputs: random bytes, truncations, byte flips and value type swaps over every file format the project
reads. Each must end in a correct result or one line (the rule in tests/helpers/adversarial_inputs.py), with no hang, no
write outside its folder and no code run. A bounded, seeded sample per run; README "Adversarial inputs" says how to
run a bigger one (ADVERSARIAL_CASES, ADVERSARIAL_SEED)."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.adversarial_inputs import (MARKER, cases, listing, mutate_bytes, outcome, rng_for,
                                             yaml_variant)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandbox(tmp_path, coco128_dir, monkeypatch):
    """A tiny dataset in its own folder, worked on from inside it; afterwards nothing new beside it, in the
    project or in the working folder, and no payload ran."""
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in ("000000000009", "000000000025"):
        shutil.copy(coco128_dir / f"images/train2017/{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / f"labels/train2017/{n}.txt", tmp_path / "labels")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    outside = (tmp_path.parent, ROOT, ROOT / "data", ROOT / "models")
    before = listing(*outside)
    yield tmp_path
    assert not list(tmp_path.rglob(MARKER)) and not (ROOT / MARKER).exists(), "a payload ran"
    after = listing(*outside)
    added = {d: sorted(set(after.get(d, [])) - set(names)) for d, names in before.items()}
    assert not any(added.values()), f"written outside the case's folder: {added}"


def _each(fmt, n=None):
    rng = rng_for(fmt)
    for i in range(n or cases()):
        yield i, rng


def _assert_one_line_rule(kind, result, check=None):
    if kind == "ok" and check is not None:
        check(result)


# ------------------------------------------------------------------------------------------------- YAMLs
def test_data_yamls(sandbox):
    from utils.dataset_config import check_dataset
    base = {"path": str(sandbox), "train": "images", "val": "images", "test": None, "nc": 2, "names": ["a", "b"],
            "download": "https://example.invalid/x.zip"}
    for i, rng in _each("data"):
        f = sandbox / f"d{i}.yaml"
        text, label = yaml_variant(rng, base, sandbox / MARKER)
        f.write_text(text)
        kind, d = outcome(lambda: check_dataset(str(f), autodownload=False), f"data YAML {label}")
        if kind == "ok":
            assert isinstance(d["names"], dict) and all(isinstance(v, str) for v in d["names"].values())
            assert d["nc"] == len(d["names"]) and isinstance(d["val"], (str, list))


def test_hyp_yamls(sandbox):
    from utils.engine.hyp import load_hyp
    base = yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())
    for i, rng in _each("hyp"):
        f = sandbox / f"h{i}.yaml"
        text, label = yaml_variant(rng, base, sandbox / MARKER)
        f.write_text(text)
        kind, h = outcome(lambda: load_hyp(f), f"hyp YAML {label}")
        if kind == "ok":
            assert all(np.isfinite(float(h[k])) and float(h[k]) >= 0 for k in ("lr0", "momentum", "box", "fliplr"))


def test_model_yamls(sandbox):
    from models.yolo import DetectionModel
    base = yaml.safe_load((ROOT / "models/yolov5n.yaml").read_text())
    base["width_multiple"] = 0.125  # a small network: the cases test the reading, not the maths
    for i, rng in _each("model", max(2, cases() // 2)):
        f = sandbox / f"m{i}.yaml"
        text, label = yaml_variant(rng, base, sandbox / MARKER)
        f.write_text(text)
        kind, m = outcome(lambda: DetectionModel(str(f)), f"model YAML {label}")
        if kind == "ok":
            assert m.stride is not None and len(m.names) == m.yaml["nc"]


# ---------------------------------------------------------------------------------------- labels, caches
def test_label_files(sandbox):
    from utils.data.labels import _verify_pair
    im = sandbox / "images/000000000009.jpg"
    good = (sandbox / "labels/000000000009.txt").read_bytes()
    for i, rng in _each("labels"):
        lb = sandbox / "labels" / f"case{i}.txt"
        data, label = mutate_bytes(rng, good)
        if rng.random() < 0.3:  # a type swap in one field: text, nan, negative, huge
            rows = good.decode().split("\n")
            row = rows[0].split()
            row[rng.randrange(5)] = rng.choice(["abc", "nan", "-1", "1e308", "inf", "", "0x10", "1,5"])
            data, label = "\n".join([" ".join(row), *rows[1:]]).encode(), f"field swap {row}"
        lb.write_bytes(data)
        kind, r = outcome(lambda: _verify_pair((str(im), str(lb), "")), f"label file {label}")
        assert kind == "ok"  # a bad label drops the pair with a message, it never raises
        if r[0] is not None:
            lab = r[1]
            assert lab.ndim == 2 and lab.shape[1] == 5 and np.isfinite(lab).all() and (lab[:, 1:] <= 1).all()
        else:
            assert r[8] and "\n" not in r[8]


def test_image_lists(sandbox):
    from utils.dataloaders import LoadImages, LoadImagesAndLabels
    ims = sorted((sandbox / "images").iterdir())
    good = ("\n".join(f"./images/{p.name}" for p in ims) + "\n" + str(ims[0]) + "\n").encode()
    for i, rng in _each("image_list"):
        f = sandbox / f"list{i}.txt"
        data, label = mutate_bytes(rng, good)
        f.write_bytes(data)
        kind, ds = outcome(lambda: LoadImagesAndLabels(str(f), img_size=64, batch_size=2), f"image list {label}")
        if kind == "ok":
            assert len(ds) >= 1 and ds[0][0].shape[0] == 3
        outcome(lambda: len(LoadImages(str(f), img_size=64)), f"detect image list {label}")


def test_label_caches(sandbox):
    from utils.data.label_cache import cache_key, read_cache, write_cache
    from utils.data.labels import scan_labels
    ims = sorted(str(p) for p in (sandbox / "images").iterdir())
    lbs = [str(sandbox / "labels" / (Path(p).stem + ".txt")) for p in ims]
    key = cache_key(ims + lbs)
    path = sandbox / "labels.cache"
    assert write_cache(path, scan_labels(ims, lbs), key)
    good = path.read_bytes()
    for i, rng in _each("label_cache"):
        data, label = mutate_bytes(rng, good)
        path.write_bytes(data)
        kind, scan = outcome(lambda: read_cache(path, key, ims), f"label cache {label}")
        assert kind == "ok"  # a damaged cache is ignored with a warning and rebuilt
        if scan is not None:
            assert set(scan["files"]) <= set(ims) and all(np.asarray(lb).shape[-1] == 5 for lb in scan["labels"])


def test_npy_caches(sandbox):
    from utils.data.image_cache import read_npy_cache
    good_im = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    f = sandbox / "im.npy"
    np.save(f, good_im)
    good = f.read_bytes()
    for i, rng in _each("npy"):
        data, label = mutate_bytes(rng, good)
        f.write_bytes(data)
        kind, im = outcome(lambda: read_npy_cache(str(f), (48, 64)), f".npy cache {label}")
        assert kind == "ok"  # damaged: None (named, removed), and the caller decodes the image again
        assert im is None and not f.exists() or im.shape == (48, 64, 3) and im.dtype == np.uint8


# ------------------------------------------------------------------------------------------ checkpoints
def test_checkpoints(sandbox, yolov5n_pt):
    import pickle
    import zipfile

    from models.experimental import attempt_load
    from utils.checkpoint import save_checkpoint
    from utils.engine.initial_model import pretrained_model
    sources = [Path(yolov5n_pt).read_bytes(), _legacy_yolov5ck(sandbox, yolov5n_pt)]
    swaps = [{"model": 5}, {"ema": [1, 2], "model": None}, {"model": {"yaml": "x"}}, {"epoch": "x"}, [1, 2, 3],
             "text", {"model.0.conv.weight": np.zeros(3)}]
    for i, rng in _each("checkpoint", max(2, cases() // 2)):
        f = sandbox / f"c{i}.pt"
        r = rng.random()
        if r < 0.6:
            j = rng.randrange(len(sources))
            data, label = mutate_bytes(rng, sources[j])
            label = f"{('PyTorch zip', 'YOLOv5CK')[j]} {label}"
            f.write_bytes(data)
        elif r < 0.7:  # a YOLOv5CK file whose JSON header has one value swapped, its checksum made right again
            f.write_bytes(_swapped_yolov5ck(rng, sources[1], sandbox / MARKER))
            label = "YOLOv5CK header swap"
        elif r < 0.85:
            obj = rng.choice(swaps)
            save_checkpoint(obj, f)
            label = f"type swap {str(obj)[:40]}"
        else:  # a pickle that would run a command if it were unpickled naively
            with zipfile.ZipFile(f, "w") as zf:
                zf.writestr("x/data.pkl", pickle.dumps({"model": _Payload(sandbox / MARKER)}, protocol=2))
            label = "code-running pickle"
        kind, m = outcome(lambda: attempt_load(f), f"checkpoint {label}")  # val.py, detect.py
        if kind == "ok":
            assert m.stride is not None and len(m.names) == m.yaml["nc"]
        kind, m = outcome(lambda: pretrained_model(str(f), "", 80), f"train.py --weights {label}")
        if kind == "ok":
            assert m.stride is not None


def _legacy_yolov5ck(sandbox, yolov5n_pt):
    """The project's earlier checkpoint format, which it still reads."""
    from tests.helpers.legacy_yolov5ck_writer import save_yolov5ck
    from utils.checkpoint import load_any
    f = sandbox / "legacy.pt"
    save_yolov5ck({"epoch": 1, "model": load_any(yolov5n_pt)["model"]}, f)
    return f.read_bytes()


def _swapped_yolov5ck(rng, buf, marker):
    import json
    import zlib

    from tests.helpers.adversarial_inputs import swap_in
    from utils.checkpoint.legacy_yolov5ck import HEAD, MAGIC, TRAIL, TRAILER_MAGIC
    _, version, hlen = HEAD.unpack_from(buf, 0)
    header, _ = swap_in(rng, json.loads(buf[HEAD.size:HEAD.size + hlen]), marker)
    text = json.dumps(header).encode()
    body = HEAD.pack(MAGIC, version, len(text)) + text + buf[HEAD.size + hlen:len(buf) - TRAIL.size]
    return body + TRAIL.pack(TRAILER_MAGIC, len(body), zlib.crc32(body) & 0xFFFFFFFF)


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


def test_exported_models(sandbox):
    from models.multibackend import DetectMultiBackend
    seeds = {".onnx": b"\x08\x07\x12\x07pytorch" + bytes(200), ".torchscript": b"PK\x03\x04" + bytes(200)}
    for i, rng in _each("export"):
        suffix = rng.choice(sorted(seeds))
        f = sandbox / f"e{i}{suffix}"
        data, label = mutate_bytes(rng, seeds[suffix])
        f.write_bytes(data)
        kind, _ = outcome(lambda: DetectMultiBackend(str(f), device="cpu"), f"exported {suffix} {label}")
        assert kind == "error"  # none of these is a model


def _pb(num, payload):
    """One length-delimited protobuf field (the wire format ONNX files use)."""
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def _onnx_bytes(meta):
    """A ModelProto holding only what read_onnx_info reads: an input of shape (1, 3, 32, 32) and metadata."""
    shape = b"".join(_pb(1, _pb(1, d)) for d in (1, 3, 32, 32))
    graph = _pb(11, _pb(1, b"images") + _pb(2, _pb(1, _pb(1, 1) + _pb(2, shape))))
    props = b"".join(_pb(14, _pb(1, k.encode()) + _pb(2, v.encode("utf-8", "surrogateescape")))  # \udcff: byte ff
                    for k, v in meta.items())
    return _pb(1, 8) + _pb(7, graph) + props


def test_onnx_metadata(sandbox):
    from utils.inference.format_loader import onnx_file_info
    from utils.export.onnx_meta import read_onnx_info
    good = {"stride": "32", "names": "{0: 'person', 1: 'bus'}"}
    assert read_onnx_info(_write(sandbox / "ok.onnx", _onnx_bytes(good)))[1] == (1, 3, 32, 32)
    values = ["__import__('os').system('touch %s')" % (sandbox / MARKER), "[" * 5000, "{0: 'a'} " * 3, "1e309", "-32",
              "{0: [1]}", "'x' * 10 ** 9", "", "None", "{'a': 'b'}", "[" + "'n'," * 20000 + "]", "\udcff"]
    for i, rng in _each("onnx"):
        if rng.random() < 0.5:
            data, label = mutate_bytes(rng, _onnx_bytes(good))
        else:
            key, value = rng.choice(sorted(good)), rng.choice(values)
            data, label = _onnx_bytes({**good, key: value}), f"{key} = {value[:30]!r}"
        f = _write(sandbox / f"o{i}.onnx", data)

        kind, r = outcome(lambda: onnx_file_info(f), f"ONNX metadata {label}")  # what --dnn reads
        if kind == "ok" and r[1] is not None:
            assert 1 <= r[0] <= 1024 and all(isinstance(v, str) for v in r[1].values())


def _write(f, data):
    f.write_bytes(data)
    return f


# ---------------------------------------------------------------------------------------------- media
def test_images(sandbox):
    from utils.data.labels import _verify_pair
    from utils.data.media import read_image
    srcs = [(sandbox / "images/000000000009.jpg").read_bytes()]
    import cv2
    ok, png = cv2.imencode(".png", np.zeros((20, 30, 3), np.uint8))
    srcs.append(png.tobytes())
    for i, rng in _each("image"):
        src = rng.choice(srcs)
        f = sandbox / f"i{i}{'.jpg' if src is srcs[0] else '.png'}"
        data, label = mutate_bytes(rng, src)
        f.write_bytes(data)
        kind, im = outcome(lambda: read_image(str(f)), f"image {label}")
        if kind == "ok":
            assert im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8
        kind, r = outcome(lambda: _verify_pair((str(f), str(sandbox / "none.txt"), "")), f"image scan {label}")
        assert kind == "ok"


@pytest.fixture
def tiny_video(sandbox):
    import cv2
    f = sandbox / "v.mp4"
    w = cv2.VideoWriter(str(f), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for k in range(12):
        w.write(np.full((48, 64, 3), k * 20, np.uint8))
    w.release()
    if not f.exists() or f.stat().st_size == 0:
        pytest.skip("this OpenCV build writes no mp4v video")
    return f.read_bytes()


def test_videos(sandbox, tiny_video):
    from utils.dataloaders import LoadImages
    from utils.inference.sources import ReadableFrames
    for i, rng in _each("video", max(2, cases() // 2)):
        f = sandbox / f"v{i}.mp4"
        data, label = mutate_bytes(rng, tiny_video)
        f.write_bytes(data)

        def frames():
            return sum(1 for _ in ReadableFrames(LoadImages(str(f), img_size=64)))
        kind, n = outcome(frames, f"video {label}")
        assert kind == "error" or 0 <= n <= 1000


def test_streams_files(sandbox):
    from utils.streams import read_sources
    good = b"0\nrtsp://example.invalid/live\nhttps://example.invalid/a.m3u8\n"
    for i, rng in _each("streams"):
        f = sandbox / f"s{i}.streams"
        data, label = mutate_bytes(rng, good)
        f.write_bytes(data)
        kind, lines = outcome(lambda: read_sources(str(f)), f".streams {label}")
        if kind == "ok":
            assert lines and all(isinstance(x, str) and x and "\n" not in x for x in lines)
