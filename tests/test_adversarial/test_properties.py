"""Property-based tests (Hypothesis) of every parser of untrusted input: label rows (boxes, polygons, mixed,
degenerate), data / hyp / model YAMLs, checkpoint structures and bytes, image headers, evolve.csv.

The property everywhere: the parser returns a well-formed result, or raises one typed error (a utils.errors.UserError
subclass, or the module's documented error type) whose message is one non-empty line; within a bounded time (each
example's deadline) and bounded memory (tracemalloc's peak for Python and numpy allocations; the process's maximum
resident size for what C libraries allocate). tests/test_adversarial/test_adversarial.py mutates whole files at random;
these tests search the structure (which field, which value, which byte of a header) and shrink a failure to its
smallest input.

Seeded and budgeted: derandomize=True (the same examples on every run, no example database written), max_examples
per test chosen so that the file takes well under a minute per backend on a 2-core machine. PROPERTY_EXAMPLES=<n>
(read by the tests only) multiplies every test's examples for a longer search.
"""
import io
import math
import os
import pickle
import re
import resource
import struct
import tracemalloc
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from utils.errors import UserError

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
SCALE = float(os.environ.get("PROPERTY_EXAMPLES") or 1)
MB = 1 << 20


def budget(n, deadline_ms=2000):
    """Seeded settings with n examples (times PROPERTY_EXAMPLES) and a per-example deadline."""
    return settings(derandomize=True, database=None, max_examples=max(1, int(n * SCALE)), deadline=deadline_ms,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large], print_blob=True)


@contextmanager
def bounded_memory(python_mb=256, rss_mb=1024):
    """Fail when the block's Python/numpy allocations peak over python_mb, or the process's maximum resident size
    grows by more than rss_mb (C libraries: OpenCV, PIL)."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield
    finally:
        _, peak = tracemalloc.get_traced_memory()
        if started:
            tracemalloc.stop()
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        assert peak < python_mb * MB, f"allocated {peak / MB:.0f} MB (bound {python_mb} MB)"
        assert grew < rss_mb, f"resident size grew {grew:.0f} MB (bound {rss_mb} MB)"


def outcome(fn, errors=(UserError,), python_mb=256, rss_mb=1024):
    """('ok', result) or ('error', message) when fn obeys the property; anything else fails the example."""
    with bounded_memory(python_mb, rss_mb):
        try:
            return "ok", fn()
        except errors as e:
            msg = str(e).strip()
            assert msg and "\n" not in msg, f"{type(e).__name__} message is not one line: {msg!r}"
            return "error", msg


@pytest.fixture(scope="module", autouse=True)
def _parsers_imported():
    """Import every parser before any example runs: an import under tracemalloc takes tens of seconds (it traces
    each allocation), and it would count against the first example's deadline and memory bound."""
    import models.model_config  # noqa: F401
    import utils.checkpoint  # noqa: F401
    import utils.data.dataset  # noqa: F401
    import utils.data.labels  # noqa: F401
    import utils.data.media  # noqa: F401
    import utils.dataset_config  # noqa: F401
    import utils.engine.hyp  # noqa: F401
    import utils.evolve  # noqa: F401
    import utils.yaml_files  # noqa: F401


# --------------------------------------------------------------------------------------------------- label rows
NUMBER_TOKENS = st.one_of(
    st.floats(0, 1, allow_nan=False).map(lambda v: f"{v:.6f}"),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
    st.sampled_from(["0", "1", "0.5", "-0", "1e-9", "1.0000001", "-1", "nan", "inf", "-inf", "1e308", "0x10", "1,5",
                     "abc", "", "\x00", "١", "1_0", "+.5", "5e-324"]))
CLASS_TOKENS = st.one_of(st.integers(0, 90).map(str), st.sampled_from(["-1", "1.5", "nan", "x", "1e9", "0.0"]))


def _good_box():
    return st.tuples(st.integers(0, 79), st.floats(0.05, 0.95), st.floats(0.05, 0.95), st.floats(0.01, 0.5),
                     st.floats(0.01, 0.5)).map(lambda r: f"{r[0]} " + " ".join(f"{v:.6f}" for v in r[1:]))


def _polygon_row(c, cx, cy, r, k, phase):
    """k points on a circle (a polygon with area: never degenerate), inside the image."""
    a = phase + np.arange(k) * 2 * np.pi / k
    return f"{c} " + " ".join(f"{cx + r * np.cos(t):.6f} {cy + r * np.sin(t):.6f}" for t in a)


