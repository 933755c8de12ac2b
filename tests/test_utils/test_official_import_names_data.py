"""Official import names users' scripts take from utils.augmentations, utils.dataloaders, utils.plots, utils.metrics
and (through utils/classifier_output.py) utils.torch_utils: each does what the official one does. Expected numbers
marked "official" were computed once with ultralytics/yolov5's own functions and are written here as data."""
import shutil
from pathlib import Path

import numpy as np
import pytest

from utils.backend import nn, to_numpy, torch
from utils.errors import UserError

# A deterministic BGR test image (37 x 53): no decoder involved, so the official values below stay exact
IM = ((np.arange(37 * 53 * 3).reshape(37, 53, 3) * 7 + np.arange(37)[:, None, None] * 13) % 256).astype(np.uint8)
# official classify_transforms(16)(IM) at [channel, row, column], and the sum of the whole tensor
OFFICIAL_CLS16 = {(0, 0, 0): -0.491052, (1, 5, 7): 1.168067, (2, 15, 15): 1.036514, (0, 8, 3): 1.42692,
                  (2, 11, 12): -0.096383}
OFFICIAL_CLS16_SUM = 163.2326
# official ToTensor()(CenterCrop((10, 12))(IM)) at [c, y, x]; official CenterCrop(8)(IM) pixels [0, 0] and [7, 7]
OFFICIAL_TOTENSOR = {(0, 0, 0): 0.333333, (2, 9, 11): 0.345098, (1, 4, 5): 0.470588}
OFFICIAL_CROP8 = {(0, 0): (135, 142, 149), (7, 7): (190, 28, 35)}


def test_the_official_names_import():
    from utils.augmentations import (IMAGENET_MEAN, IMAGENET_STD, Albumentations, CenterCrop,  # noqa: F401
                                     ToTensor, classify_albumentations, classify_transforms, denormalize)
    from utils.dataloaders import (PIN_MEMORY, ClassificationDataset, InfiniteDataLoader,  # noqa: F401
                                   LoadScreenshots, SmartDistributedSampler, create_classification_dataloader,
                                   letterbox)
    from utils.metrics import process_batch  # noqa: F401
    from utils.plots import hist2d, imshow_cls, plot_val_study  # noqa: F401
    import utils.dataloaders as facade
    assert {"ClassificationDataset", "InfiniteDataLoader", "LoadScreenshots", "PIN_MEMORY", "SmartDistributedSampler",
            "create_classification_dataloader", "letterbox"} <= set(facade.__all__)
    assert isinstance(PIN_MEMORY, bool)


# ------------------------------------------------------------------------------------------------ augmentations
def test_classify_transforms_matches_official_and_the_classification_pipeline():
    from utils.augmentations import classify_transforms
    from utils.classify.dataset import classify_transform
    x = classify_transforms(16)(IM)
    assert tuple(x.shape) == (3, 16, 16) and str(x.dtype).endswith("float32")
    x = to_numpy(x)
    for (c, i, j), v in OFFICIAL_CLS16.items():
        assert x[c, i, j] == pytest.approx(v, abs=1e-5), (c, i, j)
    assert x.sum() == pytest.approx(OFFICIAL_CLS16_SUM, abs=1e-2)
    np.testing.assert_array_equal(x, classify_transform(IM, 16))  # the same numbers as classify/val.py's items
    with pytest.raises(TypeError, match="integer"):
        classify_transforms((16, 16))


def test_center_crop_and_to_tensor():
    from utils.augmentations import CenterCrop, ToTensor
    crop = CenterCrop(8)(IM)
    assert crop.shape == (8, 8, 3) and crop.dtype == np.uint8
    for (i, j), px in OFFICIAL_CROP8.items():
        assert tuple(crop[i, j]) == px
    assert CenterCrop((10, 12))(IM).shape == (10, 12, 3)  # (h, w)
    t = ToTensor()(CenterCrop((10, 12))(IM))
    assert tuple(t.shape) == (3, 10, 12) and str(t.dtype).endswith("float32")
    for (c, i, j), v in OFFICIAL_TOTENSOR.items():
        assert float(t[c, i, j]) == pytest.approx(v, abs=1e-6)
    im = np.zeros((2, 2, 3), np.uint8)
    im[..., 0] = 255  # blue in BGR -> channel 2 in RGB
    t = to_numpy(ToTensor()(im))
    assert t[2].min() == 1.0 and t[:2].max() == 0.0
    assert str(ToTensor(half=True)(im).dtype).endswith("float16")


