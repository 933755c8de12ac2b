"""utils.backend.bn_silu: a Conv's BatchNorm (training statistics) and SiLU as one C kernel on the CPU
(torch_bn_silu.py, utils/native/bn_silu.c). It must compute what nn.BatchNorm2d then nn.SiLU compute (held to a
float64 reference, as PyTorch's kernels are), update the running statistics and the batch count as the module does,
take gradients of any layout, let NaN through, run only where every condition holds, and fall back to the modules
with one line where no library can be built."""
import logging
import os
import stat

import pytest

from utils import native_build
from utils.backend import IS_TORCH, bn_silu, nn, torch

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="OneFlow's bn_silu is the modules' own call")


@pytest.fixture
def fused():
    from utils.backend import torch_bn_silu
    if torch_bn_silu.kernel_library() is None:
        pytest.skip("no C compiler here: the fused kernel cannot be built")
    return torch_bn_silu


def _modules(c, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    bn = nn.BatchNorm2d(c, eps=1e-3, momentum=0.03)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_(0, 0.3)
        bn.running_mean.normal_(0, 0.1)
        bn.running_var.uniform_(0.5, 2.0)
    return bn.to(dtype), nn.SiLU()


def _data(shape, seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 2 + 0.7).to(dtype).contiguous(memory_format=torch.channels_last)
    grad = torch.randn(shape, generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    return x, grad


def _run(fn, bn, act, x, grad):
    x = x.clone().requires_grad_()
    y = fn(bn, act, x)
    y.backward(grad)
    return {"y": y.detach(), "dx": x.grad, "dw": bn.weight.grad, "db": bn.bias.grad, "rm": bn.running_mean.clone(),
            "rv": bn.running_var.clone(), "n": int(bn.num_batches_tracked), "grad_fn": type(y.grad_fn).__name__}


def _modules_call(bn, act, x):
    return act(bn(x))


@pytest.mark.parametrize("shape", [(4, 24, 20, 18), (2, 7, 5, 3), (3, 33, 1, 1)])
def test_matches_float64_reference(fused, shape):
    x, grad = _data(shape)
    bn, act = _modules(shape[1])
    got = _run(bn_silu, bn, act, x, grad)
    assert got["grad_fn"] == "BatchNormSiLUBackward"  # the kernel ran, not the modules
    bn64, act64 = _modules(shape[1], dtype=torch.float64)
    want = _run(_modules_call, bn64, act64, x.double(), grad.double())
    for k in ("y", "dx", "dw", "db", "rm", "rv"):
        err = float((got[k].double() - want[k]).abs().max() / want[k].abs().max())
        assert err < 2e-6, f"{k}: {err:.1e} from the float64 reference"
    assert got["n"] == want["n"] == 1


def test_close_to_pytorch_kernels_and_deterministic(fused):
    x, grad = _data((8, 16, 12, 12))
    runs = [_run(bn_silu, *_modules(16), x, grad) for _ in range(2)]
    plain = _run(_modules_call, *_modules(16), x, grad)
    for k in ("y", "dx", "dw", "db", "rm", "rv"):
        assert torch.equal(runs[0][k], runs[1][k]), f"{k} differs between two identical runs"
        torch.testing.assert_close(runs[0][k], plain[k], rtol=1e-4, atol=1e-4)


def test_ctypes_declarations_match_the_c_prototypes(fused):
    """ctypes cannot see the C signatures: a declaration one argument short passes everything but the last
    argument, which the C code then reads from whatever is on the stack (the thread count, once). Each exported
    function's parameters in utils/native/bn_silu.c, mapped to ctypes, must be its declared argtypes."""
    import ctypes
    import re
    source = (native_build.SOURCE_DIR / "bn_silu.c").read_text()
    c_types = {"int": ctypes.c_int, "long": ctypes.c_long, "double": ctypes.c_double}
    lib = fused.kernel_library()
    exported = re.findall(r"^int (bn_silu_\w+)\(([^)]*)\)", source, re.M)
    assert {name for name, _ in exported} == {"bn_silu_forward", "bn_silu_backward"}
    for name, params in exported:
        want = []
        for p in " ".join(params.split()).split(","):
            p = p.replace("const ", "").strip()
            want.append(ctypes.c_void_p if "*" in p else c_types[p.split()[0]])
        assert list(getattr(lib, name).argtypes) == want, name
        assert getattr(lib, name).restype is ctypes.c_int, name


def test_frozen_input_still_trains_the_batchnorm(fused):
    """With the input needing no gradient (a frozen convolution before the BatchNorm), the weight and bias still get
    theirs (the kernel's scratch for the backward is allocated all the same)."""
    x, grad = _data((2, 6, 5, 4))
    bn, act = _modules(6)
    y = bn_silu(bn, act, x)  # x does not require grad
    assert type(y.grad_fn).__name__ == "BatchNormSiLUBackward"
    y.backward(grad)
    want = _run(bn_silu, *_modules(6), x, grad)
    assert torch.equal(bn.weight.grad, want["dw"]) and torch.equal(bn.bias.grad, want["db"])


def _direct_inputs(dtype, rows=6400, c=16):
    torch.manual_seed(1)
    x, g = (torch.rand(rows, c) * 4 - 1).to(dtype), (torch.rand(rows, c) * 2 - 1).to(dtype)
    return x, g


def _direct_call(lib, x, g, threads):
    """Forward and backward through the library itself, on `threads` threads: (out, dx, dw, db, rm, rv, stats)."""
    rows, c = x.shape
    bf16 = int(x.dtype == torch.bfloat16)
    w, b = torch.ones(c), torch.zeros(c)
    rm, rv, stats, dw, db = torch.zeros(c), torch.ones(c), torch.empty(4, c), torch.empty(c), torch.empty(c)
    out, dx = torch.empty_like(x), torch.empty_like(x)
    assert lib.bn_silu_forward(x.data_ptr(), bf16, rows, c, w.data_ptr(), b.data_ptr(), rm.data_ptr(),
                               rv.data_ptr(), 0.03, 1e-3, out.data_ptr(), stats.data_ptr(), threads) == 0
    assert lib.bn_silu_backward(x.data_ptr(), bf16, rows, c, g.data_ptr(), c, w.data_ptr(), stats.data_ptr(),
                                dx.data_ptr(), dw.data_ptr(), db.data_ptr(), 1, threads) == 0
    return out, dx, dw, db, rm, rv, stats


def _assert_same_bits(want, got):
    for name, a, b in zip(("out", "dx", "dw", "db", "rm", "rv", "stats"), want, got):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_same_bits_whatever_the_number_of_threads(fused, dtype):
    """Rows go out in chunks to whichever thread is free, and sums are added in chunk order: the number of threads
    (and which thread took which chunk) changes nothing. The library is called directly with 1, 2 and 3 threads on
    6400 rows (sums grouped per thread gave a different bias gradient with 3 threads here), then with 3 and 2 in
    turn (the kept helper threads: one of them sits out every other pass)."""
    lib = fused.kernel_library()
    x, g = _direct_inputs(dtype)
    want = _direct_call(lib, x, g, 1)
    for n in (2, 3) + (3, 2) * 20:
        _assert_same_bits(want, _direct_call(lib, x, g, n))


def test_two_callers_at_once_get_what_each_alone_gets(fused):
    """ctypes releases the GIL, so two Python threads can be in the library at once; the kept helper threads serve
    one pass at a time and the other caller's pass runs on its own thread, with the same results."""
    import threading
    lib = fused.kernel_library()
    inputs = [_direct_inputs(torch.float32, rows=2048 * (k + 1)) for k in range(2)]
    want = [_direct_call(lib, x, g, 1) for x, g in inputs]
    failures = []

    def caller(k):
        try:
            for _ in range(1000):  # without the pool's owner lock this hung within a few hundred
                _assert_same_bits(want[k], _direct_call(lib, *inputs[k], 2))
        except AssertionError as e:
            failures.append(f"caller {k}: {e}")

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert not failures, failures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_the_kernel_on_threads_of_its_own(fused):
    """A forked child (a data loader's worker) has none of its parent's threads: the kept helpers must be started
    again there, not waited for (that hung the child)."""
    import pickle
    import select
    import signal
    lib = fused.kernel_library()
    x, g = _direct_inputs(torch.bfloat16)
    want = _direct_call(lib, x, g, 2)  # the parent's helpers exist now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute on two threads, send the results, leave without running pytest's exit code
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as f:  # writes all of it, however small the pipe
                f.write(pickle.dumps([t.tolist() for t in _direct_call(lib, x, g, 2)]))
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    try:
        while select.select([read_end], [], [], 60)[0]:
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_end)
        if not data:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert data, "the forked child sent nothing within 60 s (it waited for helper threads it does not have)"
    got = [torch.tensor(v, dtype=t.dtype) for v, t in zip(pickle.loads(data), want)]
    _assert_same_bits(want, got)


def test_a_float64_default_dtype_changes_nothing(fused):
    """The kernel's own buffers are float32 whatever torch.set_default_dtype says (the C code writes floats)."""
    x, grad = _data((2, 6, 5, 4))
    want = _run(bn_silu, *_modules(6), x, grad)
    modules = _modules(6)  # a float32 model, and a user who changes the default dtype afterwards
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = _run(bn_silu, *modules, x, grad)
    finally:
        torch.set_default_dtype(old)
    assert got["grad_fn"] == "BatchNormSiLUBackward"
    for k in ("y", "dx", "dw", "db", "rm", "rv"):
        assert torch.equal(got[k], want[k]), k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["channel_slice", "nchw"])