def _good_polygon(min_points=3):
    return st.builds(_polygon_row, st.integers(0, 79), st.floats(0.3, 0.7), st.floats(0.3, 0.7), st.floats(0.02, 0.25),
                     st.integers(min_points, 12), st.floats(0, 6.3))


def _any_polygon():
    """Any points in [0, 1], degenerate ones (all equal, collinear) included."""
    return st.tuples(st.integers(0, 79), st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3,
                                                   max_size=12)).map(
        lambda r: f"{r[0]} " + " ".join(f"{x:.6f} {y:.6f}" for x, y in r[1]))


ANY_ROW = st.one_of(
    _good_box(), _good_polygon(), _any_polygon(),
    st.builds(lambda c, toks: " ".join([c, *toks]), CLASS_TOKENS, st.lists(NUMBER_TOKENS, min_size=0, max_size=14)),
    st.text(max_size=40))
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r", "\n\n", " \n", "\t\n"])


@pytest.fixture(scope="module")
def label_image(tmp_path_factory):
    import cv2
    d = tmp_path_factory.mktemp("labels")
    im = d / "im.png"
    cv2.imwrite(str(im), np.full((32, 48, 3), 127, np.uint8))
    return d, im


def _verify(d, im, text):
    from utils.data.labels import _verify_pair
    lb = d / "lb.txt"
    lb.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return _verify_pair((str(im), str(lb), ""))


def _check_kept_labels(r):
    """A kept pair's labels are (n, 5) finite float32, classes whole and >= 0, coordinates in [0, 1], and its
    segments (when any) one per label, each (k, 2) finite."""
    _, lb, _, segments = r[:4]
    assert lb.ndim == 2 and lb.shape[1] == 5 and lb.dtype == np.float32
    assert np.isfinite(lb).all() and (lb >= 0).all() and (lb[:, 1:] <= 1).all()
    if len(segments):
        assert len(segments) == len(lb)
        for s in segments:
            assert s.ndim == 2 and s.shape[1] == 2 and np.isfinite(s).all()


@budget(80)
@given(rows=st.lists(ANY_ROW, max_size=8), end=LINE_ENDS)
def test_label_rows_any(label_image, rows, end):
    """Any rows: the pair is kept with well-formed labels, or dropped with one line naming the image; never raises
    (a bad label file must not stop the scan of the other 100,000)."""
    d, im = label_image
    kind, r = outcome(lambda: _verify(d, im, end.join(rows)), python_mb=64)
    assert kind == "ok"
    if r[0] is None:
        assert r[8] and "\n" not in r[8] and str(im) in r[8]
    else:
        _check_kept_labels(r)


@budget(60)
@given(rows=st.lists(_good_box(), min_size=1, max_size=8))
def test_label_rows_valid_boxes_are_kept_as_written(label_image, rows):
    d, im = label_image
    r = _verify(d, im, "\n".join(rows) + "\n")
    assert r[0] is not None, r[8]
    want = np.unique(np.array([[float(v) for v in row.split()] for row in rows], np.float32), axis=0)
    assert np.array_equal(np.unique(r[1], axis=0), want)
    assert not len(r[3])  # a box file has no segments


@budget(40)
@given(rows=st.lists(_good_polygon(3), min_size=1, max_size=6))
def test_label_rows_valid_polygons_keep_every_point(label_image, rows):
    d, im = label_image
    r = _verify(d, im, "\n".join(rows) + "\n")
    assert r[0] is not None, r[8]
    _check_kept_labels(r)
    kept = {tuple(np.round(s, 5).ravel()) for s in r[3]}
    for row in rows:
        pts = np.array(row.split()[1:], np.float32).reshape(-1, 2)
        assert tuple(np.round(pts, 5).ravel()) in kept


@budget(40)
@given(polys=st.lists(_good_polygon(3), min_size=1, max_size=4), boxes=st.lists(_good_box(), min_size=1, max_size=3),
       order=st.randoms(use_true_random=False))
