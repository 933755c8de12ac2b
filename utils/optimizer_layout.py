"""Optimizer state layouts: PyTorch's (what official checkpoints hold) and OneFlow 0.9's, and the translations
between them. Plain data in, plain data out, no import of the project or a framework: the backends translate with
it (backend.optimizer_state_to_native) and the checkpoint package writes files in PyTorch's layout with it.

PyTorch: state {i: {'momentum_buffer'|'exp_avg','exp_avg_sq','step'}}, groups with flat hyperparameters.
OneFlow 0.9: state {'step': n, i: {'momentum_buf'|'exp_avg','exp_avg_sq'}}, groups {'_options': {...},
'_enable_clip_grad': False, 'params': [...]}. Each translation keeps unknown keys and returns a state already in its
target layout unchanged.
"""
import numpy as np


def _is_oneflow_layout(state_dict):
    return any("_options" in g for g in state_dict.get("param_groups", []))


def to_oneflow_layout(state_dict):
    """PyTorch's layout -> OneFlow's (a OneFlow state is returned as is)."""
    if _is_oneflow_layout(state_dict):
        return state_dict
    state, groups = state_dict.get("state", {}), state_dict.get("param_groups", [])
    new_state, step = {}, None
    for i, s in state.items():
        s = dict(s)
        if "step" in s:
            st = s.pop("step")
            step = int(float(st.item() if hasattr(st, "item") else st))
        if "momentum_buffer" in s:
            s["momentum_buf"] = s.pop("momentum_buffer")
        new_state[i] = s
    new_state["step"] = step or 0  # OneFlow's step() increments it; torch's SGD keeps no count (not used by SGD)
    new_groups = []
    for g in groups:
        opts = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in g.items() if k != "params" and
                k not in ("foreach", "differentiable", "capturable", "fused", "decoupled_weight_decay")}
        opts["fused"] = False
        if "betas" in opts and step:  # OneFlow keeps Adam's bias corrections in the group
            b1, b2 = opts["betas"]
            opts.update(bias_correction1=1 - b1 ** step, bias_correction2=1 - b2 ** step,
                        do_bias_correction=True)
        new_groups.append({"_options": opts, "_enable_clip_grad": False, "params": list(g["params"])})
    return {"state": new_state, "param_groups": new_groups}


def to_torch_layout(state_dict, make_step):
    """OneFlow's layout -> PyTorch's (a PyTorch state is returned as is). Adam's step counter becomes
    make_step(float), a tensor of the framework this process runs, as torch keeps it."""
    if not _is_oneflow_layout(state_dict):
        return state_dict
    state, groups = state_dict.get("state", {}), state_dict.get("param_groups", [])
    step = state.get("step")
    new_state = {}
    for i, s in state.items():
        if i == "step":
            continue
        s = dict(s)
        if "momentum_buf" in s:
            s["momentum_buffer"] = s.pop("momentum_buf")
        if ("exp_avg" in s or "square_avg" in s) and step is not None:  # Adam(W), RMSprop: torch keeps a count
            s["step"] = make_step(float(step))
        new_state[i] = s
    new_groups = []
    for g in groups:
        defaults = _ADAM_DEFAULTS if "betas" in g.get("_options", {}) else _SGD_DEFAULTS
        opts = {k: _torch_typed(k, v, defaults) for k, v in g.get("_options", {}).items()
                if k not in ("bias_correction1", "bias_correction2", "do_bias_correction", "fused")}
        new_groups.append({**opts, "params": list(g["params"])})
    return complete_torch_groups({"state": new_state, "param_groups": new_groups})


# The hyperparameters torch 2.x keeps in every group of each optimizer the trainer builds, with torch's defaults.
# A group written from OneFlow's layout lacks torch-only flags (foreach, differentiable...): official code reading
# the file gets them as torch.optim.SGD/Adam(W) would have set them.
_SGD_DEFAULTS = {"lr": 0.01, "momentum": 0, "dampening": 0, "weight_decay": 0, "nesterov": False, "maximize": False,
                 "foreach": None, "differentiable": False, "fused": None}
_ADAM_DEFAULTS = {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0, "amsgrad": False,
                  "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": None}
# (AdamW vs Adam: torch's AdamW sets decoupled_weight_decay itself when it loads a state, Adam defaults it to False)


def _torch_typed(k, v, defaults):
    """OneFlow fills dampening from its own default 0.0 where torch keeps its default 0: written as torch's, so
    both backends write the same file (values the caller gave, like weight_decay=0.0, stay as given)."""
    if k == "dampening" and type(v) is float and v == defaults.get(k):
        return defaults[k]
    return v


def complete_torch_groups(state_dict):
    """A torch-layout optimizer state whose groups hold every key torch's SGD/Adam/AdamW group holds, in torch's
    order, with numpy scalars (warmup's np.interp) as Python floats."""
    groups = []
    for g in state_dict.get("param_groups", []):
        defaults = _ADAM_DEFAULTS if "betas" in g else _SGD_DEFAULTS
        new = {k: g.get(k, v) for k, v in defaults.items()}
        new.update((k, v) for k, v in g.items() if k not in new)
        new = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in new.items()}
        new["params"] = list(new.pop("params", []))
        groups.append(new)
    return {"state": state_dict.get("state", {}), "param_groups": groups}
