"""One side of benchmarks/twin_replay.py: runs a codebase's own train.py in this process, with two instruments
added from outside (neither codebase is edited):

* every call of the loss (utils.loss.ComputeLoss, the same name in both) appends one JSON line to --log: the
  iteration, the loss, its three items and the sum of the first level's raw predictions (equal inputs and weights
  give equal sums to the last bit; a different step shows at once);
* the training batches: `record` keeps every batch the official loader yields (uint8 images, targets, paths, shapes)
  and saves them to --batches after each epoch; `replay` feeds the saved batches instead, epoch by epoch, to either
  codebase's training loop.

    python benchmarks/twin_replay_child.py official --repo ../yolov5-official --mode record --batches b.pt \
        --log off.jsonl -- --data shapes.yaml --weights init.pt --cfg yolov5n.yaml --img 256 --epochs 3 ...

Run with the codebase's own Python: the official side gets its checkout first on sys.path (its `utils` and
`models` must win over this project's), the project side this project's root.
"""
import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_opt(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("side", choices=("official", "project"))
    p.add_argument("--repo", default=str(ROOT), help="the codebase's checkout (official: --ref)")
    p.add_argument("--mode", choices=("record", "replay"), required=True)
    p.add_argument("--batches", required=True, help="the recorded batches (torch.save of a list of epochs)")
    p.add_argument("--log", required=True, help="JSON lines, one per loss call")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: train.py's arguments
    opt = p.parse_args(argv[:cut])
    opt.train_args = argv[cut + 1:]
    return opt


def log_losses(loss_cls, path):
    """Wraps loss_cls.__call__ so that each call appends its figures to path."""
    out = open(path, "w")
    original = loss_cls.__call__
    count = [0]

    def call(self, p, targets, *extra):
        loss, items = original(self, p, targets, *extra)
        rec = {"i": count[0], "targets": int(targets.shape[0]), "loss": float(loss.detach().double().sum()),
               "items": [float(v) for v in items.detach().double().flatten()],
               "pred_sum": float(p[0].detach().double().sum())}
        out.write(json.dumps(rec) + "\n")
        out.flush()
        count[0] += 1
        return loss, items
    loss_cls.__call__ = call


class RecordingLoader:
    """The official train loader as the trainer sees it, keeping (record) or replacing (replay) its batches."""

    def __init__(self, real, path, replay):
        import torch
        self.real, self.path, self.epochs, self.epoch = real, path, [], 0
        self.saved = torch.load(path) if replay else None

    def __len__(self):
        return len(self.real)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __iter__(self):
        import torch
        e, self.epoch = self.epoch, self.epoch + 1
        if self.saved is not None:
            yield from self.saved[e]
            return
        kept = []
        for imgs, targets, paths, shapes in self.real:
            kept.append((imgs.clone(), targets.clone(), paths, shapes))
            yield imgs, targets, paths, shapes
        self.epochs.append(kept)
        torch.save(self.epochs, self.path)


def load_train_script(repo):
    """The codebase's train.py as a module (not imported by name: this file is library code, and which train.py is
    meant must not depend on sys.path)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("twin_replay_train", Path(repo) / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official(opt):
    sys.path = [opt.repo] + [x for x in sys.path if x not in (str(ROOT), str(ROOT / "benchmarks"), "")]
    os.chdir(opt.repo)
    import utils.loss
    log_losses(utils.loss.ComputeLoss, opt.log)
    train = load_train_script(opt.repo)
    make_loader = train.create_dataloader
    first = [True]

    def create_dataloader(*args, **kwargs):
        loader, dataset = make_loader(*args, **kwargs)
        if first[0]:  # the train loader is made first, then the validation one
            first[0] = False
            loader = RecordingLoader(loader, opt.batches, opt.mode == "replay")
        return loader, dataset
    train.create_dataloader = create_dataloader
    sys.argv = ["train.py", *opt.train_args]
    train.main(train.parse_opt())


def project(opt):
    if opt.mode != "replay":
        raise SystemExit("twin_replay_child: the project side only replays the official batches")
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import torch

    import utils.loss
    from utils.engine import loop
    log_losses(utils.loss.ComputeLoss, opt.log)
    saved = torch.load(opt.batches)
    run_step = loop.TrainLoop.run_step

    def replayed_step(self, batch):
        return run_step(self, saved[self.epoch][self.iter])
    loop.TrainLoop.run_step = replayed_step
    train = load_train_script(ROOT)
    train.main(train.parse_opt(args=opt.train_args))


if __name__ == "__main__":
    o = parse_opt()
    official(o) if o.side == "official" else project(o)