def test_denormalize_inverts_the_normalisation():
    from utils.augmentations import IMAGENET_MEAN, IMAGENET_STD, classify_transform, denormalize
    from utils.augmentations import center_crop
    x = classify_transform(IM, 16)[None].copy()
    rgb01 = center_crop(IM, 16)[:, :, ::-1].transpose(2, 0, 1)[None] / 255.0
    np.testing.assert_allclose(denormalize(x), rgb01, atol=1e-6)  # numpy, in place
    t = torch.zeros(2, 3, 4, 4)
    assert denormalize(t) is t
    np.testing.assert_allclose(to_numpy(t)[1, :, 0, 0], IMAGENET_MEAN, rtol=1e-6)
    assert IMAGENET_STD == (0.229, 0.224, 0.225)


def test_albumentations_without_the_package_is_a_no_op(monkeypatch):
    import sys
    from utils import augmentations
    from utils.augmentations import Albumentations, classify_albumentations
    monkeypatch.setitem(sys.modules, "albumentations", None)  # import albumentations -> ImportError, installed or not
    a = Albumentations(size=64)
    assert a.transform is None
    labels = np.array([[0, 0.5, 0.5, 0.2, 0.2]])
    im2, labels2 = a(IM, labels)
    assert im2 is IM and labels2 is labels
    warned = []
    monkeypatch.setattr(augmentations.LOGGER, "warning", warned.append)
    assert classify_albumentations(augment=True, size=32) is None  # official: a warning, then None
    assert len(warned) == 1 and "pip install albumentations" in warned[0]


def _fake_albumentations(version):
    """A stand-in albumentations module: each transform records its arguments, Compose records its list."""
    import types

    class Op:
        def __init__(self, *args, p=1.0, **kw):
            self.args, self.kw, self.p = args, kw, p

        def __repr__(self):
            return type(self).__name__

    A = types.ModuleType("albumentations")
    A.__version__ = version
    for name in ("RandomResizedCrop", "Blur", "MedianBlur", "ToGray", "CLAHE", "RandomBrightnessContrast",
                 "RandomGamma", "ImageCompression", "HorizontalFlip", "VerticalFlip", "ColorJitter",
                 "SmallestMaxSize", "CenterCrop", "Normalize", "BboxParams", "Compose"):
        setattr(A, name, type(name, (Op,), {}))
    A.pytorch = types.ModuleType("albumentations.pytorch")
    A.pytorch.ToTensorV2 = type("ToTensorV2", (Op,), {})
    return A


@pytest.mark.parametrize("version", ["1.3.1", "2.0.5"])
def test_albumentations_pipelines_when_installed(monkeypatch, version):
    import sys
    from utils.augmentations import Albumentations, classify_albumentations
    A = _fake_albumentations(version)
    monkeypatch.setitem(sys.modules, "albumentations", A)
    monkeypatch.setitem(sys.modules, "albumentations.pytorch", A.pytorch)
    ops = Albumentations(size=64).transform.args[0]
    assert [repr(o) for o in ops][:5] == ["RandomResizedCrop", "Blur", "MedianBlur", "ToGray", "CLAHE"]
    assert ops[0].kw.get("size", (ops[0].kw.get("height"), ops[0].kw.get("width"))) == (64, 64)
    assert ("size" in ops[0].kw) == version.startswith("2")  # albumentations 2 renamed height/width to size
    train = [repr(o) for o in classify_albumentations(augment=True, size=32).args[0]]
    assert train == ["RandomResizedCrop", "HorizontalFlip", "ColorJitter", "Normalize", "ToTensorV2"]
    val = [repr(o) for o in classify_albumentations(augment=False, size=32).args[0]]
    assert val == ["SmallestMaxSize", "CenterCrop", "Normalize", "ToTensorV2"]


# ------------------------------------------------------------------------------------------------ dataloaders
@pytest.fixture
def two_class_folder(shared_dir, tmp_path):
    src = shared_dir / "data" / "coco128-cls" / "train"
    for cls in ("cup", "bowl"):
        (tmp_path / "d" / cls).mkdir(parents=True)
        for f in sorted((src / cls).glob("*.jpg"))[:3]:
            shutil.copy(f, tmp_path / "d" / cls / f.name)
    return tmp_path / "d"


