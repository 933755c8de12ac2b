"""A tiny training for the engine tests: a two-conv model, a fixed loader of 8x8 batches and a made-up loss, run by
the real TrainLoop in milliseconds (no dataset, no detector)."""
import numpy as np

from utils import backend
from utils.backend import torch
from utils.checkpoint.run_options import RecordedFlags, official_opt
from utils.engine.parts import TrainingParts, TrainingState
from utils.engine.schedule import Schedule
from utils.torch_utils import ModelEMA, smart_optimizer

HYP = {"lr0": 0.01, "lrf": 0.01, "momentum": 0.937, "weight_decay": 0.0005, "warmup_epochs": 3.0,
       "warmup_momentum": 0.8, "warmup_bias_lr": 0.1}


def tiny_model(seed=0):
    backend.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1))


class FakeLoader:
    """nb batches of `batch_size` random uint8 size x size images (the same every epoch), no targets."""

    def __init__(self, nb=4, batch_size=2, seed=0, size=8):
        rng = np.random.default_rng(seed)
        self.batches = [rng.integers(0, 256, (batch_size, 3, size, size), dtype=np.uint8) for _ in range(nb)]
        self.batch_size = batch_size

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for i, b in enumerate(self.batches):
            yield backend.from_numpy(b.copy()), torch.zeros(0, 6), [f"im{i}.jpg"], None


def fake_loss(pred, targets):
    """(loss, (3,) items) shaped like ComputeLoss's: the loss is the items' sum times the batch size."""
    items = torch.stack([(pred ** 2).mean(), 0.1 * pred.abs().mean(), 0.01 * (pred.mean() ** 2)])
    return items.sum().reshape(1) * pred.shape[0], items.detach()


def tiny_parts(epochs=3, nb=4, batch_size=2, state=None, model=None, hyp=HYP, ema=True, size=8, loss=fake_loss,
               **kw):
    """TrainingParts for a tiny run: SGD with the three official groups (initial_lr set, lr for epoch 0 or the
    resumed epoch), an EMA, the official schedule. size: the images' side; loss: (predictions, targets) -> (loss,
    items), fake_loss of a single output tensor by default."""
    device = backend.device("cpu")
    model = model if model is not None else tiny_model()
    optimizer = smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
    for g in optimizer.param_groups:
        g["initial_lr"] = g["lr"]
    loader = FakeLoader(nb, batch_size, size=size)
    schedule = Schedule.from_hyp(hyp, [g["initial_lr"] for g in optimizer.param_groups], epochs, nb, batch_size)
    for g, lr in zip(optimizer.param_groups, schedule.epoch_lrs(0)):
        g["lr"] = lr
    flags = RecordedFlags({"data": "", "epochs": epochs, "batch_size": batch_size})  # what the checkpoint's opt holds
    return TrainingParts(model=model, optimizer=optimizer, compute_loss=loss, train_loader=loader,
                         schedule=schedule, device=device, epochs=epochs, ema=ModelEMA(model) if ema else None,
                         state=state or TrainingState(), recorded_opt=official_opt(flags, hyp), hyp=dict(hyp),
                         opt_hyp=dict(hyp), nc=2,
                         names={0: "a", 1: "b"}, **kw)


def weights(model):
    return {k: backend.to_numpy(v).copy() for k, v in model.state_dict().items()}
