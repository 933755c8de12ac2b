"""Horizontally fused (multi-tensor) EMA and optimizer updates: --multi_tensor_optimizer.

The EMA update touches every floating tensor of the model (~350 for yolov5s); as a Python loop that is two small
kernels per tensor, and on a GPU the launches, not the arithmetic, set the time (the seed measured 7.4 ms per
step, 0.13 ms fused). One fused launch over all tensors removes that:

* OneFlow + CUDA fp32: ``flow._C.multi_tensor_yolov5_weight_update(ema, model, d)`` (ema = d * ema + (1 - d) * model).
* PyTorch, any device: ``torch._foreach_mul_`` + ``torch._foreach_add_`` (one launch per chunk of tensors on CUDA;
  on the CPU it is the same per-tensor arithmetic, so it is exactly equal to the loop).
* otherwise: the per-tensor loop, as the official trainer does it.

Gradient clipping (``clip_grad_norm_``) takes the same route: one multi-tensor norm and one multi-tensor scale
instead of a norm and a multiply per gradient.

utils/torch_utils.py (ModelEMA, smart_optimizer) calls ``ema_update_`` and ``optimizer_kwargs``; the trainer calls
``clip_grad_norm_``.
"""
import inspect

from utils.backend import (IS_ONEFLOW, IS_TORCH, has_foreach, has_multi_tensor_ema, is_cuda, multi_tensor_mul_,
                           multi_tensor_norms, torch)

__all__ = ["ema_update_", "ema_impl", "optimizer_kwargs", "optimizer_impl", "clip_grad_norm_"]


def ema_impl(ema_tensors, fused):
    """Which implementation ema_update_ uses: 'oneflow-multi-tensor', 'foreach' or 'loop'."""
    if not fused or not ema_tensors:
        return "loop"
    if IS_ONEFLOW:
        dev = ema_tensors[0].device
        ok = has_multi_tensor_ema(dev) and all(t.dtype == torch.float32 and t.device == dev for t in ema_tensors)
        return "oneflow-multi-tensor" if ok else "loop"
    return "foreach" if has_foreach() else "loop"


def ema_update_(ema_tensors, model_tensors, d, fused):
    """In place: ema = d * ema + (1 - d) * model for each pair. Call under no_grad. ``fused`` is the flag."""
    if len(ema_tensors) != len(model_tensors):
        raise ValueError(f"EMA has {len(ema_tensors)} floating tensors, the model {len(model_tensors)}")
    model_tensors = [m.detach() for m in model_tensors]  # OneFlow's state_dict() values are not detached
    impl = ema_impl(ema_tensors, fused)
    if impl == "oneflow-multi-tensor":
        if any(m.dtype != torch.float32 for m in model_tensors):
            model_tensors = [m.float() for m in model_tensors]
        torch._C.multi_tensor_yolov5_weight_update(ema_tensors, model_tensors, float(d))
    elif impl == "foreach":
        if any(e.dtype != m.dtype for e, m in zip(ema_tensors, model_tensors)):
            model_tensors = [m.to(e.dtype) for e, m in zip(ema_tensors, model_tensors)]
        torch._foreach_mul_(ema_tensors, d)
        torch._foreach_add_(ema_tensors, model_tensors, alpha=1 - d)
    else:
        for e, m in zip(ema_tensors, model_tensors):
            e.mul_(d).add_(m.to(e.dtype), alpha=1 - d)


def _accepts(cls, arg):
    try:
        return arg in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def optimizer_kwargs(name, fused, device):
    """Constructor arguments that make optimizer ``name`` (SGD, Adam, AdamW) step all tensors at once.

    fused=False returns {}: the framework's default step, exactly what the official trainer gets.
    PyTorch: fused=True (one kernel for every tensor) on CUDA when the build has it, else foreach=True (the loop's
    arithmetic, batched).
    OneFlow: fused=True on CUDA (multi_tensor_sgd/momentum/adam_update); on the CPU OneFlow has no fused kernel and
    would only warn, so {}. Pass all parameter groups to the constructor: OneFlow's fused SGD crashes on groups
    added later with add_param_group.
    """
    if not fused:
        return {}
    cls = getattr(torch.optim, name, None)
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}: use SGD, Adam or AdamW")
    cuda = is_cuda(device)
    if IS_ONEFLOW:
        return {"fused": True} if cuda and _accepts(cls, "fused") else {}
    # CPU: foreach, not fused. PyTorch >= 2.4 has CPU fused kernels (SGD step yolov5n 12 -> 3 ms, yolov5s 38 -> 11 ms
    # here), but they round differently from the loop, and max-pool/clamp gradient switches turn that into visible
    # loss differences within 20 iterations. foreach is the loop's arithmetic bit for bit (on the CPU it is ~1.4x
    # slower than the loop, but the step runs once per `accumulate` batches: < 0.5% of a step).
    if cuda and _accepts(cls, "fused") and _torch_fused_works(cls, device):
        return {"fused": True}
    if _accepts(cls, "foreach"):
        return {"foreach": True}
    return {}


_FUSED_PROBED = {}


def _torch_fused_works(cls, device):
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


def _group_get(group, key):
    try:  # PyTorch groups are dicts; OneFlow's ParamGroup has __getitem__ only
        return group[key]
    except (KeyError, AttributeError, TypeError):
        return None


def optimizer_impl(optimizer):
    """'fused', 'foreach' or 'loop': how this optimizer steps (for logs and the benchmark)."""
    if not optimizer.param_groups:
        return "loop"
    g = optimizer.param_groups[0]
    if _group_get(g, "fused"):
        return "fused"
    foreach = _group_get(g, "foreach")
    params = _group_get(g, "params") or []
    # PyTorch picks foreach by itself (foreach=None) when the tensors are on CUDA
    if foreach or (IS_TORCH and foreach is None and len(params) and is_cuda(params[0])):
        return "foreach"
    return "loop"


def clip_grad_norm_(parameters, max_norm, fused):
    """Scale the gradients in place so that their joint L2 norm is at most ``max_norm``; returns the norm (a 0-d
    tensor, left on the device: reading it would be a host sync).

    fused: the --multi_tensor_optimizer flag. On, where the framework has multi-tensor ops (PyTorch), it is eight
    launches for any number of tensors: the per-tensor norms as one op, their norm, the clamped factor, one
    multi-tensor multiply. The arithmetic is torch.nn.utils.clip_grad_norm_'s (same values to the bit); off, or on
    OneFlow, that framework function runs itself.
    """
    params = [p for p in parameters if p.grad is not None]
    grads = [p.grad.detach() for p in params]
    norms = multi_tensor_norms(grads) if fused and grads else None
    if norms is None:
        return torch.nn.utils.clip_grad_norm_(params, max_norm=max_norm)
    total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    factor = (max_norm / (total + 1e-6)).clamp(max=1.0)
    multi_tensor_mul_(grads, factor)
    return total
