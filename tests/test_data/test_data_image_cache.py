"""--cache ram / --cache disk: same images as no cache, .npy at the training size, reused, invalidated on change."""
import os
import shutil
import stat

import cv2
import numpy as np
import pytest

import utils.data.image_cache as image_cache
from utils.dataloaders import LoadImagesAndLabels


@pytest.fixture
def four_images(tmp_path, coco128_dir):
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in ("000000000009", "000000000025", "000000000030", "000000000034"):
        shutil.copy(coco128_dir / "images" / "train2017" / f"{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / "labels" / "train2017" / f"{n}.txt", tmp_path / "labels")
    return tmp_path / "images"


def _items(ds):
    return [ds[i][0] for i in range(len(ds))]


def test_ram_cache_same_images_at_training_size(four_images):
    plain = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2)
    ram = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="ram")
    assert ram.cache == "ram" and all(im is not None for im in ram.ims)
    assert all(max(im.shape[:2]) == 160 for im in ram.ims)  # resized, not full resolution
    for a, b in zip(_items(plain), _items(ram)):
        np.testing.assert_array_equal(a, b)


def test_ram_cache_refused_when_memory_is_short(four_images, monkeypatch):
    from utils.memory_limits import MemoryLimit
    monkeypatch.setattr(image_cache, "_mem_available", lambda: MemoryLimit(1000, "test"))  # 1 kB free
    ds = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="ram")
    assert ds.cache is None and all(im is None for im in ds.ims)
    assert len(_items(ds)) == 4  # still loads, from the files


def test_ram_cache_sized_from_the_container_limit(four_images, monkeypatch, tmp_path, caplog):
    """A memory cgroup tighter than the host (a fake cgroup v2 tree: 64 kB left of a 1 MB limit, the host's 64 GB
    free): the cache says so in one line naming the limit and falls back to reading the files, not OOM-killed."""
    import logging
    from utils import memory_limits
    (tmp_path / "cg" / "box").mkdir(parents=True)
    (tmp_path / "cg" / "box" / "memory.max").write_text(f"{1 << 20}\n")
    (tmp_path / "cg" / "box" / "memory.current").write_text(f"{(1 << 20) - (64 << 10)}\n")  # 64 kB left
    (tmp_path / "self_cgroup").write_text("0::/box\n")
    (tmp_path / "meminfo").write_text("MemTotal: 131072000 kB\nMemAvailable: 67108864 kB\n")
    monkeypatch.setattr(memory_limits, "CGROUP_ROOT", str(tmp_path / "cg"))
    monkeypatch.setattr(memory_limits, "PROC_SELF_CGROUP", str(tmp_path / "self_cgroup"))
    monkeypatch.setattr(memory_limits, "MEMINFO", str(tmp_path / "meminfo"))
    with caplog.at_level(logging.INFO, logger="yolov5"):
        ds = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="ram")
    assert ds.cache is None and all(im is None for im in ds.ims) and len(_items(ds)) == 4
    lines = [r.getMessage() for r in caplog.records if "not caching images in RAM" in r.getMessage()]
    assert len(lines) == 1 and "0.00GB available (memory cgroup limit" in lines[0], lines
    assert str(tmp_path / "cg" / "box" / "memory.max") in lines[0]


def test_disk_cache_written_reused_and_invalidated(four_images):
    plain = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2)
    ds = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="disk")
    npys = sorted(four_images.glob("*.npy"))
    assert len(npys) == 4
    for f in npys:
        assert max(np.load(f).shape[:2]) == 160  # training size
    for a, b in zip(_items(plain), _items(ds)):
        np.testing.assert_array_equal(a, b)
    mtimes = {f: f.stat().st_mtime_ns for f in npys}
    LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="disk")
    assert {f: f.stat().st_mtime_ns for f in sorted(four_images.glob("*.npy"))} == mtimes  # reused, not rewritten
    # the image changes: its .npy is replaced and the new content is served
    target = four_images / "000000000009.jpg"
    im = cv2.imread(str(target))
    im[:] = 255 - im
    cv2.imwrite(str(target), im)
    ds2 = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="disk")
    npys2 = sorted(four_images.glob("000000000009.*.npy"))
    assert len(npys2) == 1 and npys2[0] not in mtimes  # old one removed, new one written
    i = [os.path.basename(f) for f in ds2.im_files].index("000000000009.jpg")
    fresh = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2)
    np.testing.assert_array_equal(ds2[i][0], fresh[i][0])
    # another training size gets its own files
    LoadImagesAndLabels(str(four_images), img_size=96, batch_size=2, cache_images="disk")
    assert len(list(four_images.glob("*.96.*.npy"))) == 4


def test_disk_cache_for_read_only_images_goes_to_cache_dir(four_images, tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "usercache"))
    os.chmod(four_images, stat.S_IRUSR | stat.S_IXUSR)
    try:
        ds = LoadImagesAndLabels(str(four_images), img_size=96, batch_size=2, cache_images="disk")
        assert not list(four_images.glob("*.npy"))
        written = list((tmp_path / "usercache").rglob("*.npy"))
        assert len(written) == 4
        assert all(str(tmp_path / "usercache") in f for f in ds.npy_files)
        assert len(_items(ds)) == 4
    finally:
        os.chmod(four_images, 0o755)


def test_mosaic_from_caches_matches_files(four_images):
    """The fused mosaic reads cached (resized) images or decodes files: same draws. The pixels differ by how the
    640 px photographs shrink to 160: a file is decoded at reduced size by the JPEG decoder and warped once, a
    cached image was resized as the official loader does (7.8 grey levels apart on average here)."""
    import random
    import yaml
    from utils.general import ROOT
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = yaml.safe_load(f)
    a = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, augment=True, hyp=hyp)
    b = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, augment=True, hyp=hyp, cache_images="ram")
    for i in range(4):
        out = []
        for ds in (a, b):
            random.seed(i)
            np.random.seed(i)
            out.append(ds[i])
        np.testing.assert_allclose(out[0][1], out[1][1], atol=1e-5)
        assert np.abs(out[0][0].astype(int) - out[1][0].astype(int)).mean() < 10.0