@pytest.mark.parametrize("augment", [False, True])
def test_create_classification_dataloader_yields_normalised_batches(two_class_folder, augment):
    from utils.augmentations import classify_transforms
    from utils.classify.dataset import read_image
    from utils.dataloaders import ClassificationDataset, create_classification_dataloader
    loader = create_classification_dataloader(two_class_folder, imgsz=32, batch_size=4, augment=augment, workers=0,
                                              shuffle=False)
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3, 32, 32), (2, 3, 32, 32)]
    assert to_numpy(batches[0][1]).tolist() == [0, 0, 0, 1] and to_numpy(batches[1][1]).tolist() == [1, 1]
    images = to_numpy(batches[0][0])
    assert images.dtype == np.float32 and images.min() < -0.5  # normalised, augmented or not (official)
    if not augment:  # the official eval transforms, image by image
        ds = ClassificationDataset(two_class_folder, False, 32)  # official positional order: root, augment, imgsz
        np.testing.assert_array_equal(images[0], to_numpy(classify_transforms(32)(read_image(ds.samples[0][0]))))


def test_infinite_loader_and_smart_sampler():
    from utils.dataloaders import InfiniteDataLoader, SmartDistributedSampler
    data = list(range(10))
    shares = [list(SmartDistributedSampler(data, num_replicas=3, rank=r, shuffle=True, seed=1)) for r in range(3)]
    assert all(len(s) == 4 for s in shares) and set().union(*shares) == set(data)  # disjoint + padded to 4 each
    assert all(len(s) == 3 for s in
               (list(SmartDistributedSampler(data, num_replicas=3, rank=r, drop_last=True)) for r in range(3)))
    assert list(SmartDistributedSampler(data, shuffle=False)) == data  # one process: the whole dataset
    loader = InfiniteDataLoader(data, batch_size=4, shuffle=False, num_workers=0)
    assert len(loader) == 3 and [to_numpy(b).tolist() for b in loader][-1] == [8, 9]
    assert [len(b) for b in loader] == [4, 4, 2]  # a second epoch


def test_load_screenshots_is_one_line_user_error():
    from utils.dataloaders import LoadScreenshots
    with pytest.raises(UserError) as e:
        LoadScreenshots("screen 0 100 100 512 256", img_size=320)
    assert "screen capture is not supported" in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------------ plots
def test_plot_val_study_reads_study_files(tmp_path):
    from utils.plots import plot_val_study
    sizes = [256, 384, 512, 640]
    for name, base in (("study_coco_yolov5n.txt", 0.2), ("study_coco_yolov5s.txt", 0.3)):
        rows = [[0.5, 0.4, base + 0.1 + 0.01 * k, base + 0.01 * k, 0.01, 0.02, 0.03, 0.3, 2.0 + k, 0.5]
                for k in range(len(sizes))]  # as val.py --task study writes them: 10 columns a size
        np.savetxt(tmp_path / name, rows, fmt="%10.4g")
    out = plot_val_study(dir=tmp_path, x=sizes)
    assert out == tmp_path / "study.png" and out.stat().st_size > 1000
    assert plot_val_study(file=str(tmp_path / "study_coco_yolov5n.txt")) == out  # a file: its folder
    (tmp_path / "empty").mkdir()
    assert plot_val_study(dir=tmp_path / "empty") is None


def test_imshow_cls_writes_a_grid(tmp_path):
    from utils.augmentations import classify_transform
    from utils.plots import imshow_cls
    im = torch.from_numpy(np.stack([classify_transform(IM, 16)] * 3))
    before = to_numpy(im).copy()
    f = imshow_cls(im, labels=[0, 1, 1], pred=torch.tensor([0, 0, 1]), names=["cup", "bowl"], f=tmp_path / "cls.jpg")
    assert f == tmp_path / "cls.jpg" and f.stat().st_size > 1000
    np.testing.assert_array_equal(to_numpy(im), before)  # the caller's batch stays normalised


def test_hist2d_counts_points_per_cell():
    from utils.plots import hist2d
    x = np.array([0.0, 0.0, 0.1, 1.0])
    y = np.array([0.0, 0.0, 0.1, 1.0])
    np.testing.assert_allclose(hist2d(x, y, n=3), np.log([3, 3, 3, 1]))  # 2 x 2 cells: three points share one


