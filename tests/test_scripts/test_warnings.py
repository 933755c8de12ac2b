"""One-line warnings that name the real reason: non-finite validation losses, and an image size that training
raises for being below its floor (not for being off the stride)."""
import logging

import pytest

from tests.helpers.train_helpers import make_tiny_dataset


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def warnings_logged():
    log = logging.getLogger("yolov5")
    h = _Lines()
    log.addHandler(h)
    yield h.lines
    log.removeHandler(h)


@pytest.mark.parametrize("size,s,floor,new,rule,not_rule", [
    (32, 32, 64, 64, "must be at least 64 (2 x max stride 32)", "multiple"),  # a multiple of 32, below the floor
    (100, 32, 0, 128, "must be a multiple of max stride 32", "at least"),
    (40, 32, 64, 64, "must be a multiple of max stride 32 and at least 64", None),
    ([100, 64], 32, 0, [128, 64], "must be a multiple of max stride 32", "at least"),
])
def test_img_size_warning_names_the_rule_that_changed_it(warnings_logged, size, s, floor, new, rule, not_rule):
    from utils.general import check_img_size
    assert check_img_size(size, s, floor=floor) == new
    assert len(warnings_logged) == 1 and rule in warnings_logged[0], warnings_logged
    assert not_rule is None or not_rule not in warnings_logged[0]


def test_img_size_already_valid_is_silent(warnings_logged):
    from utils.general import check_img_size
    assert check_img_size(64, 32, floor=64) == 64 and check_img_size([96, 128], 32) == [96, 128]
    assert warnings_logged == []


@pytest.fixture(scope="module")
def val_setup(tmp_path_factory):
    from models.yolo import Model
    from utils.dataloaders import create_dataloader
    from utils.dataset_config import check_dataset
    data = check_dataset(make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=2, n_val=4, size=64))
    loader = create_dataloader(data["val"], 64, 4, 32, rect=True, pad=0.5, workers=0)[0]
    return data, loader, Model("yolov5n.yaml", nc=2)


@pytest.mark.parametrize("bad", [True, False])
def test_non_finite_validation_losses_are_warned(val_setup, warnings_logged, tmp_path, bad):
    import val
    from utils.backend import torch
    data, loader, model = val_setup
    items = torch.tensor([float("nan") if bad else 0.05, float("inf") if bad else 0.02, 0.01])
    results, _, _ = val.run(data=data, model=model, dataloader=loader, save_dir=tmp_path, plots=False, imgsz=64,
                            batch_size=4, compute_loss=lambda out, targets: (items.sum(), items))
    said = [w for w in warnings_logged if "validation losses are not finite" in w]
    if bad:
        assert len(said) == 1 and "nan" in said[0] and "inf" in said[0], warnings_logged
        assert "\n" not in said[0]
    else:
        assert said == [] and results[4:] == pytest.approx((0.05, 0.02, 0.01))
