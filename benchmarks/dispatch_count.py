"""Counts what one training step asks of a GPU: kernel-launching aten ops and host-sync points, per stage.

It needs only PyTorch (no module of this project), because benchmarks/launches.py also runs it inside the official
ultralytics checkout, with that checkout's own Python, to count the official step the same way.

What is counted, with PyTorch's dispatch mode (TorchDispatchMode), while the step runs on the CPU:
* launches: every aten op that reaches the dispatcher and is not a view (views only make a new tensor header; on a
  GPU every other op is a kernel launch or, for allocations, an allocator call). Ops that code outside the
  dispatcher runs (a Triton kernel) are added by the caller with ``add_kernels``.
* host-sync points: places where, on a GPU, the host waits for the device queue to drain:
  - scalar reads: aten._local_scalar_dense (``.item()``, ``float(t)``, ``bool(t)``, ``if t:``), aten.equal,
    aten.is_nonzero;
  - data-dependent shapes: aten.nonzero, masked_select, unique, repeat_interleave without output_size, and indexing
    or index_put with a boolean mask (the kernel runs nonzero inside);
  - copies to the host: ``Tensor.cpu()`` and ``Tensor.tolist()`` (patched at the Python level while counting,
    because on the CPU they do not reach the dispatcher).
* host data: ``torch.tensor(python data)`` (aten.lift_fresh): on a GPU, a tensor made from host data for the device
  is a blocking host-to-device copy. Reported on its own line, not in the sync count.

The figures are those of the dispatched ops, which are the same on CPU and CUDA except where code branches on the
device (foreach/fused optimizers, clip_grad_norm_'s foreach path, a Triton kernel); callers select the CUDA branch
explicitly where it differs (see ``cuda_foreach_defaults``).
"""
import contextlib
from collections import Counter, defaultdict

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# ops that need a value on the host to decide an output shape or a Python branch
_SYNC_OPS = {
    "_local_scalar_dense": "scalar read (.item/float/bool)",
    "equal": "scalar read (.item/float/bool)",
    "is_nonzero": "scalar read (.item/float/bool)",
    "nonzero": "nonzero",
    "masked_select": "boolean-mask indexing",
    "_unique": "unique",
    "_unique2": "unique",
    "unique_dim": "unique",
    "unique_consecutive": "unique",
}
_INDEX_OPS = {"index", "index_put", "index_put_", "_index_put_impl_"}


def _packet(func):
    return func._schema.name.split("::")[-1]


def _has_bool_index(args):
    """True when an aten.index/index_put call carries a boolean (or uint8) mask among its indices."""
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in (indices or ()))