def test_gradient_of_any_layout(fused, layout, dtype):
    """A Conv output that feeds a concatenation gets a channel slice of the concatenation's gradient; another
    consumer may hand back NCHW. Both give the gradients a dense channels-last one gives."""
    x, grad = _data((2, 6, 5, 4), dtype=dtype)
    wide = torch.randn(2, 10, 5, 4).to(dtype).contiguous(memory_format=torch.channels_last)
    wide[:, 3:9] = grad
    other = wide[:, 3:9] if layout == "channel_slice" else grad.contiguous()
    assert not other.is_contiguous(memory_format=torch.channels_last)
    want = _run(bn_silu, *_modules(6), x, grad)
    got = _run(bn_silu, *_modules(6), x, other)
    for k in ("dx", "dw", "db"):
        assert torch.equal(got[k], want[k]), k


def _bf16_ulps(got, want):
    """How many bfloat16 steps (units in the last place at want's magnitude) got is from want, element by element."""
    _, exponent = torch.frexp(want.double().abs().clamp_min(1e-30))  # |want| = m * 2**exponent, 0.5 <= m < 1
    return (got.double() - want.double()).abs() / torch.ldexp(torch.ones_like(want, dtype=torch.float64),
                                                             exponent - 8)


@pytest.mark.parametrize("shape", [(4, 24, 20, 18), (2, 7, 5, 3), (2, 33, 9, 16)])
def test_bf16_is_the_float32_computation_rounded(fused, shape):
    """bf16 activations (bf16 autocast) are widened exactly and computed as float32 ones are: the output is the
    float32 kernel's output on the same values rounded once (as PyTorch rounds), everything per channel (running
    statistics, weight and bias gradients) is the float32 kernel's, and the input gradient, which goes through
    dL/d(BatchNorm output) kept in bf16 between the two backward passes (as PyTorch's kernels keep it), stays
    within two bf16 roundings of the float32 one."""
    x16, g16 = _data(shape, dtype=torch.bfloat16)
    got = _run(bn_silu, *_modules(shape[1]), x16, g16)
    want = _run(bn_silu, *_modules(shape[1]), x16.float(), g16.float())
    assert got["grad_fn"] == want["grad_fn"] == "BatchNormSiLUBackward"
    assert got["y"].dtype == got["dx"].dtype == torch.bfloat16 and got["dw"].dtype == torch.float32
    assert got["y"].is_contiguous(memory_format=torch.channels_last)
    assert got["dx"].is_contiguous(memory_format=torch.channels_last)
    assert float(_bf16_ulps(got["y"], want["y"]).max()) <= 0.5 + 1e-3, "y: not the float32 value rounded"
    assert torch.equal(got["y"], want["y"].bfloat16()), "y: rounded differently from PyTorch's rounding"
    scale = float(want["dx"].abs().max())  # two roundings (dL/d(BatchNorm output), then dx): a bf16 step each
    assert float((got["dx"].double() - want["dx"].double()).abs().max()) <= scale * 2.0 ** -7
    for k in ("rm", "rv", "dw", "db"):
        torch.testing.assert_close(got[k], want[k], rtol=2e-6, atol=1e-7, msg=k)
    assert got["n"] == 1