def test_label_rows_box_row_in_a_polygon_file_is_never_a_two_point_polygon(label_image, polys, boxes, order):
    """A box row among polygon rows (issue 33: it silently became a 2-point polygon): it becomes its rectangle or is
    dropped with a message naming the file, and every kept segment has at least 3 points."""
    d, im = label_image
    rows = polys + boxes
    order.shuffle(rows)
    r = _verify(d, im, "\n".join(rows) + "\n")
    if r[0] is None:
        assert r[8] and "\n" not in r[8]
        return
    _check_kept_labels(r)
    assert all(len(s) >= 3 for s in r[3]), [len(s) for s in r[3]]


@budget(25, deadline_ms=10_000)
@given(w=st.sampled_from([0.0, 1e-9, 0.3]), h=st.sampled_from([0.0, 1e-9, 0.2]),
       collinear=st.booleans())
def test_degenerate_labels_never_reach_training(tmp_path_factory, label_image, w, h, collinear):
    """A zero-width or zero-height box, or a collinear polygon, is not among the labels the dataset hands AutoAnchor
    and the loss (issue 33: a NaN anchor fitness, a NaN loss blamed on lr0)."""
    assume(w == 0.0 or h == 0.0 or w < 1e-6 or h < 1e-6 or collinear)
    import cv2

    from utils.data.dataset import LoadImagesAndLabels
    d = tmp_path_factory.mktemp("degenerate")
    (d / "images").mkdir()
    (d / "labels").mkdir()
    for i in range(2):
        cv2.imwrite(str(d / "images" / f"{i}.jpg"), np.full((64, 64, 3), 90 + i, np.uint8))
    (d / "labels" / "0.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    bad = "1 0.1 0.1 0.5 0.5 0.9 0.9\n" if collinear else f"1 0.5 0.5 {w:.9f} {h:.9f}\n"
    (d / "labels" / "1.txt").write_text(("0 0.2 0.2 0.1 0.3 0.3 0.3\n" if collinear else "") + bad)
    ds = LoadImagesAndLabels(str(d / "images"), img_size=64, batch_size=2)
    for lb in ds.labels:
        if len(lb):
            assert (lb[:, 3] > 0).all() and (lb[:, 4] > 0).all(), lb


# -------------------------------------------------------------------------------------------------------- YAMLs
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20), st.floats(allow_nan=True),
                    st.text(max_size=20), st.sampled_from(["../../etc", "/", ".", "", "~", "nc", "1e-3", "0x1F"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
YAML_FRAGMENTS = st.sampled_from([
    "a: &x [1, 2]\nb: [*x, *x]\n", "!!python/object/apply:os.system ['true']", "a: !!binary aGVsbG8=\n",
    "? [1, 2]\n: x\n", "a: 1\na: 2\n", "%YAML 1.1\n---\na: 1\n", "--- 1\n--- 2\n", "a: '\\x00'\n", "{", "[[[[[[[[[",
    "a:\n  - b\n - c\n", "\t a: 1\n", "a: *undefined\n", "&a [*a]\n", "a: !!int x\n", "a: 1e999\n"])


def _yaml_text():
    return st.one_of(VALUES.map(lambda v: yaml.safe_dump(v, width=10 ** 6)), st.text(max_size=200), YAML_FRAGMENTS,
                     st.tuples(YAML_FRAGMENTS, YAML_FRAGMENTS).map("".join))


def _plain(v, depth=0):
    assert depth < 200
    if isinstance(v, dict):
        return all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in v.items())
    if isinstance(v, list):
        return all(_plain(x, depth + 1) for x in v)
    return v is None or isinstance(v, (bool, int, float, str, bytes))


EXPLICIT_SCALAR_TAG = re.compile(r"!!(int|float|bool|timestamp)\b")


@budget(100, deadline_ms=1000)
@given(text=_yaml_text())
def test_yaml_reader(text):
    """utils/yaml_files.parse_yaml: plain values (no Python objects built), or one YamlError line. (Explicit scalar
    tags with a value they cannot convert are test_yaml_reader_explicit_scalar_tags' cases.)"""
    from utils.yaml_files import YamlError, parse_yaml
    assume(not EXPLICIT_SCALAR_TAG.search(text))
    kind, v = outcome(lambda: parse_yaml(text, "x.yaml"), (YamlError,), python_mb=64)
    if kind == "ok":
        assert _plain(v)


@budget(30, deadline_ms=1000)
@example(text="0: !!int")
@example(text="a: !!bool x")
@given(text=st.builds(lambda tag, v: f"a: !!{tag} {v}\n", st.sampled_from(["int", "float", "bool", "timestamp"]),
                      st.one_of(st.text(max_size=8), st.sampled_from(["", ";", "x", "1", "0x", "2024-13-99", "yes"]))))
def test_yaml_reader_explicit_scalar_tags(text):
    from utils.yaml_files import YamlError, parse_yaml
    kind, v = outcome(lambda: parse_yaml(text, "x.yaml"), (YamlError,), python_mb=16)
    if kind == "ok":
        assert _plain(v) or isinstance(v["a"], __import__("datetime").date)


def _data_dicts(folder):
    base = {"path": str(folder), "train": "images", "val": "images", "nc": 2, "names": ["a", "b"]}
    keys = st.sampled_from(sorted(base) + ["test", "download"])
    return st.builds(lambda swaps, drop: {**{k: v for k, v in base.items() if k not in drop}, **swaps},
                     st.dictionaries(keys, VALUES, max_size=3), st.sets(st.sampled_from(sorted(base)), max_size=2))


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory):
    import cv2
    d = tmp_path_factory.mktemp("data")
    (d / "images").mkdir()
    cv2.imwrite(str(d / "images" / "a.jpg"), np.zeros((16, 16, 3), np.uint8))
    return d


