"""The label cache (labels/<split>.cache): never runs code from the file, sees every label edit, and cleans up
after an interrupted write."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from utils.dataloaders import LoadImagesAndLabels, create_dataloader
from utils.general import ROOT

NAMES = ["000000000009", "000000000025", "000000000030"]


@pytest.fixture
def three_images(tmp_path, coco128_dir):
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in NAMES:
        shutil.copy(coco128_dir / "images" / "train2017" / f"{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / "labels" / "train2017" / f"{n}.txt", tmp_path / "labels")
    return tmp_path / "images"


class MakesMarker:
    """Unpickling this calls os.system: what a hostile labels.cache would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def _assert_loads(images, n_boxes):
    """Training (mosaic) and validation (--rect) loaders both load every image and box."""
    for kw in (dict(augment=True, hyp=_hyp(), shuffle=True), dict(rect=True, pad=0.5)):
        loader, ds = create_dataloader(str(images), 64, 2, 32, workers=0, **kw)
        assert len(ds) == len(NAMES) and sum(len(x) for x in ds.labels) == n_boxes
        assert sum(imgs.shape[0] for imgs, *_ in loader) == len(NAMES)


def _hyp():
    import yaml
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        return yaml.safe_load(f)


def test_pickle_in_old_format_cache_never_runs(three_images, tmp_path, log_lines):
    """ultralytics' format: np.save of a dict (a pickle). Loading it would run the payload."""
    n_boxes = sum(len(LoadImagesAndLabels(str(three_images), 64, 2).labels[i]) for i in range(3))
    marker = tmp_path / "pwned"
    cache = tmp_path / "labels.cache"
    cache.unlink()
    with open(cache, "wb") as f:  # exactly what np.save(path, dict) writes, with a payload inside
        np.save(f, np.array({"version": "0.0", "hash": "x", "payload": MakesMarker(marker)}, dtype=object),
                allow_pickle=True)
    log_lines.clear()
    _assert_loads(three_images, n_boxes)
    assert not marker.exists()
    warned = [x for x in log_lines if "labels.cache" in x and "WARNING" in x]
    assert len(warned) == 1, log_lines  # one line, then the rebuilt cache is used silently
    assert "rebuilt" in warned[0] or "rebuilding" in warned[0]
    assert LoadImagesAndLabels(str(three_images), 64, 2).cache_hit


def test_hostile_arrays_in_new_format_cache_never_run(three_images, tmp_path, log_lines):
    """A cache that looks like this project's (a zip of arrays), with a pickled object array inside."""
    n_boxes = sum(len(x) for x in LoadImagesAndLabels(str(three_images), 64, 2).labels)
    marker = tmp_path / "pwned"
    cache = tmp_path / "labels.cache"
    good = dict(np.load(cache, allow_pickle=False))
    for key in list(good):
        bad = dict(good)
        bad[key] = np.array([MakesMarker(marker)], dtype=object)
        with open(cache, "wb") as f:
            np.savez(f, **bad)
        _assert_loads(three_images, n_boxes)
        assert not marker.exists(), key
    # a bare pickle stream under the cache's name, and garbage
    import pickle
    for payload in (pickle.dumps(MakesMarker(marker)), b"\x93NUMPY garbage", b""):
        cache.write_bytes(payload)
        _assert_loads(three_images, n_boxes)
        assert not marker.exists()


def test_same_size_label_edit_is_seen(three_images, tmp_path):
    """class 45 -> 46 keeps the byte count: the cache key must still change."""
    ds1 = LoadImagesAndLabels(str(three_images), 64, 2)
    lb = tmp_path / "labels" / f"{NAMES[0]}.txt"
    text = lb.read_text()
    assert text.startswith("45 ")
    size, mtime = lb.stat().st_size, lb.stat().st_mtime_ns
    lb.write_text("46" + text[2:])
    assert lb.stat().st_size == size and lb.stat().st_mtime_ns != mtime
    ds2 = LoadImagesAndLabels(str(three_images), 64, 2)
    assert ds1.labels[0][0, 0] == 45 and not ds2.cache_hit
    assert ds2.labels[0][0, 0] == 46
    assert LoadImagesAndLabels(str(three_images), 64, 2).cache_hit


def test_temp_files_of_an_interrupted_cache_write_are_removed(three_images, tmp_path):
    """A process killed while it writes the cache leaves its temporary file; the next start removes it."""
    code = ("import os, signal\n"
            "import utils.dataloaders as dl\n"
            "def killed(*a, **k): os.kill(os.getpid(), signal.SIGKILL)\n"
            "os.replace = killed  # dies after writing the temporary file, before renaming it\n"
            f"dl.LoadImagesAndLabels({str(three_images)!r}, 64, 2)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_QUIET": "1"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, p.stderr[-2000:]
    left = [f for f in tmp_path.iterdir() if f.name.startswith("labels.cache") and f.name != "labels.cache"]
    assert left and not (tmp_path / "labels.cache").exists()  # the interrupted write's temporary file
    ds = LoadImagesAndLabels(str(three_images), 64, 2)
    assert len(ds) == 3 and (tmp_path / "labels.cache").is_file()
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith("labels.cache")] == ["labels.cache"]
