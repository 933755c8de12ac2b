"""The function set (utils/backend/api.py) on PyTorch. Imported by utils/backend/__init__.py when PyTorch is the
chosen backend; importing it imports torch (a BackendError says what to install when that fails)."""
import contextlib
import datetime
import inspect
import os
import sys

from utils.backend.common import (accepts, check_ema_pairs, contiguous_array, ema_loop_, fused_ciou_request, group_get,
                                  installed, is_cuda, onednn_isa_cap, read_proc_cpu_flags, _NoScaler)
from utils.backend_choice import BackendError, gpu_seen_here
from utils.optimizer_layout import to_torch_layout
from utils.settings import CHANNELS_LAST

if "OMP_WAIT_POLICY" not in os.environ and not gpu_seen_here()[0]:
    # OpenMP threads that spin at barriers waste the cores that loader workers (and anyone else on the machine) need,
    # and stall when those preempt them: yolov5n training steps ran 5.5x faster with passive waiting on a loaded
    # 2-core machine, and the same within 6% on a quiet one (benchmarks/cpu_levers.py). The OpenMP runtime reads it
    # when torch loads it, hence before the import; a value the user set wins.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

try:
    import torch
except Exception as e:
    raise BackendError(f"'import torch' failed ({e}). Install it with 'pip install torch==2.13.0' "
                       "(CPU build) or set YOLO_BACKEND=oneflow.") from e

from utils.backend.torch_ciou import ciou_compiled, load_triton_ciou  # noqa: E402  (imports torch: after the check)
from utils.backend.torch_head_reads import head_reads  # noqa: E402, F401  (the function set's head_reads)
from utils.backend.torch_head_layout import head_layout  # noqa: E402, F401  (the function set's head_layout)
from utils.backend.torch_conv_grad import conv2d  # noqa: E402, F401  (the function set's conv2d)
from utils.backend.torch_bn_silu import bn_silu  # noqa: E402, F401  (the function set's bn_silu)

BatchNorm2d = torch.nn.BatchNorm2d


def tensorboard_graph(model, imgsz):
    """What SummaryWriter.add_graph writes (torch's own tracer to GraphDef, which needs the tensorboard package), for
    the model unwrapped from DDP and traced in eval mode with a zero image (1, 3, *imgsz) on its device."""
    from torch.utils.tensorboard._pytorch_graph import graph
    model = model.module if hasattr(model, "module") else model
    p = next(model.parameters())
    im = torch.zeros((1, 3, *imgsz), device=p.device, dtype=p.dtype)
    training = model.training
    model.eval()  # a training-mode trace would move BatchNorm statistics towards the zero image
    try:
        with torch.no_grad():  # check_trace off: Detect builds its grids on the first call only, so two calls differ
            traced = torch.jit.trace(model, im, strict=False, check_trace=False)
    finally:
        model.train(training)
    return graph(traced, [])[0]  # a traced module: graph() reads its graph, no second trace


# ----------------------------------------------------------------------------------------------------------------
# Tensors, devices
def from_numpy(a):
    return torch.from_numpy(contiguous_array(a))


def to_device(t, dev):
    """non_blocking: asynchronous from pinned memory, so the host does not wait for the copy."""
    return t.to(dev, non_blocking=True)


def wait_for_work(dev=None):
    if dev is not None and is_cuda(dev) and torch.cuda.is_available():
        torch.cuda.synchronize()


def require_pytorch(purpose):
    return torch


def set_deterministic():
    """torch.use_deterministic_algorithms(True, warn_only=True) without its import of torch._inductor (1.6 s of a
    2-core machine's start-up, for a compiler training does not use): the same framework flag, and Inductor's
    deterministic mode set where it is loaded already, else through the variable it reads when it loads.
    Deterministic mode also NaN-fills every new tensor before its kernel writes it (torch's
    fill_uninitialized_memory, a debugging aid against kernels that read memory they never wrote), about 2,300
    tensors a yolov5n step: on a 2-core Zen 4 the fills made a bf16 channels_last step 12% slower at yolov5n 320
    and 8% at yolov5s 640 (benchmarks/cpu_levers.py, variant fill: cpu_levers_20261129T*_fill.json). No kernel
    or code of a step reads memory it did not write, so the fill is off: the numbers are the same to the bit
    (tests/test_backend/test_deterministic_fill.py). The official trainer keeps it on; on a GPU each fill is a
    kernel launch.
    """
    with contextlib.suppress(Exception):
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
        inductor_config = sys.modules.get("torch._inductor.config")
        if inductor_config is not None:
            inductor_config.deterministic = True
        else:
            os.environ.setdefault("TORCHINDUCTOR_DETERMINISTIC", "1")
        torch.backends.cudnn.deterministic = True


