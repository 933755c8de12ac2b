"""The CUDA tier, in-process part: the code paths that only a GPU takes (issue 21). Each test needs cuda:0 and skips
without it; with GPU_KIT_TEST_DEVICE=cpu the ones whose checks hold on the CPU run there (tests/helpers/cuda_helpers.py), so
that the GPU kit's CPU dry run checks the tests themselves."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.cuda_helpers import ROOT, relative_difference, state_arrays, swapped_to_cpu, tier_device, train_steps
from utils.backend import IS_TORCH, cuda_available, torch

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not IS_TORCH, reason="the GPU tier runs the PyTorch backend")]


@pytest.mark.parametrize("n", [1, 1000, 200_000])
def test_triton_ciou_compiled_equals_plain(n):
    """--bbox_iou_optim on cuda:0 routes to the Triton kernel, compiled for the GPU (not the interpreter the CPU
    tests use), and gives the plain CIoU's values and gradients; fp16 predicted boxes (AMP) are read in fp32."""
    dev = tier_device()
    if dev.type == "cpu" and n > 1000:
        pytest.skip("swapped to the CPU: Triton's interpreter is slow on large counts")
    from tests.test_utils.test_iou import random_and_degenerate_xywh  # random pairs, then zero-width, identical, disjoint, nested
    from utils.iou import bbox_iou, fused_backend_name
    b1, b2 = (a[:n].astype(np.float32) for a in random_and_degenerate_xywh(max(n, 16)))
    if dev.type == "cuda":
        assert os.environ.get("TRITON_INTERPRET", "0") != "1", "TRITON_INTERPRET=1 on a GPU machine"
        assert fused_backend_name(dev) == "triton"
        fused_fn = lambda a, b: bbox_iou(a, b, CIoU=True, fused=True)  # noqa: E731
    else:  # swapped: the same kernel through Triton's interpreter, if Triton is there
        pytest.importorskip("triton")
        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("Triton on the CPU needs TRITON_INTERPRET=1 (tests/conftest.py sets it without a GPU)")
        from utils.backend.torch_ciou_triton import ciou_triton
        fused_fn = ciou_triton

    def run(fn, half=False):
        a = torch.tensor(b1, device=dev)
        a = (a.half() if half else a).requires_grad_(True)
        b = torch.tensor(b2, device=dev, requires_grad=True)
        out = fn(a, b)
        w = torch.linspace(0.5, 1.5, out.numel(), device=dev).view(out.shape)
        (out.float() * w).sum().backward()
        return [t.detach().float().cpu().numpy() for t in (out, a.grad, b.grad)]

    plain = run(lambda a, b: bbox_iou(a, b, CIoU=True, fused=False))
    fused = run(fused_fn)
    tie = np.all(b1 == b2, axis=1)
    np.testing.assert_allclose(fused[0], plain[0], rtol=1e-5, atol=1e-5, err_msg="ciou")
    # gradients: identical boxes tie in min/max, where autograd splits the gradient and the kernel may give it to one
    # box; their sum is the same either way
    np.testing.assert_allclose(fused[1] + fused[2], plain[1] + plain[2], rtol=1e-4, atol=1e-4, err_msg="grad sum")
    np.testing.assert_allclose(fused[1][~tie], plain[1][~tie], rtol=1e-4, atol=1e-4, err_msg="grad box1")
    if dev.type == "cuda":  # fp16 input, as under AMP: computed in fp32, gradient back in fp16
        half_plain, half_fused = run(lambda a, b: bbox_iou(a.float(), b, CIoU=True), True), run(fused_fn, True)
        np.testing.assert_allclose(half_fused[0], half_plain[0], rtol=1e-5, atol=1e-5)
        assert np.isfinite(half_fused[1]).all()


def test_flags_on_equal_flags_off_over_50_steps():
    """The seed's two flags on cuda:0 (Triton CIoU, fused SGD, foreach EMA, multi-tensor clipping) train like the
    per-tensor path: the same losses over 50 steps and the same weights and EMA at the end, up to the rounding of
    fused kernels (the CPU's foreach path is the loop's arithmetic to the bit)."""
    dev = tier_device()
    steps = 50 if dev.type == "cuda" else 20  # swapped to the CPU: the logic only, in the dry run's time
    off_losses, off_model, off_ema = train_steps(dev, flags=False, steps=steps)
    on_losses, on_model, on_ema = train_steps(dev, flags=True, steps=steps)
    assert np.isfinite(off_losses).all() and np.mean(off_losses[-10:]) < np.mean(off_losses[:10]), off_losses
    np.testing.assert_allclose(on_losses, off_losses, rtol=1e-3 if dev.type == "cuda" else 1e-6)
    weights = relative_difference(state_arrays(on_model), state_arrays(off_model))
    ema = relative_difference(state_arrays(on_ema.ema), state_arrays(off_ema.ema))
    assert weights < (1e-3 if dev.type == "cuda" else 1e-6), weights
    assert ema < (1e-3 if dev.type == "cuda" else 1e-6), ema
    moved = relative_difference(state_arrays(off_model), state_arrays(train_steps(dev, False, steps=1)[1]))
    assert moved > 10 * max(weights, 1e-9)  # the later steps moved the weights far more than the paths differ