def test_bf16_at_least_as_close_to_float64_as_pytorch_bf16_kernels(fused):
    """PyTorch's own kernels on the same bf16 tensors round the BatchNorm output to bf16 before the SiLU and the SiLU
    gradient before the BatchNorm backward, and sum the weight gradients of those rounded values; the kernel rounds
    once at the end. Against a float64 computation on the same bf16 values, every output of the kernel is at least
    as close as PyTorch's, and within a bf16 rounding of the largest value."""
    x16, g16 = _data((8, 16, 12, 12), dtype=torch.bfloat16)
    got = _run(bn_silu, *_modules(16), x16, g16)
    plain = _run(_modules_call, *_modules(16), x16, g16)
    assert plain["y"].dtype == torch.bfloat16 and plain["grad_fn"] != got["grad_fn"]
    want = _run(_modules_call, *_modules(16, dtype=torch.float64), x16.double(), g16.double())
    for k in ("y", "dx", "dw", "db", "rm", "rv"):
        ours, theirs = (float((r[k].double() - want[k]).abs().max()) for r in (got, plain))
        assert ours <= theirs * 1.01 + 1e-12, f"{k}: {ours:.2e} from float64, PyTorch's bf16 kernels {theirs:.2e}"
        assert ours <= float(want[k].abs().max()) * 2.0 ** -8, k


