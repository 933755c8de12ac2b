"""--multi_tensor_optimizer, the backend's multi-tensor set (ema_update_, optimizer_kwargs, optimizer_impl): the fused
EMA update and the fused/foreach optimizer step equal the plain loops."""
import copy

import numpy as np
import pytest

from utils.backend import (IS_ONEFLOW, IS_TORCH, cuda_available, ema_impl, ema_update_, nn, no_grad, optimizer_impl,
                           optimizer_kwargs, torch)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on a shared 2-core machine OpenMP's spinning threads make small ops ~50x slower."""
    if not hasattr(torch, "get_num_threads"):  # OneFlow: cannot read it back, so leave it
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
                         nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.SiLU(), nn.Conv2d(16, 4, 1))


def _float_state(m):
    return [(k, v) for k, v in m.state_dict().items() if v.dtype.is_floating_point]


def _np(t):
    return t.detach().cpu().numpy()


def _ema_run(fused, steps=6, device="cpu"):
    """EMA of a model whose weights and BN buffers change every step (by training on random data)."""
    model = _model().to(device)
    ema = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    ds = []
    for i in range(steps):
        x = torch.tensor(rng.normal(size=(2, 3, 16, 16)).astype(np.float32)).to(device)
        model.train()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        d = 0.9999 * (1 - np.exp(-(i + 1) / 2000)) + 0.3  # larger than the real ramp so each step moves the EMA
        ds.append(d)
        with no_grad():
            e_pairs, m_state = _float_state(ema), dict(_float_state(model))
            ema_update_([v for _, v in e_pairs], [m_state[k] for k, _ in e_pairs], d, fused)
    return {k: _np(v) for k, v in ema.state_dict().items()}, {k: _np(v) for k, v in model.state_dict().items()}, ds


def test_ema_fused_equals_loop_and_formula():
    fused_state, model_state, _ = _ema_run(True)
    loop_state, model_state2, _ = _ema_run(False)
    for k in loop_state:
        np.testing.assert_array_equal(model_state[k], model_state2[k])  # same training either way
        np.testing.assert_allclose(fused_state[k], loop_state[k], rtol=1e-6, atol=1e-7, err_msg=k)
    # integer buffers (num_batches_tracked) are not averaged
    nbt = [k for k in loop_state if k.endswith("num_batches_tracked")]
    assert nbt and all(loop_state[k] == 0 for k in nbt)


def test_ema_single_update_matches_official_formula():
    rng = np.random.default_rng(3)
    e0 = [rng.normal(size=s).astype(np.float32) for s in ((4, 3), (7,), (2, 2, 3))]
    m0 = [rng.normal(size=a.shape).astype(np.float32) for a in e0]
    for fused in (False, True):
        e = [torch.tensor(a) for a in e0]
        ema_update_(e, [torch.tensor(a) for a in m0], 0.7, fused)
        for got, a, b in zip(e, e0, m0):
            np.testing.assert_allclose(_np(got), a * 0.7 + 0.3 * b, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        ema_update_([torch.zeros(1)], [], 0.5, True)


def test_ema_impl_per_backend():
    t = [torch.zeros(3)]
    assert ema_impl(t, False) == "loop"
    # CPU: PyTorch's foreach is real on every device; OneFlow's multi-tensor kernel is CUDA-only
    assert ema_impl(t, True) == ("foreach" if IS_TORCH else "loop")


def _opt_run(name, fused, steps=5, device="cpu"):
    model = _model(1).to(device)
    # the official three groups, all given to the constructor (OneFlow's fused SGD needs that)
    bias = [p for n, p in model.named_parameters() if n.endswith(".bias")]
    bn_w = [p for n, p in model.named_parameters() if n.endswith(".weight") and p.ndim == 1]
    w = [p for n, p in model.named_parameters() if n.endswith(".weight") and p.ndim > 1]
    groups = [{"params": bias, "weight_decay": 0.0}, {"params": w, "weight_decay": 5e-4},
              {"params": bn_w, "weight_decay": 0.0}]
    kw = optimizer_kwargs(name, fused, torch.device(device))
    if name == "SGD":
        opt = torch.optim.SGD(groups, lr=0.01, momentum=0.937, nesterov=True, **kw)
    elif name == "Adam":
        opt = torch.optim.Adam(groups, lr=0.001, betas=(0.937, 0.999), **kw)
    else:
        opt = torch.optim.AdamW(groups, lr=0.001, betas=(0.937, 0.999), weight_decay=0.0, **kw)
    # the same gradient sequence for both runs (not gradients of the run's own weights): Adam turns last-bit
    # differences in near-zero gradients into lr-sized steps, which would compare chaos, not the optimizers
    rng = np.random.default_rng(5)
    for i in range(steps):
        for g in opt.param_groups:  # warmup-like lr changes between steps must be honoured
            g["lr"] = g["lr"] * 0.9
        for p in model.parameters():
            p.grad = torch.tensor(rng.normal(0, 0.1, tuple(p.shape)).astype(np.float32)).to(device)
        opt.step()
    state = []
    for p in model.parameters():
        st = opt.state[p] if IS_TORCH else {}
        state += [_np(v) for k, v in sorted(st.items()) if hasattr(v, "shape") and k != "step"]
    return [_np(p) for p in model.parameters()] + state, kw, opt


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_optimizer_fused_flag_equals_plain(name):
    fused_params, kw, opt = _opt_run(name, True)
    plain_params, kw0, opt0 = _opt_run(name, False)
    assert kw0 == {}
    if IS_TORCH:  # CPU: foreach (fused is kept for CUDA, see optimizer_kwargs)
        assert kw == {"foreach": True} and optimizer_impl(opt) == "foreach"
    else:
        assert kw == {}  # OneFlow has no CPU multi-tensor kernels
    assert optimizer_impl(opt0) == "loop"
    p0 = [_np(p) for p in _model(1).parameters()]
    assert len(fused_params) == len(plain_params) > len(p0) if IS_TORCH else True  # weights and optimizer state
    for a, b in zip(fused_params, plain_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert max(float(np.abs(a - b).max()) for a, b in zip(fused_params, p0)) > 1e-4  # the steps moved the weights


def test_optimizer_kwargs_off_is_framework_default_and_unknown_name():
    assert optimizer_kwargs("SGD", False, torch.device("cpu")) == {}
    with pytest.raises(ValueError):
        optimizer_kwargs("Lion", True, torch.device("cpu"))


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="the fused EMA/optimizer kernels need a CUDA GPU")
def test_cuda_fused_equals_loop():
    if IS_ONEFLOW:  # OneFlow's multi-tensor kernel is there for CUDA fp32 tensors
        assert ema_impl([torch.zeros(3, device="cuda")], True) == "oneflow-multi-tensor"
    fused_state, _, _ = _ema_run(True, device="cuda")
    loop_state, _, _ = _ema_run(False, device="cuda")
    for k in loop_state:
        np.testing.assert_allclose(fused_state[k], loop_state[k], rtol=1e-5, atol=1e-6, err_msg=k)
    for name in ("SGD", "Adam", "AdamW"):
        fused_params, kw, _ = _opt_run(name, True, device="cuda")
        plain_params, _, _ = _opt_run(name, False, device="cuda")
        assert kw == {"fused": True}
        for a, b in zip(fused_params, plain_params):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