def test_fp16_amp_scaler_skips_an_overflow_step_and_bf16_trains():
    """Default AMP on CUDA: fp16 autocast with the GradScaler. An overflowing step (an inf gradient) is skipped
    (weights unchanged) and halves the scale; the next step updates again. bf16 autocast trains without scaling
    with losses close to fp32's."""
    dev = tier_device(cpu_ok=False)
    from utils import backend
    from utils.precision import training_precision
    dtype, channels_last, scaler = training_precision(dev, None)
    assert dtype == torch.float16 and not channels_last and scaler.is_enabled()
    losses, model, _ = train_steps(dev, flags=True, steps=5, dtype=torch.float16, scaler=scaler)
    assert np.isfinite(losses).all()
    scale0 = scaler.get_scale()
    before = state_arrays(model)
    from utils.torch_utils import smart_optimizer
    opt = smart_optimizer(model, "SGD", lr=0.01, momentum=0.937, decay=5e-4, fused=True)
    from tests.helpers.cuda_helpers import synthetic_batches
    from utils.loss import ComputeLoss
    imgs, targets = synthetic_batches(1, 4, 64, dev, seed=9)[0]
    with backend.autocast(dev, dtype=torch.float16):
        pred = model(imgs.float() / 255)
    loss, _ = ComputeLoss(model)(pred, targets)
    scaler.scale(loss).backward()
    next(p for p in model.parameters() if p.grad is not None).grad.view(-1)[0] = float("inf")
    scaler.unscale_(opt)
    backend.clip_grad_norm_(model.parameters(), 10.0, fused=True)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    after = state_arrays(model)
    weights = [k for k in before if "running" not in k and "num_batches" not in k]  # BN statistics move in forward
    assert all(np.array_equal(before[k], after[k]) for k in weights), "the overflowing step changed the weights"
    assert scaler.get_scale() == scale0 * 0.5
    with backend.autocast(dev, dtype=torch.float16):
        pred = model(imgs.float() / 255)
    loss, _ = ComputeLoss(model)(pred, targets)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    backend.clip_grad_norm_(model.parameters(), 10.0, fused=True)
    scaler.step(opt)
    scaler.update()
    assert any(not np.array_equal(after[k], v) for k, v in state_arrays(model).items() if k in weights)

    assert torch.cuda.is_bf16_supported()
    fp32, _, _ = train_steps(dev, flags=True, steps=5)
    bf16, model16, _ = train_steps(dev, flags=True, steps=5, dtype=torch.bfloat16)
    with backend.autocast(dev, dtype=torch.bfloat16):
        assert model16(imgs.float() / 255)[0].dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model16.parameters())
    np.testing.assert_allclose(bf16, fp32, rtol=0.05)


def test_checkpoint_written_from_cuda_reads_back_on_the_cpu(tmp_path):
    """last.pt written from a model, EMA and optimizer state on cuda:0 loads in a process that sees no GPU, with the
    same values (the model fp16 as the official format has it, the optimizer state exact)."""
    dev = tier_device()
    from utils.checkpoint import Half, save_checkpoint
    _, model, ema = train_steps(dev, flags=True, steps=2)
    from utils.torch_utils import smart_optimizer
    opt = smart_optimizer(model, "SGD", lr=0.01, momentum=0.937, decay=5e-4, fused=True)
    for p in model.parameters():
        p.grad = torch.ones_like(p) * 1e-3
    opt.step()  # momentum buffers on the device
    f = tmp_path / "last.pt"
    save_checkpoint({"epoch": 3, "model": Half(model), "ema": Half(ema.ema), "updates": ema.updates,
                     "optimizer": opt.state_dict()}, f)
    expected = {"model": state_arrays(model), "ema": state_arrays(ema.ema),
                "momentum": [b.cpu().numpy() for b in (opt.state[p]["momentum_buffer"] for p in opt.param_groups[1]
                                                            ["params"][:3])]}
    np.savez(tmp_path / "expected.npz", **{f"{k}/{n}": v for k in ("model", "ema") for n, v in expected[k].items()},
             **{f"momentum/{i}": v for i, v in enumerate(expected["momentum"])})
    code = f"""
import numpy as np
from utils.backend import cuda_available
from models.from_record import build_model
from utils.checkpoint import load_checkpoint
assert not cuda_available()
ck = load_checkpoint({str(f)!r}, map_location="cpu", build_models=build_model)
exp = np.load({str(tmp_path / 'expected.npz')!r})
assert ck["epoch"] == 3
for part in ("model", "ema"):
    sd = ck[part].state_dict()
    assert all(v.device.type == "cpu" for v in sd.values())
    for k in [k for k in exp.files if k.startswith(part + "/")]:
        v = sd[k.split("/", 1)[1]].float().numpy()
        np.testing.assert_allclose(v, exp[k], rtol=1e-3, atol=1e-3, err_msg=k)  # fp16 in the file
st = ck["optimizer"]["state"]
ids = ck["optimizer"]["param_groups"][1]["params"][:3]
for i, pid in enumerate(ids):
    np.testing.assert_array_equal(st[pid]["momentum_buffer"].numpy(), exp[f"momentum/{{i}}"])
print("read back", len(ck["model"].state_dict()))
"""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "YOLO_BACKEND": "torch", "YOLO_QUIET": "1",
           "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "read back" in p.stdout


