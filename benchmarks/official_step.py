"""Counts one training step of the official ultralytics/yolov5 code (run by benchmarks/launches.py, with the
official checkout's own Python, so that its `models`/`utils` packages never meet this project's).

    ../yolov5-official/.venv/bin/python benchmarks/official_step.py --ref ../yolov5-official --json out.json \
        [--cuda-defaults]

The step is the one of the official train.py with AMP off (the CPU case, and the only one comparable op for op):
model(imgs), ComputeLoss, backward, GradScaler.unscale_ + clip_grad_norm_(10) + optimizer step + update +
zero_grad, ModelEMA.update. --cuda-defaults makes PyTorch take the branches it takes for CUDA tensors by default
(foreach clip_grad_norm_ and foreach SGD), which is what the official trainer runs on a GPU.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import warnings
from pathlib import Path


def parse_opt(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ref", required=True, help="official ultralytics/yolov5 checkout")
    p.add_argument("--json", required=True, help="where to write the counts")
    p.add_argument("--cfg", default="yolov5s.yaml")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--img", type=int, default=320)
    p.add_argument("--cuda-defaults", action="store_true")
    return p.parse_args(argv)


def _official_first(ref):
    """The official checkout first on sys.path and the working folder (its `utils` must win over this project's);
    benchmarks/dispatch_count.py loaded by its path."""
    here = str(Path(__file__).resolve().parent)
    sys.path = [ref] + [x for x in sys.path if x not in (here, "")]
    os.chdir(ref)
    warnings.filterwarnings("ignore")
    import importlib.util
    spec = importlib.util.spec_from_file_location("dispatch_count", Path(here) / "dispatch_count.py")
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)
    return dc


def _official_parts(ref, opt):
    """(model, loss, optimizer, EMA, scaler) as the official train.py builds them with AMP off, quietly."""
    import torch
    import yaml
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from models.yolo import Model
        from utils.loss import ComputeLoss
        from utils.torch_utils import ModelEMA, smart_optimizer
        torch.manual_seed(0)
        model = Model(str(Path(ref) / "models" / opt.cfg), ch=3, nc=80).train()
    with open(Path(ref) / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = yaml.safe_load(f)
    nl = model.model[-1].nl
    hyp["box"] *= 3 / nl
    hyp["cls"] *= 80 / 80 * 3 / nl
    hyp["obj"] *= (opt.img / 640) ** 2 * 3 / nl
    hyp["label_smoothing"] = 0.0
    model.nc, model.hyp = 80, hyp
    accumulate = max(round(64 / opt.batch), 1)
    hyp["weight_decay"] *= opt.batch * accumulate / 64
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        compute_loss = ComputeLoss(model)
        optimizer = smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
        ema = ModelEMA(model)
        scaler = torch.amp.GradScaler("cuda", enabled=False)  # what the official trainer makes with AMP off
    return model, compute_loss, optimizer, ema, scaler


def main(argv=None):
    opt = parse_opt(argv)
    ref = str(Path(opt.ref).resolve())
    dc = _official_first(ref)
    import torch
    model, compute_loss, optimizer, ema, scaler = _official_parts(ref, opt)
    imgs_u8, targets = dc.synthetic_batch(opt.batch, opt.img)

    def step(c):
        imgs = imgs_u8.float() / 255
        with c.stage("forward"):
            pred = model(imgs)
        with c.stage("loss"):
            loss, loss_items = compute_loss(pred, targets)
        with c.stage("backward"):
            scaler.scale(loss).backward()
        with c.stage("optimizer"):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        with c.stage("ema"):
            ema.update(model)

    with (dc.cuda_foreach_defaults() if opt.cuda_defaults else contextlib.nullcontext()):
        result = dc.count_step(step)
    result.update(code="official", cfg=opt.cfg, batch=opt.batch, img=opt.img, cuda_defaults=opt.cuda_defaults,
                  torch=torch.__version__, amp=False)
    Path(opt.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