@budget(120, deadline_ms=2000)
@given(data=st.data())
def test_data_yaml(data_folder, data, tmp_path_factory):
    """utils/dataset_config.check_dataset on any mapping a data YAML can hold: a usable dataset dict, or one
    DatasetError line; it never downloads (autodownload=False) and never runs a script."""
    from utils.dataset_config import check_dataset
    d = data.draw(_data_dicts(data_folder))
    f = data_folder / "d.yaml"
    f.write_text(yaml.safe_dump(d, width=10 ** 6))
    kind, r = outcome(lambda: check_dataset(str(f), autodownload=False), python_mb=64)
    if kind == "ok":
        assert isinstance(r["names"], dict) and r["nc"] == len(r["names"]) and r["nc"] >= 1
        assert all(isinstance(k, int) and isinstance(v, str) for k, v in r["names"].items())
        for k in ("train", "val"):
            assert isinstance(r[k], (str, list)), r[k]
        assert Path(r["path"]).resolve() != ROOT, "a data YAML made the project folder its dataset folder"


@budget(100, deadline_ms=1000)
@given(swaps=st.dictionaries(st.sampled_from(["lr0", "lrf", "momentum", "weight_decay", "box", "cls", "obj", "iou_t",
                                              "anchor_t", "fliplr", "mosaic", "anchors", "fl_gamma", "x"]),
                             VALUES, max_size=4),
       drop=st.sets(st.sampled_from(["lr0", "box", "mosaic"]), max_size=1))
def test_hyp_yaml(swaps, drop):
    """utils/engine/hyp.check_hyp: every known key a finite float in its range, or one HypError line."""
    from utils.engine.hyp import check_hyp
    base = yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())
    h = {k: v for k, v in {**base, **swaps}.items() if k not in drop}
    kind, r = outcome(lambda: check_hyp(h, "h.yaml"), python_mb=16)
    if kind == "ok":
        for k in set(r) & {"lr0", "momentum", "box", "fliplr", "mosaic"}:
            assert isinstance(r[k], float) and math.isfinite(r[k]) and r[k] >= 0


@budget(80, deadline_ms=1000)
@given(data=st.data())
def test_model_yaml_dict(data):
    """models/model_config.check_model_dict (and each layer's checks, as parse_model calls them) on a model YAML
    with values swapped: passes, or one ModelConfigError line."""
    import copy

    from models.model_config import check_model_dict
    base = yaml.safe_load((ROOT / "models/yolov5n.yaml").read_text())
    d = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(["nc", "depth_multiple", "width_multiple", "anchors", "backbone", "head",
                                           "layer", "arg", "ch"]))
        v = data.draw(VALUES)
        if where in ("layer", "arg"):
            part = d[data.draw(st.sampled_from(["backbone", "head"]))]
            if isinstance(part, list) and part:
                i = data.draw(st.integers(0, len(part) - 1))
                if where == "layer" or not isinstance(part[i], list) or not part[i]:
                    part[i] = v
                else:
                    part[i][data.draw(st.integers(0, len(part[i]) - 1))] = v
        else:
            d[where] = v
    outcome(lambda: check_model_dict(d, "m.yaml"), python_mb=32)


