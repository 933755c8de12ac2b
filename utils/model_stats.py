"""Model summary (layers, parameters, gradients, GFLOPs) and conv+BN fusion.

GFLOPs are counted here, with forward hooks, the way ultralytics counts them through thop: multiply-accumulates of
each convolution (output elements x input channels per group x kernel area; biases are not counted), 4 operations
per element for each affine BatchNorm, input features x output elements for each Linear, projections, products and
softmax for attention, nothing for activations, pooling, padding or nearest upsampling; the total is doubled
(MACs -> FLOPs) and measured on small inputs, then extrapolated to the image size (see count_flops).
"""
import copy
from pathlib import Path

from utils.backend import MultiheadAttention, nn, torch


def _conv_macs(m, inputs, output):
    k = m.weight.shape  # k[1] is already in_channels // groups; biases are not counted (as thop)
    return output.numel() * k[1] * k[2] * k[3]


def _conv_transpose_macs(m, inputs, output):
    k = m.weight.shape  # (in, out // groups, kh, kw): every input element meets out/groups x kernel-area weights
    return inputs[0].numel() * k[1] * k[2] * k[3]


def _bn_ops(m, inputs, output):
    return inputs[0].numel() * (4 if m.affine else 2)


def _linear_macs(m, inputs, output):
    return output.numel() * m.in_features


def _attention_ops(m, inputs, output):
    """Sequence-first self/cross attention: the q/k/v and output projections, the two attention products and the
    softmax (exp, add, divide per score), as thop counts nn.MultiheadAttention."""
    out = output[0] if isinstance(output, tuple) else output
    tgt, n, e = out.shape
    src = inputs[1].shape[0]
    projections = e * (2 * tgt * e + src * (m.kdim + m.vdim))
    products = 2 * tgt * src * e
    softmax = n * m.num_heads * tgt * (3 * src - 1)
    return n * (projections + products) + softmax


def _counted_ops(model, ch, h, w, p):
    """Operations of one forward pass of a (1, ch, h, w) zero image, from forward hooks on the counted layers."""
    total = [0]
    hooks = []
    # ConvTranspose2d before Conv2d, so a framework where one subclasses the other still picks the right rule
    counters = {nn.ConvTranspose2d: _conv_transpose_macs, nn.Conv2d: _conv_macs, nn.BatchNorm2d: _bn_ops,
                nn.Linear: _linear_macs, MultiheadAttention: _attention_ops}

    def hook(mod, inputs, output):
        total[0] += next(f for c, f in counters.items() if isinstance(mod, c))(mod, inputs, output)

    for m in model.modules():
        if isinstance(m, tuple(counters)):  # isinstance: OneFlow's BatchNorm2d is a subclass (utils/backend/)
            handle = m.register_forward_hook(hook)
            hooks.append((m, handle))
    was_training = model.training
    try:
        model.eval()  # eval: BatchNorm running statistics must not move
        with torch.no_grad():
            model(torch.zeros(1, ch, h, w, dtype=p.dtype, device=p.device))
    finally:
        model.train(was_training)
        for m, handle in hooks:
            if handle is not None:
                handle.remove()
            else:  # OneFlow 0.9.0 returns no handle: its hooks sit in a plain list on the module
                m._forward_hooks.clear() if isinstance(m._forward_hooks, dict) else m._forward_hooks.remove(hook)
    return total[0]


def gflops_on(module, shape):
    """GFLOPs of one forward of module (any layer or block) on an input of shape (n, c, h, w), counted as count_flops
    counts them; 0.0 for a module without parameters (an activation, a concat)."""
    p = next(module.parameters(), None)
    if p is None:
        return 0.0
    n, c, h, w = shape
    return _counted_ops(module, c, h, w, p) * 2 / 1e9 * n


def count_flops(model, img_size=640):
    """GFLOPs of one forward pass at img_size (int or (h, w)), or None when the model cannot be run.

    Convolutions cost in proportion to the number of pixels, so one stride-sized image, scaled up, gives the
    count. Attention costs grow with the square of the number of tokens: for a model with attention, images one
    stride tall and 1, 2 and 3 strides wide give a quadratic in the number of stride cells, evaluated at the
    target's cell count (exact, and what ultralytics' thop does)."""
    stride = 32
    if hasattr(model, "stride") and model.stride is not None:
        stride = max(int(model.stride.max()), 32)
    ch = model.yaml.get("ch", 3) if hasattr(model, "yaml") else 3
    p = next(model.parameters())
    h, w = (img_size, img_size) if isinstance(img_size, int) else img_size
    cells = (h / stride) * (w / stride)
    if not any(isinstance(m, MultiheadAttention) for m in model.modules()):
        return _counted_ops(model, ch, stride, stride, p) * 2 / 1e9 * cells
    f1, f2, f3 = (_counted_ops(model, ch, stride, k * stride, p) for k in (1, 2, 3))
    t = cells - 1  # Newton forward differences from one cell
    return (f1 + t * (f2 - f1) + t * (t - 1) / 2 * (f3 - 2 * f2 + f1)) * 2 / 1e9


def model_summary(model, img_size=640, verbose=False):
    """'YOLOv5s summary: 214 layers, 7235389 parameters, 7235389 gradients, 16.6 GFLOPs' as ultralytics prints it."""
    n_p = sum(p.numel() for p in model.parameters())
    n_g = sum(p.numel() for p in model.parameters() if p.requires_grad)
    lines = []
    if verbose:
        lines.append(f"{'layer':>5} {'name':>40} {'gradient':>9} {'parameters':>12} {'shape':>20}")
        for i, (name, p) in enumerate(model.named_parameters()):
            lines.append(f"{i:5g} {name:>40} {str(p.requires_grad):>9} {p.numel():12g} {str(list(p.shape)):>20}")
    try:
        flops = count_flops(model, img_size)
        fs = f", {flops:.1f} GFLOPs"
    except Exception:  # a model that cannot run at a stride-sized input still gets its counts
        fs = ""
    yaml_file = getattr(model, "yaml_file", "") or ""
    name = Path(yaml_file).stem.replace("yolov5", "YOLOv5") if yaml_file else "Model"
    lines.append(f"{name} summary: {len(list(model.modules()))} layers, {n_p} parameters, {n_g} gradients{fs}")
    return "\n".join(lines)


def fuse_conv_and_bn(conv, bn):
    """A Conv2d with bias equal to conv followed by bn in eval mode: w' = w*g/s, b' = beta + (b - mean)*g/s.
    The new conv is a copy of conv given the new weight and bias, not a freshly built one, whose random initial
    weights would be drawn only to be overwritten (fusing yolov5-p7, 144 M parameters: 0.91 -> 0.36 s under
    PyTorch)."""
    fused = copy.deepcopy(conv).requires_grad_(False)
    with torch.no_grad():
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        w = conv.weight.view(conv.out_channels, -1) * scale.view(-1, 1)
        b = conv.bias if conv.bias is not None else torch.zeros(conv.out_channels, device=conv.weight.device)
        fused.weight = nn.Parameter(w.view(conv.weight.shape).contiguous(), requires_grad=False)
        fused.bias = nn.Parameter(bn.bias + (b - bn.running_mean) * scale, requires_grad=False)
    return fused