def nms_kernel(dev):
    try:
        import torchvision  # optional: not installable on the CPU machines, fine on GPU hosts
        return torchvision.ops.nms
    except Exception:
        return None


# ----------------------------------------------------------------------------------------------------------------
# Mixed precision
def has_amp(device):
    """fp16 autocast with loss scaling: CUDA only."""
    return is_cuda(device)


def no_amp_reason():
    return ""


def _cpu_flags():
    """The CPU's feature flags: PyTorch's own probe (cpuinfo) where the build has it, else /proc/cpuinfo."""
    probe = getattr(getattr(torch._C, "_cpu", None), "_get_cpu_capability", None)
    if probe is not None:
        try:
            return {k for k, v in probe().items() if v is True}
        except Exception:  # an unexpected shape of the answer: fall back to the kernel's list
            pass
    return read_proc_cpu_flags()


# oneDNN's instruction-set caps (its ONEDNN_MAX_CPU_ISA, formerly DNNL_MAX_CPU_ISA) below which it has no bf16
# dot-product instructions: under such a cap oneDNN emulates bf16 even on a CPU that has them (AVX2_VNNI_2 only
# converts). The cap is how an AVX2-only CPU is emulated on a newer one, so the choice of dtype follows it too.
_ONEDNN_CAPS_WITHOUT_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}


def cpu_has_native_bf16():
    """True when this CPU computes in bfloat16 natively (AVX512-BF16 or AMX-BF16) and oneDNN will use it. Read from
    the CPU's flags, not guessed from a model name; without them (or with oneDNN capped below them) bf16 is
    emulated and slower than fp32."""
    if not ({"avx512_bf16", "amx_bf16"} & _cpu_flags()) or onednn_isa_cap() in _ONEDNN_CAPS_WITHOUT_BF16:
        return False
    mkldnn_bf16 = getattr(getattr(torch.ops, "mkldnn", None), "_is_mkldnn_bf16_supported", None)
    try:
        return bool(mkldnn_bf16()) if mkldnn_bf16 is not None else True
    except Exception:
        return False


def amp_dtype(device, request=None):
    """The autocast dtype for training on ``device``, or None for fp32. The weights stay fp32 either way.

    request None (the default): the official choice, fp16 with loss scaling on CUDA, fp32 elsewhere.
    request True (--amp): fp16 on CUDA; bf16 on a CPU with native bf16 (no loss scaling: bf16 has fp32's exponent
    range); otherwise fp32, with the reason as the second value. request False (--no-amp): fp32.
    Returns (dtype or None, note or '')."""
    if request is False:
        return None, ""
    if has_amp(device):
        return torch.float16, ""
    if request is None:
        return None, ""
    if is_cuda(device):
        return None, "--amp: no mixed precision for this device; training in fp32"
    if cpu_has_native_bf16():
        return torch.bfloat16, ""
    return None, "--amp: this CPU has no native bfloat16 (AVX512-BF16 or AMX); training in fp32"


def channels_last_pays(device, dtype):
    """Whether inputs (training batches, inference images) should be channels_last on this device: on the CPU, where
    oneDNN runs NHWC convolutions without reordering every activation (benchmarks/cpu_levers.py, channels_last input
    against NCHW, quiet 2-core EPYC: training step yolov5n 320 1.20x, yolov5s 640 1.14x; validation forward at 640
    yolov5n 1.49x, yolov5s 1.80x; bf16 too). Only the input changes: the layout spreads through the convolutions,
    the weights stay NCHW, so checkpoints are unchanged. Not on CUDA (not measured there).
    YOLO_CHANNELS_LAST=0 turns it off, YOLO_CHANNELS_LAST=1 on for every device."""
    forced = CHANNELS_LAST.get()
    return (not is_cuda(device)) if forced is None else forced


def autocast(dev, enabled=True, dtype=None):
    """fp16 (or ``dtype``) on CUDA; bf16 on the CPU when asked for with dtype=bfloat16 (see amp_dtype); else none."""
    if enabled and has_amp(dev):
        return torch.autocast("cuda", dtype=dtype or torch.float16)
    if enabled and dtype is not None and dtype == torch.bfloat16 and not is_cuda(dev):
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def grad_scaler(dev, enabled=True):
    if enabled and has_amp(dev):
        return torch.amp.GradScaler("cuda") if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler()
    return _NoScaler()