def test_conv_under_bf16_autocast_trains_through_it(fused):
    """The default CPU mixed precision: the Conv's convolution gives bf16, the kernel takes it and the float32
    parameters get float32 gradients."""
    from models.common import Conv
    torch.manual_seed(0)
    conv = Conv(8, 12, 3, 1)
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x)
    assert y.dtype == torch.bfloat16 and type(y.grad_fn).__name__ == "BatchNormSiLUBackward"
    y.float().sum().backward()
    assert conv.conv.weight.grad.dtype == conv.bn.weight.grad.dtype == torch.float32
    assert torch.isfinite(conv.conv.weight.grad).all() and int(conv.bn.num_batches_tracked) == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nan_is_not_hidden(fused, dtype):
    x, grad = _data((2, 4, 6, 6), dtype=dtype)
    x[1, 2, 3, 3] = float("nan")
    got = _run(bn_silu, *_modules(4), x, grad)
    assert got["grad_fn"] == "BatchNormSiLUBackward"
    assert torch.isnan(got["y"][:, 2]).all() and torch.isfinite(got["y"][:, [0, 1, 3]]).all()
    assert torch.isnan(got["rm"][2]) and torch.isnan(got["dw"][2])


def test_runs_only_where_every_condition_holds(fused, monkeypatch):
    x, _ = _data((2, 8, 6, 6))
    bn, act = _modules(8)
    assert fused.fused_applies(bn, act, x) and fused.fused_applies(bn, act, x.bfloat16())
    cases = {
        "fp16 activations": (bn, act, x.half()),
        "float64 activations": (bn, act, x.double()),
        "bf16 parameters": (_modules(8, dtype=torch.bfloat16)[0], act, x.bfloat16()),
        "NCHW input": (bn, act, x.contiguous()),
        "one value per channel": (bn, act, x[:1, :, :1, :1]),
        "not SiLU": (bn, nn.ReLU(), x),
        "SyncBatchNorm": (nn.SyncBatchNorm(8), act, x),
    }
    for why, args in cases.items():
        assert not fused.fused_applies(*args), why
    bn.eval()
    assert not fused.fused_applies(bn, act, x), "eval mode"
    bn.train()
    handle = bn.register_forward_hook(lambda *a: None)
    assert not fused.fused_applies(bn, act, x), "a hook on the BatchNorm"
    handle.remove()
    monkeypatch.setenv("YOLO_FUSED_BN_SILU", "0")
    assert not fused.fused_applies(bn, act, x), "YOLO_FUSED_BN_SILU=0"
    monkeypatch.delenv("YOLO_FUSED_BN_SILU")
    assert fused.fused_applies(bn, act, x)


