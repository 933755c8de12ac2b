"""The loader: batch format, rect batches, DDP sampler shares, deterministic workers, quad, image weights,
LoadImages."""
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from utils.backend import to_numpy, torch
from utils.dataloaders import LoadImages, LoadImagesAndLabels, YoloSampler, create_dataloader
from utils.general import ROOT


def hyp():
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """12 small images with a box each (the generator's own output, 96 px)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    root = tmp_path_factory.mktemp("small")
    gen.make_shapes(root, n_train=12, n_val=4, size=96, seed=3)
    return root / "images" / "train"


def test_val_loader_batches_on_coco128(coco128_dir):
    loader, ds = create_dataloader(str(coco128_dir / "images" / "train2017"), 320, 32, 32, rect=True, pad=0.5,
                                   workers=0, prefix="val: ")
    assert ds.batch_shapes is not None and (ds.batch_shapes % 32 == 0).all()
    n_img, n_box = 0, 0
    for bi, (imgs, targets, paths, shapes) in enumerate(loader):
        assert imgs.dtype == torch.uint8 and imgs.ndim == 4 and imgs.shape[1] == 3
        assert tuple(imgs.shape[2:]) == tuple(int(x) for x in ds.batch_shapes[bi])
        t = to_numpy(targets)
        assert t.dtype == np.float32 and t.shape[1] == 6
        assert (t[:, 0] >= 0).all() and (t[:, 0] < imgs.shape[0]).all()
        assert ((t[:, 2:] >= 0) & (t[:, 2:] <= 1)).all()
        assert isinstance(paths, tuple) and len(paths) == imgs.shape[0]
        (h0, w0), ((gh, gw), (padw, padh)) = shapes[0]
        assert h0 > 0 and w0 > 0 and 0 < gh <= 1 and padw >= 0 and padh >= 0
        n_img += imgs.shape[0]
        n_box += t.shape[0]
    assert n_img == 128 and n_box == 929  # every image, every box (REFERENCE.md)
    # rect order: by aspect ratio, equal ratios in file order (39 of coco128's images are 4:3). numpy's default
    # sort orders those ties differently in numpy 1 (OneFlow's) and 2, which put different images in each padded
    # batch and gave the two backends different mAP
    ar = ds.shapes[:, 1] / ds.shapes[:, 0]
    assert (np.diff(ar) >= 0).all()
    names = np.array([Path(f).name for f in ds.im_files])
    for v in np.unique(ar):
        tied = names[ar == v]
        assert list(tied) == sorted(tied), f"images of aspect ratio {v:.3f} are not in file order"


def test_rgb_order_and_letterbox_values(small_set):
    loader, ds = create_dataloader(str(small_set), 96, 4, 32, workers=0)
    imgs, targets, paths, shapes = next(iter(loader))
    im0 = cv2.imread(paths[0])  # BGR, 96x96: no resize, no padding
    np.testing.assert_array_equal(to_numpy(imgs[0]), im0[..., ::-1].transpose(2, 0, 1))


def test_sampler_ddp_disjoint_shares_and_epochs():
    class D:
        indices = np.arange(10)

        def __len__(self):
            return 10

    d = D()
    shares = []
    for rank in range(2):
        s = YoloSampler(d, shuffle=True, seed=5, rank=rank, world_size=2)
        s.set_epoch(3)
        shares.append(list(s))
    assert len(shares[0]) == len(shares[1]) == 5
    assert set(shares[0]).isdisjoint(shares[1]) and set(shares[0]) | set(shares[1]) == set(range(10))
    s = YoloSampler(d, shuffle=True, seed=5, rank=0, world_size=2)
    s.set_epoch(3)
    assert list(s) == shares[0]  # same (seed, epoch): same share on every run
    s.set_epoch(4)
    assert list(s) != shares[0]  # reshuffled per epoch
    # 3 ranks over 10 items: padded to 12, every item covered
    got = []
    for rank in range(3):
        s = YoloSampler(d, shuffle=True, seed=0, rank=rank, world_size=3)
        got += list(s)
        assert len(s) == 4
    assert set(got) == set(range(10)) and len(got) == 12
    # without set_epoch the order still changes every pass (single process training)
    s = YoloSampler(d, shuffle=True, seed=0, rank=0, world_size=1)
    assert list(s) != list(s)
    # shares are fixed for the run (so --cache holds only them): the same set in every epoch
    for e in (0, 1):
        s = YoloSampler(d, shuffle=True, seed=5, rank=1, world_size=2)
        s.set_epoch(e)
        assert set(s) == set(shares[1])
    # ordered (--rect) data: each rank takes whole batches, so a collated batch never mixes letterbox shapes
    s = YoloSampler(d, shuffle=False, seed=0, rank=1, world_size=2, batch_size=2)
    assert list(s) == [2, 3, 6, 7, 7]  # batches {2,3}, {6,7}, padded with its own last item
        # image weights: the sampler maps through dataset.indices, in the main process
    d.indices = np.array([7] * 10)
    assert set(YoloSampler(d, shuffle=True, seed=0, rank=0, world_size=1)) == {7}


def _epochs(loader, n=2):
    out = []
    for _ in range(n):
        out.append([(to_numpy(i).copy(), to_numpy(t).copy()) for i, t, _, _ in loader])
    return out


def test_workers_are_seeded_and_persistent(small_set):
    kw = dict(hyp=hyp(), augment=True, workers=2, shuffle=True)
    a, ds = create_dataloader(str(small_set), 64, 4, 32, seed=1, **kw)
    assert a.num_workers == 2 and a.persistent_workers
    ea = _epochs(a)
    b, _ = create_dataloader(str(small_set), 64, 4, 32, seed=1, **kw)
    eb = _epochs(b)
    for ep_a, ep_b in zip(ea, eb):  # same seed: identical augmented batches
        for (ia, ta), (ib, tb) in zip(ep_a, ep_b):
            np.testing.assert_array_equal(ia, ib)
            np.testing.assert_array_equal(ta, tb)
    assert not np.array_equal(ea[0][0][0], ea[1][0][0])  # epoch 2 is not a replay of epoch 1
    c, _ = create_dataloader(str(small_set), 64, 4, 32, seed=2, **kw)
    ec = _epochs(c, 1)
    assert not np.array_equal(ea[0][0][0], ec[0][0][0])  # another seed, other augmentations


def test_quad_collate(small_set):
    loader, _ = create_dataloader(str(small_set), 64, 8, 32, workers=0, quad=True)
    imgs, targets, paths, shapes = next(iter(loader))
    assert tuple(imgs.shape) == (2, 3, 128, 128) and len(paths) == 2
    t = to_numpy(targets)
    assert (t[:, 0] < 2).all() and ((t[:, 2:] >= 0) & (t[:, 2:] <= 1)).all()


def test_single_cls_and_rect_padding(small_set):
    _, ds = create_dataloader(str(small_set), 64, 4, 32, workers=0, single_cls=True)
    assert all((lb[:, 0] == 0).all() for lb in ds.labels)


def test_load_images_folder_txt_and_letterbox(small_set, tmp_path):
    files = sorted(small_set.glob("*.jpg"))[:3]
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(str(f) for f in files))
    for src, n in ((str(small_set), 12), (str(lst), 3), (str(files[0]), 1), (str(small_set / "*.jpg"), 12)):
        li = LoadImages(src, img_size=64, stride=32)
        assert len(li) == n
        path, im, im0, cap, s = next(iter(li))
        assert im.shape == (3, 64, 64) and im.dtype == np.uint8 and im.flags.c_contiguous
        assert im0.shape == (96, 96, 3) and cap is None and path in s
        np.testing.assert_array_equal(im, cv2.resize(im0, (64, 64))[..., ::-1].transpose(2, 0, 1))
    with pytest.raises(FileNotFoundError):
        LoadImages(str(tmp_path / "nope"))


def test_dataset_item_format(small_set):
    ds = LoadImagesAndLabels(str(small_set), img_size=64, batch_size=2, augment=True, hyp=hyp())
    im, labels, path, shapes = ds[0]
    assert im.shape == (3, 64, 64) and labels.shape[1] == 6 and shapes is None  # mosaic: no shapes


def test_load_images_video(tmp_path):
    f = tmp_path / "v.avi"
    w = cv2.VideoWriter(str(f), cv2.VideoWriter_fourcc(*"MJPG"), 10, (80, 60))
    if not w.isOpened():
        pytest.skip("no video writer in this OpenCV build")
    for i in range(5):
        w.write(np.full((60, 80, 3), i * 40, np.uint8))
    w.release()
    frames = list(LoadImages(str(f), img_size=64, stride=32))
    assert len(frames) == 5
    path, im, im0, cap, s = frames[0]
    assert cap is not None and im0.shape == (60, 80, 3) and im.shape == (3, 64, 64) and s.startswith("video 1/1 (1/5)")
    frames = list(LoadImages(str(f), img_size=64, stride=32, vid_stride=2))
    assert len(frames) == 2  # every 2nd frame


def test_ddp_rank_caches_only_its_share(small_set):
    shares = []
    for rank in range(2):
        ds = LoadImagesAndLabels(str(small_set), 96, 2, cache_images="ram", rank=rank, world_size=2, seed=3)
        cached = [i for i, im in enumerate(ds.ims) if im is not None]
        assert cached == sorted(int(i) for i in ds.indices)
        shares.append(set(cached))
    assert shares[0].isdisjoint(shares[1]) and len(shares[0] | shares[1]) == ds.n