# ------------------------------------------------------------------------------------------------ metrics
def test_process_batch_matches_official():
    from utils.metrics import process_batch
    labels = torch.tensor([[0, 0, 0, 10, 10], [1, 20, 20, 30, 30], [0, 40, 40, 50, 50.]])
    dets = torch.tensor([[0, 0, 10, 10, .9, 0], [1, 1, 11, 11, .8, 0], [20, 20, 30, 31, .7, 1],
                         [20, 20, 30, 30, .6, 0], [41, 41, 50, 50, .5, 0]])
    iouv = torch.linspace(0.5, 0.95, 10)
    correct = process_batch(dets, labels, iouv)
    # official: the exact box at every threshold; its duplicate never; IoU 0.909 up to 0.9; the wrong class never;
    # IoU 0.81 up to 0.8
    expected = [[1] * 10, [0] * 10, [1] * 9 + [0], [0] * 10, [1] * 7 + [0] * 3]
    assert to_numpy(correct).astype(int).tolist() == expected
    assert str(correct.dtype).endswith("bool") and str(correct.device) == str(iouv.device)
    assert tuple(process_batch(dets[:0], labels, iouv).shape) == (0, 10)
    assert not to_numpy(process_batch(dets, labels[:0], iouv)).any()


def test_process_batch_with_masks_matches_official():
    from utils.metrics import process_batch
    iouv = torch.linspace(0.5, 0.95, 10)
    gt = torch.zeros(1, 8, 8)
    gt[0, :4, :4], gt[0, 4:, 4:] = 1, 2  # overlap: label i is the value i + 1
    pm = torch.zeros(2, 4, 4)
    pm[0, :2, :2], pm[1, 2:, 2:3] = 1, 1  # exact; half of label 1's quarter
    labels = torch.tensor([[0, 0, 0, 4, 4], [1, 4, 4, 8, 8.]])
    dets = torch.tensor([[0, 0, 4, 4, .9, 0], [4, 4, 8, 8, .8, 1.]])
    expected = [[1] * 10, [1] + [0] * 9]  # official, with overlap and without
    assert to_numpy(process_batch(dets, labels, iouv, pm, gt, overlap=True, masks=True)).astype(int).tolist() \
        == expected
    gt2 = torch.zeros(2, 8, 8)
    gt2[0, :4, :4], gt2[1, 4:, 4:] = 1, 1
    assert to_numpy(process_batch(dets, labels, iouv, pm, gt2, masks=True)).astype(int).tolist() == expected


# ------------------------------------------------------------------------------------------------ classifier output
def test_reshape_classifier_output_and_loss():
    from models.common import Classify
    from utils.classifier_output import reshape_classifier_output, smartCrossEntropyLoss

    class Wrapped(nn.Module):  # a ClassificationModel's shape: .model ends in the Classify head
        def __init__(self):
            super().__init__()
            self.model = nn.Sequential(nn.Conv2d(3, 8, 3), Classify(8, 5))

    m = Wrapped()
    reshape_classifier_output(m, 3)
    assert m.model[-1].linear.out_features == 3 and m.nc == 3
    assert tuple(m.model(torch.zeros(1, 3, 8, 8)).shape) == (1, 3)

    lin = nn.Sequential(nn.Flatten(), nn.Sequential(nn.Dropout(0.2), nn.Linear(12, 7)))  # EfficientNet-style head
    reshape_classifier_output(lin, 4)
    assert lin[1][1].out_features == 4 and lin[1][1].in_features == 12
    conv = nn.Sequential(nn.Conv2d(3, 6, 1), nn.Sequential(nn.ReLU(), nn.Conv2d(6, 10, 1, bias=False)))  # last Conv2d
    reshape_classifier_output(conv, 2)
    assert conv[1][1].out_channels == 2 and conv[1][1].in_channels == 6 and conv[1][1].bias is None

    class ResNetLike(nn.Module):  # a module whose last child is a Linear (torchvision ResNet's fc)
        def __init__(self):
            super().__init__()
            self.body = nn.Conv2d(3, 4, 1)
            self.fc = nn.Linear(4, 1000)

    r = ResNetLike()
    reshape_classifier_output(r, 9)
    assert r.fc.out_features == 9 and r.fc.in_features == 4

    loss = smartCrossEntropyLoss(label_smoothing=0.1)
    logits, target = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([0])
    p = np.exp([2.0, 0, 0]) / np.exp([2.0, 0, 0]).sum()
    want = -(0.9 + 0.1 / 3) * np.log(p[0]) - (0.1 / 3) * np.log(p[1:]).sum()  # smoothed targets
    assert float(loss(logits, target)) == pytest.approx(want, rel=1e-5)