def test_model_conv_trains_through_it(fused):
    from models.common import Conv
    torch.manual_seed(0)
    conv = Conv(8, 12, 3, 1)
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)
    y = conv(x)
    assert type(y.grad_fn).__name__ == "BatchNormSiLUBackward"
    y.sum().backward()
    assert conv.conv.weight.grad is not None and int(conv.bn.num_batches_tracked) == 1


def test_csp_bottleneck_trains_through_it(fused):
    """BottleneckCSP (configs before v4.0) normalises its concatenation with its own BatchNorm and SiLU."""
    from models.common import BottleneckCSP
    torch.manual_seed(0)
    m = BottleneckCSP(8, 8, n=1)
    seen = []
    m.cv4.register_forward_pre_hook(lambda mod, inp: seen.append(type(inp[0].grad_fn).__name__))
    m(torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)).sum().backward()
    assert seen == ["BatchNormSiLUBackward"] and int(m.bn.num_batches_tracked) == 1


def test_no_compiler_falls_back_with_one_line(monkeypatch, caplog, tmp_path):
    from utils.backend import torch_bn_silu
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    torch_bn_silu.kernel_library.cache_clear()
    native_build.load.cache_clear()
    try:
        with caplog.at_level(logging.INFO):
            x, grad = _data((2, 4, 6, 6))
            got = _run(bn_silu, *_modules(4), x, grad)
        assert got["grad_fn"] == "SiluBackward0"  # the modules ran
        lines = [r.getMessage() for r in caplog.records if "fused BatchNorm+SiLU off" in r.getMessage()]
        assert len(lines) == 1 and "no C compiler" in lines[0]
    finally:
        torch_bn_silu.kernel_library.cache_clear()
        native_build.load.cache_clear()