def test_nms_on_cuda_equals_the_cpu(yolov5n_pt, coco128_dir):
    """non_max_suppression of yolov5n's predictions on real images gives the same detections on cuda:0 (where
    torchvision's kernel runs when it is installed) as on the CPU."""
    dev = tier_device()
    import cv2
    from models.experimental import attempt_load
    from utils.augmentations import letterbox
    from utils.backend import no_grad
    from utils.general import non_max_suppression
    model = attempt_load(str(yolov5n_pt), device=dev, fuse=True).eval()
    ims = []
    for f in sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:4]:
        im = letterbox(cv2.imread(str(f)), 320, auto=False)[0]
        ims.append(im[:, :, ::-1].transpose(2, 0, 1))
    x = torch.tensor(np.ascontiguousarray(np.stack(ims))).to(dev).float() / 255
    with no_grad():
        pred = model(x)[0]
    for conf, multi in ((0.25, False), (0.001, True)):
        on_dev = non_max_suppression(pred, conf, 0.45, multi_label=multi, time_limit=float("inf"))
        on_cpu = non_max_suppression(pred.cpu(), conf, 0.45, multi_label=multi, time_limit=float("inf"))
        assert sum(len(d) for d in on_cpu) > 0
        for a, b in zip(on_dev, on_cpu):
            assert a.device == dev and len(a) == len(b)
            # rows of equal confidence may come in another order from another sort kernel: compare as sets
            a, b = a.cpu().numpy(), b.numpy()
            a, b = a[np.lexsort(a.T[::-1])], b[np.lexsort(b.T[::-1])]
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3)


def test_loader_batches_pin_and_reach_the_gpu_unchanged(coco128_dir):
    """The project's dataset and collate through a DataLoader with pinned memory: the batches come pinned (on a
    GPU machine) and an asynchronous copy (backend.to_device, non_blocking) lands the same bytes on cuda:0."""
    dev = tier_device()
    from utils import backend
    from utils.data import LoadImagesAndLabels
    from utils.data.collate import collate_fn
    ds = LoadImagesAndLabels(str(coco128_dir / "images" / "train2017"), 128, 8, augment=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=collate_fn,
                                         pin_memory=dev.type == "cuda")
    seen = 0
    for i, (imgs, targets, paths, _) in enumerate(loader):
        if dev.type == "cuda":
            assert imgs.is_pinned() and targets.is_pinned()
        g_imgs, g_targets = backend.to_device(imgs, dev), backend.to_device(targets, dev)
        backend.synchronize(dev)
        assert torch.equal(g_imgs.cpu(), imgs) and torch.equal(g_targets.cpu(), targets)
        assert imgs.dtype == torch.uint8 and tuple(imgs.shape[1:]) == (3, 128, 128)
        seen += len(paths)
        if i == 3:
            break
    assert seen == 32


def test_tier_device_swaps_only_when_asked(monkeypatch):
    """The swap is opt-in: without a GPU and without GPU_KIT_TEST_DEVICE=cpu the tier skips."""
    if cuda_available():
        assert tier_device().type == "cuda"
        return
    monkeypatch.delenv("GPU_KIT_TEST_DEVICE", raising=False)
    assert not swapped_to_cpu()
    with pytest.raises(pytest.skip.Exception):
        tier_device()
    monkeypatch.setenv("GPU_KIT_TEST_DEVICE", "cpu")
    assert tier_device().type == "cpu"
    with pytest.raises(pytest.skip.Exception, match="no CPU counterpart"):
        tier_device(cpu_ok=False)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_head_reads_gradient_equals_plain_indexing(dtype):
    """The loss's head-map reads (utils/backend/torch_head_reads.py) on the GPU: its sort, cummax, index_add_ and
    index_put_ give the values and the map gradient of plain indexing of an fp32 copy, to the bit, in the trainer's
    deterministic mode (fp16: the map dtype CUDA AMP gives the loss)."""
    from tests.test_backend.test_head_reads import _case, _run, plain
    from tests.test_backend.test_deterministic_fill import deterministic_mode
    from utils.backend import head_reads
    dev = tier_device()
    pi, idx, w_obj, w_rows = (t.to(dev) for t in _case(getattr(torch, dtype), 60))
    with deterministic_mode(fill=False):
        ref = _run(plain, pi, idx, w_obj, w_rows)
        got = _run(head_reads, pi, idx, w_obj, w_rows)
    for a, b in zip(ref, got):
        assert a.device.type == dev.type and torch.equal(a, b)