# -------------------------------------------------------------------------------------------------- checkpoints
@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """A small checkpoint in the official zip format, with tensors of several dtypes and a nested structure."""
    from utils.checkpoint import save_checkpoint
    f = tmp_path_factory.mktemp("ckpt") / "small.pt"
    save_checkpoint({"epoch": 3, "best_fitness": 0.5, "names": {0: "a", 1: "b"},
                     "w": np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.ones(5, np.float16),
                     "opt": {"imgsz": 64, "hyp": {"lr0": 0.01}}, "list": [1, 2.5, "x", None]}, f)
    return f


def _load_checkpoint(f):
    from utils.checkpoint import load_any
    return load_any(f)


CHECKPOINT_ERRORS = (UserError, FileNotFoundError)


@budget(120, deadline_ms=3000)
@given(data=st.data())
def test_checkpoint_bytes(small_checkpoint, tmp_path_factory, data):
    """utils/checkpoint.load_any on a small real checkpoint with bytes flipped, cut or spliced (the zip headers, the
    pickle, the storages): a result, or one CheckpointError line; and it never allocates more than the file could
    describe (issue 33: a 1.6 KB file asked for 16 GiB)."""
    good = small_checkpoint.read_bytes()
    b = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "splice", "int32"]))
        i = data.draw(st.integers(0, max(0, len(b) - 1)))
        if op == "flip":
            b[i] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del b[i:]
        elif op == "splice":
            b[i:i] = data.draw(st.binary(min_size=1, max_size=16))
        elif i + 4 <= len(b):  # a size, offset or count field set to an extreme value
            b[i:i + 4] = struct.pack("<I", data.draw(st.sampled_from([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 30])))
    f = tmp_path_factory.mktemp("c") / "m.pt"
    f.write_bytes(bytes(b))
    outcome(lambda: _load_checkpoint(f), CHECKPOINT_ERRORS, python_mb=128, rss_mb=512)


PICKLE_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=10),
              st.binary(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.sampled_from(["model", "ema", "epoch", "names", "opt", "yaml", "nc",
                                                             "stride", "x"]), inner, max_size=4)),
    max_leaves=10)


@budget(100, deadline_ms=3000)
@given(obj=PICKLE_VALUES, proto=st.sampled_from([2, 4]))
def test_checkpoint_structures(tmp_path_factory, obj, proto):
    """A zip checkpoint whose pickle holds any plain structure (a dict missing 'model', a list, a model that is an
    int): a result, or one CheckpointError line."""
    f = tmp_path_factory.mktemp("s") / "s.pt"
    with zipfile.ZipFile(f, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=proto))
        z.writestr("archive/version", "3\n")
    outcome(lambda: _load_checkpoint(f), CHECKPOINT_ERRORS, python_mb=64)


@budget(60, deadline_ms=3000)
@given(size=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=4),
       stride=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=4), offset=st.integers(0, 1 << 31),
       numel=st.integers(0, 64))
def test_checkpoint_tensor_views(tmp_path_factory, size, stride, offset, numel):
    """A tensor record whose size, stride and offset do not fit its storage (a stride-0 view of a huge size): read
    within the memory the file's bytes justify, or one CheckpointError line."""
    n = min(len(size), len(stride))
    f = tmp_path_factory.mktemp("v") / "v.pt"
    f.write_bytes(_tensor_pickle_zip(tuple(size[:n]), tuple(stride[:n]), offset, numel))
    outcome(lambda: _load_checkpoint(f), CHECKPOINT_ERRORS, python_mb=128, rss_mb=512)


def _op(v):
    """The pickle opcodes that push v (protocol 2, without the header and STOP)."""
    return pickle.dumps(v, protocol=2)[2:-1]


def _tensor_pickle_zip(size, stride, offset, numel):
    """A PyTorch zip file holding {'w': tensor} whose rebuild call carries the given size/stride/offset, its storage
    numel floats long: the opcodes torch.save writes, put together by hand."""
    def tup(xs):
        return b"(" + b"".join(_op(x) for x in xs) + b"t"
    storage = b"(" + _op("storage") + b"ctorch\nFloatStorage\n" + _op("0") + _op("cpu") + _op(numel) + b"tQ"
    args = b"(" + storage + _op(offset) + tup(size) + tup(stride) + b"\x89" + b"ccollections\nOrderedDict\n)R" + b"t"
    pkl = b"\x80\x02}" + _op("w") + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"Rs."
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/data/0", bytes(4 * numel))
        z.writestr("archive/version", "3\n")
    return out.getvalue()


