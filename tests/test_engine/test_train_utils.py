"""Unit tests of the training helpers: parameter groups, EMA, early stopping, lr schedule, warmup, hyp scaling,
AutoAnchor, results.csv, evolve. Each checks exact values that a wrong implementation would miss."""
import math

import numpy as np
import pytest

from utils import backend
from utils.backend import torch


def _params(group):
    return list(group["params"]) if "params" in group else list(group.parameters)  # OneFlow ParamGroup


@pytest.fixture(scope="module")
def yolov5n():
    from models.yolo import Model
    return Model("yolov5n.yaml", nc=80)


# ----------------------------------------------------------------------------------------------------------------
# smart_optimizer
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_smart_optimizer_groups_by_name(yolov5n, name):
    from utils.torch_utils import smart_optimizer
    opt = smart_optimizer(yolov5n, name, lr=0.01, momentum=0.937, decay=5e-4)
    groups = opt.param_groups
    assert len(groups) == 3
    # the official yolov5n split: 60 biases, 60 conv weights with decay, 57 BatchNorm weights without
    assert [len(_params(g)) for g in groups] == [60, 60, 57]
    assert [g["weight_decay"] for g in groups] == [0.0, 5e-4, 0.0]
    names = {id(p): n for n, p in yolov5n.named_parameters()}
    assert all(names[id(p)].endswith(".bias") for p in _params(groups[0]))
    assert all(".bn." in names[id(p)] and names[id(p)].endswith(".weight") for p in _params(groups[2]))
    assert all(".bn." not in names[id(p)] and names[id(p)].endswith(".weight") for p in _params(groups[1]))
    n_total = sum(1 for _ in yolov5n.parameters())
    assert sum(len(_params(g)) for g in groups) == n_total
    if name == "SGD":
        assert groups[1]["momentum"] == 0.937 and groups[1]["nesterov"] is True
    else:
        assert tuple(groups[1]["betas"]) == (0.937, 0.999)


def test_smart_optimizer_rejects_unknown(yolov5n):
    from utils.torch_utils import smart_optimizer
    with pytest.raises(NotImplementedError):
        smart_optimizer(yolov5n, "RMSprop")


# ----------------------------------------------------------------------------------------------------------------
# ModelEMA
def _tiny_model():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))


def test_ema_decay_formula_and_update():
    from utils.torch_utils import ModelEMA
    m = _tiny_model()
    ema = ModelEMA(m)
    assert ema.decay(1) == pytest.approx(0.9999 * (1 - math.exp(-1 / 2000)))
    assert ema.decay(10 ** 6) == pytest.approx(0.9999)
    w0 = backend.to_numpy(ema.ema[0].weight).copy()
    with backend.no_grad():
        m[0].weight.add_(1.0)
    ema.update(m)
    d = 0.9999 * (1 - math.exp(-1 / 2000))
    expect = d * w0 + (1 - d) * backend.to_numpy(m[0].weight)
    np.testing.assert_allclose(backend.to_numpy(ema.ema[0].weight), expect, rtol=1e-6, atol=1e-7)
    assert ema.updates == 1
    assert not any(p.requires_grad for p in ema.ema.parameters())
    # integer buffers (num_batches_tracked) are not averaged
    assert int(backend.to_numpy(ema.ema[1].num_batches_tracked)) == 0


def test_ema_fused_flag_routes_to_multi_tensor(monkeypatch):
    """--multi_tensor_optimizer: ModelEMA hands all float tensors to the backend's ema_update_ at once."""
    from utils.torch_utils import ModelEMA
    calls = []

    def ema_update_(ema_tensors, model_tensors, d, fused):
        calls.append((len(ema_tensors), len(model_tensors), d, fused))

    monkeypatch.setattr(backend, "ema_update_", ema_update_)
    m = _tiny_model()
    ModelEMA(m, fused=True).update(m)
    assert calls and calls[0][0] == calls[0][1] == 6  # conv w, b, bn w, b, running mean, var
    assert calls[0][3] is True


# ----------------------------------------------------------------------------------------------------------------
def test_early_stopping():
    from utils.torch_utils import EarlyStopping
    s = EarlyStopping(patience=3)
    fits = [0.1, 0.2, 0.15, 0.19, 0.2]  # best at epoch 1; epochs 2, 3 no better; epoch 4 ties (>=) and resets
    assert [s(e, f) for e, f in enumerate(fits)] == [False] * 5
    assert s.best_epoch == 4
    assert [s(e, 0.0) for e in (5, 6, 7)] == [False, False, True]
    assert EarlyStopping(patience=0).patience == float("inf")