# ----------------------------------------------------------------------------------------------------------------
# Fused CIoU: a hand-written Triton kernel pair on CUDA (utils/backend/torch_ciou_triton.py), or the same maths
# through torch.compile (utils/backend/torch_ciou.py, which imports triton only when asked for: it is optional).
def fused_ciou(device):
    """With YOLO_FUSED_CIOU=compile torch.compile is preferred to the Triton kernel; =plain turns the fused path off."""
    choice = fused_ciou_request()
    if choice == "plain" or not is_cuda(device) or not installed("triton"):  # inductor needs Triton for CUDA code
        return "plain", None
    if choice != "compile":
        kernel = load_triton_ciou()
        if kernel is not None:
            return "triton", kernel
    if hasattr(torch, "compile"):
        return "torch-compile", ciou_compiled
    return "plain", None


def compiled_ciou():
    if not hasattr(torch, "compile"):
        return None
    return ciou_compiled


# ----------------------------------------------------------------------------------------------------------------
# Multi-tensor EMA, optimizer and clipping: torch._foreach_* ops (one launch per chunk of tensors on CUDA; on the
# CPU the per-tensor arithmetic, so equal to the loop to the bit) and the optimizers' fused/foreach steps.
def _has_foreach():
    return hasattr(torch, "_foreach_mul_")


def ema_impl(ema_tensors, fused):
    if not fused or not ema_tensors:
        return "loop"
    return "foreach" if _has_foreach() else "loop"


def ema_update_(ema_tensors, model_tensors, d, fused):
    """In place: ema = d * ema + (1 - d) * model for each pair. Call under no_grad. ``fused`` is the flag."""
    model_tensors = check_ema_pairs(ema_tensors, model_tensors)
    if ema_impl(ema_tensors, fused) == "foreach":
        if any(e.dtype != m.dtype for e, m in zip(ema_tensors, model_tensors)):
            model_tensors = [m.to(e.dtype) for e, m in zip(ema_tensors, model_tensors)]
        torch._foreach_mul_(ema_tensors, d)
        torch._foreach_add_(ema_tensors, model_tensors, alpha=1 - d)
    else:
        ema_loop_(ema_tensors, model_tensors, d)


def _without_compiler_wrappers(cls):
    """A subclass of the torch.optim class cls whose step and add_param_group, zero_grad, state_dict and
    load_state_dict are cls's own code without the wrappers torch puts around them for torch.compile: a graph break
    around step and a "skip this when compiling" around the others. Each wrapper imports torch._dynamo on its first
    call, 1.6 s of every training run's start on a 2-core machine (ultralytics pays it too), for a compiler that
    training never runs. Outside compiled code the wrappers only call the method (step under grad mode off, which is
    kept), so the update, the state dict layout, the step hooks and the LR schedulers' bookkeeping are torch's.
    Nothing here compiles an optimizer (benchmarks/speed.py's torch.compile candidate compiles the model's forward);
    a user who compiles a training step with one of these should use torch.optim's class."""
    update = inspect.unwrap(cls.step)

    def step(self, closure=None):
        with torch.set_grad_enabled(self.defaults.get("differentiable", False)):
            return update(self, closure)

    methods = {name: inspect.unwrap(getattr(cls, name))
               for name in ("add_param_group", "zero_grad", "state_dict", "load_state_dict")}
    return type(cls.__name__, (cls,), {"step": step, **methods, "__module__": __name__,
                                       "__doc__": f"torch.optim.{cls.__name__} without its torch.compile wrappers."})


_OPTIMIZERS = {name: _without_compiler_wrappers(getattr(torch.optim, name)) for name in ("SGD", "Adam", "AdamW",
                                                                                         "RMSprop")}
SGD, Adam, AdamW = _OPTIMIZERS["SGD"], _OPTIMIZERS["Adam"], _OPTIMIZERS["AdamW"]  # module names: pickle finds them
RMSprop = _OPTIMIZERS["RMSprop"]  # noqa: N816 (the class, as torch names it)


def optimizer_class(name):
    return _OPTIMIZERS[name]


def optimizer_kwargs(name, fused, device):
    """fused=False: {} (the framework's default step, what the official trainer gets). fused=True: fused=True (one
    kernel for every tensor) on CUDA when the build has it, else foreach=True (the loop's arithmetic, batched).

    CPU: foreach, not fused. PyTorch >= 2.4 has CPU fused kernels (SGD step yolov5n 12 -> 3 ms, yolov5s 38 -> 11 ms
    here), but they round differently from the loop, and max-pool/clamp gradient switches turn that into visible
    loss differences within 20 iterations. foreach is the loop's arithmetic bit for bit (on the CPU ~1.4x slower
    than the loop, but the step runs once per `accumulate` batches: < 0.5% of a step)."""
    if not fused:
        return {}
    cls = getattr(torch.optim, name, None)
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}: use SGD, Adam or AdamW")
    if is_cuda(device) and accepts(cls, "fused") and fused_step_works(cls, device):
        return {"fused": True}
    if accepts(cls, "foreach"):
        return {"foreach": True}
    return {}


