"""data/scripts/slice_dataset.py (utils/data/tiling.py): a YOLO dataset cut into overlapping tiles, boxes clipped,
polygons cut by the tile edges, a minimum visible area ratio, a new dataset YAML; on a synthetic shapes set."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from utils.data.tiling import clip_polygon, polygon_area, read_label_file, slice_dataset, tile_labels
from utils.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.framework_free  # numpy and OpenCV only: the same on both backends, run once


def _shapes_set(root, **kw):
    """A small shapes set and its YAML."""
    m = _make_shapes()
    src = m.make_shapes(root, **kw)
    f = root / "shapes.yaml"
    f.write_text(yaml.safe_dump({"path": str(src), "train": "images/train", "val": "images/val", "names": m.NAMES}))
    return src, f


def _make_shapes():
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_box_clipped_to_the_tile_and_dropped_below_the_area_ratio():
    # a 100 x 100 image; box 40-60 x 40-60 (normalized 0.5 0.5 0.2 0.2); tile 0-50 x 0-50 sees a quarter of it
    labels = [(3, np.array([[0.4, 0.4], [0.6, 0.6]]), False)]
    assert tile_labels(labels, [0, 0, 50, 50], (100, 100), 0.25) == ["3 0.900000 0.900000 0.200000 0.200000"]
    assert tile_labels(labels, [0, 0, 50, 50], (100, 100), 0.26) == []  # 25% visible < 26%
    assert tile_labels(labels, [0, 0, 50, 45], (100, 100), 0.1) == ["3 0.900000 0.944444 0.200000 0.111111"]


def test_polygon_cut_by_the_tile_edges():
    square = np.array([[10, 10], [30, 10], [30, 30], [10, 30]], float)
    cut = clip_polygon(square, 0, 0, 20, 40)
    assert polygon_area(cut) == pytest.approx(200)  # the left half
    assert cut[:, 0].max() == pytest.approx(20)
    assert len(clip_polygon(square, 40, 40, 50, 50)) == 0  # wholly outside
    labels = [(1, square / 100, True)]
    (line,) = tile_labels(labels, [0, 0, 20, 40], (100, 100), 0.5)  # half inside, ratio 0.5: kept
    v = np.array(line.split()[1:], float).reshape(-1, 2) * (20, 40)
    assert line.split()[0] == "1" and polygon_area(v) == pytest.approx(200, rel=1e-4)
    assert tile_labels(labels, [0, 0, 20, 40], (100, 100), 0.51) == []


def test_bad_label_line_is_one_line(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("0 0.5 0.5 0.1\n")
    with pytest.raises(UserError, match=r"a.txt:1: 4 values: a box has 5"):
        read_label_file(f)


@pytest.mark.parametrize("segments", [False, True])
def test_slice_a_synthetic_set(tmp_path, segments):
    src, data = _shapes_set(tmp_path / "src", n_train=2, n_val=1, size=320, segments=segments, max_objects=12,
                            radius=(0.02, 0.05))
    out = tmp_path / "tiles"
    f = slice_dataset(data, out, size=160, overlap=0.25, min_area_ratio=0.1)
    assert f == out / "tiles.yaml"
    d = yaml.safe_load(f.read_text())
    assert d["nc"] == 6 and d["train"] == "images/train" and d["val"] == "images/val"
    # 320 at 160 with 40 px overlap: starts 0, 120, then 160 (moved back to end on the edge): 9 tiles an image
    tiles = sorted((out / "images" / "train").glob("*.jpg"))
    assert len(tiles) == 2 * 9 and len(list((out / "images" / "val").glob("*.jpg"))) == 9
    assert tiles[0].name == "train_00000_0_0_160_160.jpg" and cv2.imread(str(tiles[0])).shape == (160, 160, 3)
    n_src = sum(len(read_label_file(p)) for p in (src / "labels" / "train").glob("*.txt"))
    lines = [ln for p in (out / "labels" / "train").glob("*.txt") for ln in p.read_text().splitlines()]
    assert len(lines) >= n_src  # every object lies in at least one tile, most in several
    for ln in lines:
        v = np.array(ln.split()[1:], float)
        assert (v >= 0).all() and (v <= 1).all() and (len(v) == 4) != segments
    assert not list(out.parent.glob("*yolo-partial*"))  # built aside, moved in whole


def test_command_line_and_bad_ratio(tmp_path):
    src, data = _shapes_set(tmp_path / "src", n_train=1, n_val=1, size=200)
    r = subprocess.run([sys.executable, str(ROOT / "data" / "scripts" / "slice_dataset.py"), "--data", str(data),
                        "--out", str(tmp_path / "o"), "--slice", "128", "--drop-empty"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "o" / "o.yaml").is_file()
    assert all(p.read_text() for p in (tmp_path / "o" / "labels" / "train").glob("*.txt"))  # no empty tiles
    r = subprocess.run([sys.executable, str(ROOT / "data" / "scripts" / "slice_dataset.py"), "--data", str(data),
                        "--out", str(tmp_path / "p"), "--overlap", "1.0"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "slice overlap 1.0 is outside [0, 1)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "p").exists()