@pytest.fixture
def kernel_source(tmp_path, monkeypatch):
    """native_build reading kernels from a folder of the test's own, building into a cache of its own."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.c").write_text("int answer(void) { return 42; }\n")
    monkeypatch.setattr(native_build, "SOURCE_DIR", src)
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    native_build.load.cache_clear()
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    yield src
    native_build.load.cache_clear()


def test_build_cache_and_rebuild_on_change(kernel_source, tmp_path):
    assert native_build.load("k").answer() == 42
    built = sorted((tmp_path / "cache" / "native").iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"
    assert not [p for p in built[0].parent.iterdir() if "yolo-partial" in p.name]  # no temporary left
    (kernel_source / "k.c").write_text("int answer(void) { return 7; }\n")
    native_build.load.cache_clear()
    assert native_build.load("k").answer() == 7  # a changed source is a new library, never the old one
    assert len(list((tmp_path / "cache" / "native").iterdir())) == 2


def test_failed_build_is_one_line_and_leaves_nothing(kernel_source, tmp_path):
    (kernel_source / "k.c").write_text("int answer(void) { return }\n")
    with pytest.raises(native_build.NativeBuildError) as e:
        native_build.load("k")
    assert "\n" not in str(e.value) and "k.c" in str(e.value)
    assert not list((tmp_path / "cache" / "native").iterdir())


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_cached_library_writable_by_others_is_not_loaded(kernel_source, tmp_path):
    native_build.load("k")
    lib = next((tmp_path / "cache" / "native").iterdir())
    lib.chmod(lib.stat().st_mode | stat.S_IWOTH)
    native_build.load.cache_clear()
    with pytest.raises(native_build.NativeBuildError, match="not private"):
        native_build.load("k")


def test_cache_keeps_a_bounded_number_of_builds_and_nothing_else(kernel_source, tmp_path):
    cache = tmp_path / "cache" / "native"
    cache.mkdir(parents=True)
    old = [cache / f"k-{i:016x}.so" for i in range(native_build.KEEP_BUILDS + 3)]
    for i, p in enumerate(old):
        p.write_bytes(b"old")
        os.utime(p, (1000 + i, 1000 + i))
    mine = [cache / "k-notes.so", cache / "other-0000000000000000.so"]  # not this kernel's library names
    for p in mine:
        p.write_bytes(b"user")
    assert native_build.load("k").answer() == 42
    kept = sorted(p.name for p in cache.iterdir() if p.name.startswith("k-") and p not in mine)
    assert len(kept) == native_build.KEEP_BUILDS  # the new build and the newest old ones
    assert old[-1].exists() and not old[0].exists()
    assert all(p.exists() for p in mine)


def test_full_disk_is_no_kernel_in_one_line_not_a_crash(kernel_source, tmp_path, monkeypatch):
    import errno

    from utils import atomic_files

    def disk_full(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files, "_before_write", disk_full)
    with pytest.raises(native_build.NativeBuildError) as e:
        native_build.load("k")
    assert "\n" not in str(e.value) and "disk is full" in str(e.value)
    assert not [p for p in (tmp_path / "cache" / "native").iterdir()]


def test_no_writable_cache_builds_for_this_process_only(kernel_source, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("YOLO_CACHE_DIR", str(blocker))  # YOLO_CACHE_DIR/native cannot be made
    made = []
    real_mkdtemp = native_build.tempfile.mkdtemp
    monkeypatch.setattr(native_build.tempfile, "mkdtemp", lambda **kw: made.append(real_mkdtemp(**kw)) or made[-1])
    assert native_build.load("k").answer() == 42
    assert len(made) == 1 and not os.path.exists(made[0])  # built in a temporary folder, removed once loaded


def test_silu_holds_over_the_whole_float_range(fused):
    """Outputs far into both tails (normalised values times 25: about -90 to 90), element by element against
    float64: relative where the value is above 1e-30 (below it float32 holds only denormals) and the BatchNorm
    output is not near 0 (there it is the difference of two terms near 10, which float32 holds to about 1e-6
    absolute, as PyTorch's kernels do)."""
    x, grad = _data((2, 3, 40, 40))
    bn, act = _modules(3)
    with torch.no_grad():
        bn.weight.fill_(25.0)
    y = _run(bn_silu, bn, act, x, grad)["y"].double()
    x64, b64 = x.double(), bn.bias.detach().double().view(1, -1, 1, 1)
    mean, var = x64.mean((0, 2, 3), keepdim=True), x64.var((0, 2, 3), unbiased=False, keepdim=True)
    pre = (x64 - mean) / (var + bn.eps).sqrt() * 25.0 + b64
    ref = pre * torch.sigmoid(pre)
    assert pre.min() < -60 and pre.max() > 60  # both tails reached
    rel = ((y - ref).abs() / ref.abs())[(ref.abs() > 1e-30) & (pre.abs() > 1)]
    assert float(rel.max()) < 2e-5  # float32's rounding of a pre-activation near 60, times the slope (about 1)
    assert float((y - ref).abs().max()) < 1e-5