_FUSED_PROBED = {}


def fused_step_works(cls, device):
    """PyTorch has fused kernels for CUDA and, since 2.4, the CPU; older builds raise. Probe once per device type
    with a one-element step rather than trusting version numbers."""
    dev = torch.device(device) if not hasattr(device, "type") else device
    key = (cls.__name__, dev.type)
    if key not in _FUSED_PROBED:
        try:
            p = torch.zeros(1, device=dev, requires_grad=True)
            p.grad = torch.zeros(1, device=dev)
            cls([p], lr=0.1, fused=True).step()
            _FUSED_PROBED[key] = True
        except (RuntimeError, ValueError, TypeError, NotImplementedError):
            _FUSED_PROBED[key] = False
    return _FUSED_PROBED[key]


def optimizer_impl(optimizer):
    if not optimizer.param_groups:
        return "loop"
    g = optimizer.param_groups[0]
    if group_get(g, "fused"):
        return "fused"
    foreach, params = group_get(g, "foreach"), group_get(g, "params") or []
    if foreach or (foreach is None and len(params) and is_cuda(params[0])):  # PyTorch's own default on CUDA
        return "foreach"
    return "loop"


def optimizer_variants(device):
    """The explicit per-tensor loop, and on the CPU the fused kernel the flag does not use (faster, not bit-equal)."""
    out = {"explicit loop": {"foreach": False}}
    if not is_cuda(device) and fused_step_works(torch.optim.SGD, device):
        out["cpu fused kernel"] = {"fused": True, "foreach": False}
    return out


def clip_grad_norm_(parameters, max_norm, fused):
    """Scale the gradients in place so that their joint L2 norm is at most ``max_norm``; returns the norm (a 0-d
    tensor, left on the device: reading it would be a host sync). fused (the --multi_tensor_optimizer flag): eight
    launches for any number of tensors (the per-tensor norms as one op, their norm, the clamped factor, one
    multi-tensor multiply), with torch.nn.utils.clip_grad_norm_'s arithmetic (same values to the bit)."""
    params = [p for p in parameters if p.grad is not None]
    grads = [p.grad.detach() for p in params]
    if not (fused and grads and _has_foreach() and hasattr(torch, "_foreach_norm")):
        return torch.nn.utils.clip_grad_norm_(params, max_norm=max_norm)
    total = torch.linalg.vector_norm(torch.stack(list(torch._foreach_norm(grads, 2.0))), 2.0)
    factor = (max_norm / (total + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, factor)
    return total


def all_finite(tensors):
    """One multi-tensor L2 norm over the list (NaN and Inf both make a tensor's norm non-finite; so does a weight
    beyond ~1e19, whose square overflows, which no trained model holds), their stack, then one read: the only host
    sync. The L2 norm, not max |x|: on the CPU the foreach max-norm took 1.5 s for yolov5s' model + EMA, this 28 ms."""
    tensors = [t.detach() for t in tensors if t.is_floating_point() and t.numel()]
    if not tensors:
        return True
    if _has_foreach() and hasattr(torch, "_foreach_norm"):
        norms = torch._foreach_norm(tensors, 2.0)
    else:
        norms = [torch.linalg.vector_norm(t, 2.0) for t in tensors]
    return bool(torch.isfinite(torch.stack([n.float() for n in norms])).all())  # SYNC


def optimizer_state_to_native(state_dict):
    return to_torch_layout(state_dict, torch.tensor)


# ----------------------------------------------------------------------------------------------------------------
# Distributed: torch.distributed needs an explicit process group (gloo on the CPU, NCCL on CUDA) before any
# collective; DistributedDataParallel is a wrapper (model.module holds the weights) that broadcasts rank 0's
# parameters and buffers at construction and the buffers (BatchNorm statistics) before every forward.
def dist_init(device, limit_s):
    if not dist_ready():
        torch.distributed.init_process_group(backend="nccl" if is_cuda(device) else "gloo",
                                             timeout=datetime.timedelta(seconds=limit_s))


def dist_ready():
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def dist_barrier():
    torch.distributed.barrier()


def dist_broadcast_(t, src=0):
    torch.distributed.broadcast(t, src)
    return t


def ddp_wrap(model, device, local_rank):
    ids = [local_rank] if is_cuda(device) else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, output_device=ids[0] if ids else None)


def ddp_gpu_follows_local_rank():
    return False