class DispatchCounter(TorchDispatchMode):
    """``with DispatchCounter() as c:`` then ``with c.stage('forward'): ...``; read ``c.launches``, ``c.syncs``,
    ``c.host_data``, each {stage: Counter(op or kind -> count)}."""

    def __init__(self):
        super().__init__()
        self.current = None
        self.launches = defaultdict(Counter)
        self.syncs = defaultdict(Counter)
        self.host_data = defaultdict(Counter)
        self._paused = 0
        self._host_copies = set()  # ids of tensors already copied to the host (their .tolist() is free)
        self._saved = {}

    # -------------------------------------------------------------------------------------------------- control
    @contextlib.contextmanager
    def stage(self, name):
        previous, self.current = self.current, name
        try:
            yield self
        finally:
            self.current = previous

    @contextlib.contextmanager
    def paused(self):
        """Ops inside are not counted (e.g. a Triton interpreter run that is counted as one kernel instead)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def add_kernels(self, name, n=1):
        if self.current is not None and not self._paused:
            self.launches[self.current][name] += n

    def add_sync(self, kind, n=1):
        if self.current is not None and not self._paused:
            self.syncs[self.current][kind] += n

    # -------------------------------------------------------------------------------------------------- dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.current is None or self._paused:
            return out
        name = _packet(func)
        if name in ("lift_fresh", "lift_fresh_copy"):
            self.host_data[self.current]["torch.tensor(host data)"] += 1
            return out
        if name in _SYNC_OPS:
            self.syncs[self.current][_SYNC_OPS[name]] += 1
        elif name == "repeat_interleave" and (kwargs or {}).get("output_size") is None and len(args) == 1:
            self.syncs[self.current]["repeat_interleave (output size)"] += 1
        elif name in _INDEX_OPS and _has_bool_index(args):
            self.syncs[self.current]["boolean-mask indexing"] += 1
        if name == "_local_scalar_dense" or func.is_view:
            return out  # a scalar read launches nothing; a view is a header
        self.launches[self.current][name] += 1
        return out

    # Python-level host copies (they never reach the dispatcher for CPU tensors)
    def __enter__(self):
        counter = self
        cpu, tolist = torch.Tensor.cpu, torch.Tensor.tolist
        self._saved = {"cpu": cpu, "tolist": tolist}

        def counted_cpu(t, *a, **k):
            out = cpu(t, *a, **k)
            if counter.current is not None and not counter._paused:
                counter.syncs[counter.current]["copy to host (.cpu/.tolist)"] += 1
                counter._host_copies.add(id(out))
            return out

        def counted_tolist(t):
            if counter.current is not None and not counter._paused and id(t) not in counter._host_copies:
                counter.syncs[counter.current]["copy to host (.cpu/.tolist)"] += 1
            with counter.paused():
                return tolist(t)

        torch.Tensor.cpu, torch.Tensor.tolist = counted_cpu, counted_tolist
        return super().__enter__()

    def __exit__(self, *exc):
        torch.Tensor.cpu, torch.Tensor.tolist = self._saved["cpu"], self._saved["tolist"]
        return super().__exit__(*exc)

    # -------------------------------------------------------------------------------------------------- results
    def summary(self, stages):
        """{'stages': {stage: {'launches', 'syncs', 'host_data', 'ops', 'sync_kinds'}}, 'launches', 'syncs',
        'host_data'} for the given stage order."""
        out = {"stages": {}}
        for s in stages:
            out["stages"][s] = {"launches": sum(self.launches[s].values()), "syncs": sum(self.syncs[s].values()),
                                "host_data": sum(self.host_data[s].values()),
                                "ops": dict(self.launches[s].most_common()),
                                "sync_kinds": dict(self.syncs[s])}
        out["launches"] = sum(v["launches"] for v in out["stages"].values())
        out["syncs"] = sum(v["syncs"] for v in out["stages"].values())
        out["host_data"] = sum(v["host_data"] for v in out["stages"].values())
        return out


@contextlib.contextmanager
def cuda_foreach_defaults():
    """Make PyTorch take, for CPU tensors, the foreach branches it takes by default for CUDA tensors
    (clip_grad_norm_ and optimizers with foreach=None), so that a CPU run dispatches the ops a GPU run would."""
    import torch.utils._foreach_utils as fu
    saved = fu._get_foreach_kernels_supported_devices
    fu._get_foreach_kernels_supported_devices = lambda: [*saved(), "cpu"]
    patched = []
    for mod_name in ("torch.optim.optimizer", "torch.nn.utils.clip_grad"):
        mod = __import__(mod_name, fromlist=["_"])
        if getattr(mod, "_get_foreach_kernels_supported_devices", None) is saved:
            patched.append(mod)
            mod._get_foreach_kernels_supported_devices = fu._get_foreach_kernels_supported_devices
    try:
        yield
    finally:
        fu._get_foreach_kernels_supported_devices = saved
        for mod in patched:
            mod._get_foreach_kernels_supported_devices = saved


def synthetic_batch(bs=16, img=320, per_image=8, nc=80, seed=0):
    """The same images (uint8) and targets (image, class, x, y, w, h normalised) for both codebases."""
    g = np.random.default_rng(seed)
    imgs = torch.from_numpy(g.integers(0, 256, (bs, 3, img, img), dtype=np.uint8))
    n = bs * per_image
    wh = g.uniform(0.02, 0.5, (n, 2))
    xy = g.uniform(0.0, 1.0, (n, 2)) * (1 - wh) + wh / 2
    t = np.concatenate([np.repeat(np.arange(bs), per_image)[:, None], g.integers(0, nc, (n, 1)), xy, wh], 1)
    return imgs, torch.from_numpy(t.astype(np.float32))


STAGES = ("forward", "loss", "backward", "optimizer", "ema")


def count_step(step, warmup=2):
    """Run ``step(counter)`` ``warmup`` times uncounted (lazy state: momentum buffers, EMA, caches), then once
    counted; ``step`` wraps its parts in ``counter.stage(name)`` for the names in STAGES. Returns the summary."""
    idle = DispatchCounter()
    for _ in range(warmup):
        step(idle)  # stages are entered but nothing is recorded: no mode is active
    with DispatchCounter() as c:
        step(c)
    return c.summary(STAGES)