# --------------------------------------------------------------------------------------------------- image headers
def _png(width, height, bit_depth=8, colour=2, body=b""):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def real_images():
    import cv2
    im = np.random.default_rng(0).integers(0, 255, (24, 32, 3), np.uint8)
    return {ext: cv2.imencode(ext, im)[1].tobytes() for ext in (".jpg", ".png", ".bmp")}


@budget(100, deadline_ms=3000)
@given(data=st.data())
def test_image_headers(real_images, tmp_path_factory, data):
    """utils/data/media.read_image and the dataset scan (utils/data/labels._verify_pair) on images whose header says
    anything (dimensions up to 2^32-1, bit depths, colour types, a cut body): an image, or FileNotFoundError naming
    the file (read_image's documented error); the scan drops the pair with one line; memory stays bounded."""
    from utils.data.labels import _verify_pair
    from utils.data.media import read_image
    kind = data.draw(st.sampled_from(["png-header", "mutated"]))
    if kind == "png-header":
        dims = st.one_of(st.integers(0, 64), st.sampled_from([1 << 16, 1 << 20, 1 << 31, (1 << 32) - 1]))
        raw = _png(data.draw(dims), data.draw(dims), data.draw(st.sampled_from([1, 2, 4, 8, 16, 3])),
                   data.draw(st.sampled_from([0, 2, 3, 4, 6, 7])), data.draw(st.binary(max_size=256)))
        ext = ".png"
    else:
        ext = data.draw(st.sampled_from(sorted(real_images)))
        b = bytearray(real_images[ext])
        head = min(len(b), 64)  # the header: sizes, markers, offsets
        for _ in range(data.draw(st.integers(1, 4))):
            b[data.draw(st.integers(0, head - 1))] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            del b[data.draw(st.integers(0, len(b))):]
        raw = bytes(b)
    f = tmp_path_factory.mktemp("img") / f"x{ext}"
    f.write_bytes(raw)
    k, im = outcome(lambda: read_image(str(f)), (FileNotFoundError, UserError), python_mb=256, rss_mb=1024)
    if k == "ok":
        assert im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8
    k, r = outcome(lambda: _verify_pair((str(f), str(f.with_suffix(".txt")), "")), python_mb=256, rss_mb=1024)
    assert k == "ok" and (r[0] is not None or (r[8] and "\n" not in r[8]))


# ---------------------------------------------------------------------------------------------------- evolve.csv
EVOLVE_CELLS = st.one_of(st.floats(0, 1).map(lambda v: f"{v:.5g}"), NUMBER_TOKENS)


@budget(100, deadline_ms=2000)
@given(data=st.data())
def test_evolve_csv(tmp_path_factory, data):
    """utils/evolve.mutate reading evolve.csv (a row cut short by a crash, NaN, text, extra or missing columns, a
    header only): a child hyp whose genes are finite and within their limits, or one EvolveError line."""
    from utils.evolve import META, RESULT_KEYS, mutate
    base = yaml.safe_load((ROOT / "data/hyps/hyp.scratch-low.yaml").read_text())
    keys = list(RESULT_KEYS) + list(base)
    header = ",".join(f"{k:>20s}" for k in keys)
    rows = []
    for _ in range(data.draw(st.integers(0, 5))):
        cells = [f"{v:20.5g}" for v in np.random.default_rng(len(rows)).uniform(0, 1, len(keys))]
        for _ in range(data.draw(st.integers(0, 3))):
            cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(EVOLVE_CELLS)
        if data.draw(st.booleans()):
            cells = cells[:data.draw(st.integers(0, len(cells)))]  # a row cut short
        rows.append(",".join(cells))
    if data.draw(st.booleans()):
        header = header[:data.draw(st.integers(0, len(header)))]
    f = tmp_path_factory.mktemp("evolve") / "evolve.csv"
    f.write_text("\n".join([header, *rows]) + "\n")
    kind, h = outcome(lambda: mutate(base, f, rng=np.random.default_rng(0)), python_mb=32)
    if kind == "ok":
        for k, (_, low, high) in META.items():
            if k in h:
                assert math.isfinite(float(h[k])) and low - 1e-12 <= float(h[k]) <= high + 1e-12, (k, h[k])