def test_intersect_dicts():
    from utils.torch_utils import intersect_dicts
    a = {"x": np.zeros((2, 3)), "y": np.zeros(4), "anchors": np.zeros(2), "z": np.zeros(1)}
    b = {"x": np.zeros((2, 3)), "y": np.zeros(5), "anchors": np.zeros(2)}
    assert set(intersect_dicts(a, b)) == {"x", "anchors"}
    assert set(intersect_dicts(a, b, exclude=["anchor"])) == {"x"}


# ----------------------------------------------------------------------------------------------------------------
# Schedule, warmup, hyp scaling
def test_lr_lambda_linear_and_cosine():
    from utils.engine.schedule import lr_lambda
    lin = lr_lambda(10, 0.01)
    assert lin(0) == 1.0 and lin(10) == pytest.approx(0.01) and lin(5) == pytest.approx(0.505)
    cos = lr_lambda(10, 0.01, cos_lr=True)
    assert cos(0) == pytest.approx(1.0) and cos(10) == pytest.approx(0.01) and cos(5) == pytest.approx(0.505)
    assert cos(2) > lin(2)  # cosine stays higher early on


def test_scale_hyp():
    from utils.engine.hyp import scale_hyp
    h = scale_hyp({"box": 0.05, "cls": 0.5, "obj": 1.0}, nl=3, nc=3, imgsz=320, label_smoothing=0.1)
    assert h["box"] == pytest.approx(0.05)
    assert h["cls"] == pytest.approx(0.5 * 3 / 80)
    assert h["obj"] == pytest.approx(0.25)
    assert h["label_smoothing"] == 0.1
    h4 = scale_hyp({"box": 0.05, "cls": 0.5, "obj": 1.0}, nl=4, nc=80, imgsz=640)
    assert h4["box"] == pytest.approx(0.05 * 3 / 4) and h4["obj"] == pytest.approx(0.75)


def test_warmup_interpolates_lr_momentum_accumulate(yolov5n):
    from utils.engine.schedule import Schedule, lr_lambda, set_param_groups
    from utils.torch_utils import smart_optimizer
    optimizer = smart_optimizer(yolov5n, "SGD", lr=0.01, momentum=0.937, decay=5e-4)
    s = Schedule(base_lrs=(0.01,) * 3, epochs=10, lrf=0.01, warmup_iters=100, warmup_bias_lr=0.1,
                 warmup_momentum=0.8, momentum=0.937, batch_size=16)

    def warmup(ni, epoch):
        lrs, momentum, accumulate = s.at(ni, epoch)
        set_param_groups(optimizer, lrs, momentum)
        return accumulate

    assert warmup(0, 0) == 1
    assert [g["lr"] for g in optimizer.param_groups] == [0.1, 0.0, 0.0]
    assert optimizer.param_groups[1]["momentum"] == pytest.approx(0.8)
    assert warmup(50, 0) == 2  # 1 -> 64/16 = 4 over the warmup, rounded
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.055)
    assert optimizer.param_groups[1]["lr"] == pytest.approx(0.005)
    assert optimizer.param_groups[1]["momentum"] == pytest.approx(0.8685)
    assert warmup(100, 1) == 4
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.01 * lr_lambda(10, 0.01)(1)] * 3)


def test_labels_to_class_weights():
    from utils.data.class_weights import labels_to_class_weights, labels_to_image_weights
    labels = [np.array([[0, .5, .5, .1, .1], [0, .2, .2, .1, .1]]), np.array([[1, .5, .5, .1, .1]])]
    w = labels_to_class_weights(labels, nc=3)
    np.testing.assert_allclose(w, np.array([0.5, 1, 1]) / 2.5)
    iw = labels_to_image_weights(labels, nc=3, class_weights=w)
    np.testing.assert_allclose(iw, [0.4, 0.4])


def test_non_finite_loss_names_epoch_and_iteration():
    from tests.helpers.engine_helpers import tiny_parts
    from utils.engine.errors import NonFiniteLossError
    from utils.engine.loop import TrainLoop
    parts = tiny_parts(nb=10)
    parts.compute_loss = lambda p, tg: (torch.tensor([float("nan")]), torch.tensor([0.1, float("nan"), 0.2]))
    loop = TrainLoop(parts)
    loop.record.epoch, loop.iter = 3, 7
    with pytest.raises(NonFiniteLossError, match="epoch 3, iteration 7"):
        loop.run_step((torch.zeros(1, 3, 8, 8, dtype=torch.uint8), torch.zeros(0, 6), ["a.jpg"], None))


# ----------------------------------------------------------------------------------------------------------------
# AutoAnchor
class _FakeDataset:
    def __init__(self, wh_px, imgsz=640, n_img=50, seed=0):
        rng = np.random.default_rng(seed)
        self.shapes = np.full((n_img, 2), imgsz, dtype=np.float64)
        self.labels = []
        for _ in range(n_img):
            k = rng.integers(0, len(wh_px), 8)
            wh = np.asarray(wh_px, dtype=np.float64)[k] * rng.uniform(0.9, 1.1, (8, 1)) / imgsz
            self.labels.append(np.concatenate([np.zeros((8, 1)), np.full((8, 2), 0.5), wh], 1).astype(np.float32))


def test_check_anchors_keeps_good_anchors(yolov5n):
    from utils.autoanchor import check_anchors
    from copy import deepcopy
    m = deepcopy(yolov5n)
    before = backend.to_numpy(m.model[-1].anchors).copy()
    ds = _FakeDataset([(10, 13), (30, 61), (116, 90), (373, 326)])
    bpr, replaced = check_anchors(ds, m, thr=4.0, imgsz=640)
    assert bpr > 0.98 and not replaced
    np.testing.assert_array_equal(backend.to_numpy(m.model[-1].anchors), before)


def test_check_anchors_replaces_poor_anchors(yolov5n):
    from utils.autoanchor import check_anchors
    from copy import deepcopy
    m = deepcopy(yolov5n)
    ds = _FakeDataset([(600, 40), (40, 600), (620, 620)])  # extreme aspect ratios the defaults cannot reach
    np.random.seed(0)
    bpr, replaced = check_anchors(ds, m, thr=4.0, imgsz=640)
    assert replaced and bpr > 0.9
    a = backend.to_numpy(m.model[-1].anchors) * backend.to_numpy(m.model[-1].stride).reshape(-1, 1, 1)
    areas = a.prod(-1).mean(-1)
    assert areas[0] <= areas[1] <= areas[2]  # still ordered small to large with the stride


def test_kmean_anchors_sorted_and_fit():
    from utils.autoanchor import kmean_anchors
    np.random.seed(0)
    k = kmean_anchors(_FakeDataset([(20, 20), (50, 100), (200, 100)]), n=3, img_size=640, gen=100, verbose=False)
    assert k.shape == (3, 2) and k.dtype == np.float32
    assert (np.diff(k.prod(1)) >= 0).all()
    np.testing.assert_allclose(k, [[20, 20], [50, 100], [200, 100]], rtol=0.15)


def test_check_anchor_order_flips(yolov5n):
    from copy import deepcopy
    from utils.autoanchor import check_anchor_order
    m = deepcopy(yolov5n).model[-1]
    a = backend.to_numpy(m.anchors).copy()
    with backend.no_grad():
        m.anchors.copy_(backend.from_numpy(a[::-1].copy()))
    check_anchor_order(m)
    np.testing.assert_array_equal(backend.to_numpy(m.anchors), a)


# ----------------------------------------------------------------------------------------------------------------
# results.csv and evolve
def test_results_csv_columns_and_truncate(tmp_path):
    from utils.loggers import Loggers, read_results_csv
    lg = Loggers(tmp_path, include=("csv",))
    for e in range(3):
        lg.on_fit_epoch_end([e + 0.5] * 13, e)
    header = (tmp_path / "results.csv").read_text().splitlines()[0]
    assert [h.strip() for h in header.split(",")] == [
        "epoch", "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision", "metrics/recall",
        "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss", "val/obj_loss", "val/cls_loss",
        "x/lr0", "x/lr1", "x/lr2"]
    rows = read_results_csv(tmp_path / "results.csv")
    assert [r["epoch"] for r in rows] == [0, 1, 2] and rows[2]["x/lr2"] == 2.5
    lg.truncate_csv(1)
    assert [r["epoch"] for r in read_results_csv(tmp_path / "results.csv")] == [0]


def test_evolve_mutate_and_record(tmp_path):
    import random
    import yaml
    from utils.evolve import META, mutate, record, read_evolve_csv
    hyp = {"lr0": 0.01, "momentum": 0.937, "iou_t": 0.2, "fliplr": 0.5, "box": 0.05}
    assert mutate(hyp, tmp_path / "evolve.csv") == hyp  # no history yet: the hyp itself
    record([0.5, 0.5, 0.4, 0.2, 0.1, 0.1, 0.1], hyp, tmp_path)
    random.seed(0)
    child = mutate(hyp, tmp_path / "evolve.csv", rng=np.random.default_rng(1))
    assert child["iou_t"] == 0.2 and child["fliplr"] == 0.5  # gain 0: never mutated
    assert child != hyp
    for k, v in child.items():
        assert META[k][1] <= v <= META[k][2]
    record([0.6, 0.6, 0.5, 0.3, 0.1, 0.1, 0.1], child, tmp_path)
    keys, x = read_evolve_csv(tmp_path / "evolve.csv")
    assert x.shape == (2, 12) and keys[:2] == ["metrics/precision", "metrics/recall"]
    best = yaml.safe_load((tmp_path / "hyp_evolve.yaml").read_text())
    assert best["lr0"] == pytest.approx(child["lr0"], rel=1e-4)
