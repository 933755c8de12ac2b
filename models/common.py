"""Building blocks of the YOLOv5 networks. Module and attribute names (conv, bn, act, cv1, m, ...) follow the
official ones because official state dicts are keyed by them, and the classes live in this module because official
checkpoints name them as models.common.<Class>.

Official code also imports the inference wrappers from here (``from models.common import DetectMultiBackend,
AutoShape``). They live in utils/inference/format_loader.py and utils/inference/autoshape.py, which build on the
network, so this module hands them out by name on first access (models/lazy_names.py) instead of importing them: the
network never loads the inference stack.
"""
import math

from models.lazy_names import forward_on_access
from utils.backend import BatchNorm2d, MultiheadAttention, bn_silu, conv2d, torch, nn

# name -> module that defines it, for the official `from models.common import <name>` of the inference wrappers
__getattr__ = forward_on_access(__name__, {"DetectMultiBackend": "utils.inference.format_loader",
                                           "AutoShape": "utils.inference.autoshape",
                                           "Detections": "utils.inference.autoshape"})


def autopad(k, p=None, d=1):
    """'same' padding for odd kernels, taking dilation into account."""
    if d > 1:
        k = d * (k - 1) + 1 if isinstance(k, int) else [d * (x - 1) + 1 for x in k]
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU. After fuse() the BN lives in the conv and forward skips it."""
    default_act = nn.SiLU()

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, d=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p, d), groups=g, dilation=d, bias=False)
        self.bn = BatchNorm2d(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x):
        # self.act(self.bn(self.conv(x))), the convolution's CPU weight gradient and BatchNorm+SiLU as measured fastest
        return bn_silu(self.bn, self.act, conv2d(self.conv, x))

    def forward_fuse(self, x):
        return self.act(self.conv(x))


class DWConv(Conv):
    """Depth-wise convolution (groups = gcd of channels)."""

    def __init__(self, c1, c2, k=1, s=1, d=1, act=True):
        super().__init__(c1, c2, k, s, g=math.gcd(c1, c2), d=d, act=act)


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class BottleneckCSP(nn.Module):
    """CSP bottleneck of YOLOv5 before v4.0 (kept for old configs)."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = nn.Conv2d(c1, c_, 1, 1, bias=False)
        self.cv3 = nn.Conv2d(c_, c_, 1, 1, bias=False)
        self.cv4 = Conv(2 * c_, c2, 1, 1)
        self.bn = BatchNorm2d(2 * c_)
        self.act = nn.SiLU()
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x):
        y1 = self.cv3(self.m(self.cv1(x)))
        y2 = self.cv2(x)
        return self.cv4(bn_silu(self.bn, self.act, torch.cat((y1, y2), 1)))  # self.act(self.bn(...))


class C3(nn.Module):
    """CSP bottleneck with 3 convolutions."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPP(nn.Module):
    """Spatial pyramid pooling with parallel max-pools (YOLOv3-SPP, YOLOv5 before v6.0)."""

    def __init__(self, c1, c2, k=(5, 9, 13)):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * (len(k) + 1), c2, 1, 1)
        self.m = nn.ModuleList([nn.MaxPool2d(kernel_size=x, stride=1, padding=x // 2) for x in k])

    def forward(self, x):
        x = self.cv1(x)
        return self.cv2(torch.cat([x] + [m(x) for m in self.m], 1))


class SPPF(nn.Module):
    """SPP-Fast: three chained k=5 max-pools equal SPP(k=(5, 9, 13)) at a lower cost."""

    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Focus(nn.Module):
    """Space-to-depth then Conv (YOLOv5 before v6.0; a k6 s2 Conv replaces it since)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act=act)

    def forward(self, x):
        return self.conv(torch.cat((x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]), 1))


class Concat(nn.Module):
    def __init__(self, dimension=1):
        super().__init__()
        self.d = dimension

    def forward(self, x):
        return torch.cat(x, self.d)


class DWConvTranspose2d(nn.ConvTranspose2d):
    """Depth-wise transposed convolution (groups = gcd of channels); p1 is the padding, p2 the output padding."""

    def __init__(self, c1, c2, k=1, s=1, p1=0, p2=0):
        super().__init__(c1, c2, k, s, p1, p2, groups=math.gcd(c1, c2))


class CrossConv(nn.Module):
    """A k x k convolution factored into 1 x k then k x 1 (the stride s applied along each axis in turn)."""

    def __init__(self, c1, c2, k=3, s=1, g=1, e=1.0, shortcut=False):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, (1, k), (1, s))
        self.cv2 = Conv(c_, c2, (k, 1), (s, 1), g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3x(C3):
    """C3 whose inner blocks are CrossConvs."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__(c1, c2, n, shortcut, g, e)
        c_ = int(c2 * e)
        self.m = nn.Sequential(*(CrossConv(c_, c_, 3, 1, g, 1.0, shortcut) for _ in range(n)))


class TransformerLayer(nn.Module):
    """Self-attention then a two-layer MLP, each with a residual and without LayerNorm. q/k/v get their own linear
    layers in front of the attention's input projection, as in the official layer (its state dict has both)."""

    def __init__(self, c, num_heads):
        super().__init__()
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, c, bias=False)
        self.v = nn.Linear(c, c, bias=False)
        self.ma = MultiheadAttention(embed_dim=c, num_heads=num_heads)
        self.fc1 = nn.Linear(c, c, bias=False)
        self.fc2 = nn.Linear(c, c, bias=False)

    def forward(self, x):  # x: (sequence, batch, channels)
        x = x + self.ma(self.q(x), self.k(x), self.v(x))[0]
        return x + self.fc2(self.fc1(x))


class TransformerBlock(nn.Module):
    """Vision-transformer block over the pixels of a feature map: an optional Conv to c2 channels, a learned
    position term (a Linear of the features themselves, added to them), then num_layers TransformerLayers."""

    def __init__(self, c1, c2, num_heads, num_layers):
        super().__init__()
        self.conv = Conv(c1, c2) if c1 != c2 else None
        self.linear = nn.Linear(c2, c2)
        self.tr = nn.Sequential(*(TransformerLayer(c2, num_heads) for _ in range(num_layers)))
        self.c2 = c2

    def forward(self, x):
        if self.conv is not None:
            x = self.conv(x)
        b, _, h, w = x.shape
        seq = x.flatten(2).permute(2, 0, 1)  # (h*w, batch, channels): one token per pixel
        seq = self.tr(seq + self.linear(seq))
        return seq.permute(1, 2, 0).reshape(b, self.c2, h, w)


class C3TR(C3):
    """C3 whose inner blocks are one TransformerBlock (4 heads, n layers)."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__(c1, c2, n, shortcut, g, e)
        c_ = int(c2 * e)
        self.m = TransformerBlock(c_, c_, 4, n)


class C3SPP(C3):
    """C3 with an SPP block in place of the bottlenecks."""

    def __init__(self, c1, c2, k=(5, 9, 13), n=1, shortcut=True, g=1, e=0.5):
        super().__init__(c1, c2, n, shortcut, g, e)
        c_ = int(c2 * e)
        self.m = SPP(c_, c_, k)


class GhostConv(nn.Module):
    """Ghost convolution (GhostNet, arXiv:1911.11907): half the output channels from a Conv, the other half from a
    cheap depth-wise 5x5 Conv of that half."""

    def __init__(self, c1, c2, k=1, s=1, g=1, act=True):
        super().__init__()
        c_ = c2 // 2
        self.cv1 = Conv(c1, c_, k, s, None, g, act=act)
        self.cv2 = Conv(c_, c_, 5, 1, None, c_, act=act)

    def forward(self, x):
        y = self.cv1(x)
        return torch.cat((y, self.cv2(y)), 1)


class GhostBottleneck(nn.Module):
    """GhostNet bottleneck: GhostConv, a depth-wise Conv when striding, a linear GhostConv; plus a shortcut that
    is the identity at stride 1 and a depth-wise + point-wise Conv at stride 2."""

    def __init__(self, c1, c2, k=3, s=1):
        super().__init__()
        c_ = c2 // 2
        self.conv = nn.Sequential(GhostConv(c1, c_, 1, 1),
                                  DWConv(c_, c_, k, s, act=False) if s == 2 else nn.Identity(),
                                  GhostConv(c_, c2, 1, 1, act=False))
        self.shortcut = (nn.Sequential(DWConv(c1, c1, k, s, act=False), Conv(c1, c2, 1, 1, act=False)) if s == 2
                         else nn.Identity())

    def forward(self, x):
        return self.conv(x) + self.shortcut(x)


class C3Ghost(C3):
    """C3 whose inner blocks are GhostBottlenecks."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__(c1, c2, n, shortcut, g, e)
        c_ = int(c2 * e)
        self.m = nn.Sequential(*(GhostBottleneck(c_, c_) for _ in range(n)))


class Contract(nn.Module):
    """Space to depth: (b, c, h, w) -> (b, c*g*g, h/g, w/g); output channel (i*g + j)*c + k holds channel k at
    row offset i and column offset j."""

    def __init__(self, gain=2):
        super().__init__()
        self.gain = gain

    def forward(self, x):
        b, c, h, w = x.shape
        g = self.gain
        x = x.view(b, c, h // g, g, w // g, g).permute(0, 3, 5, 1, 2, 4).contiguous()
        return x.view(b, c * g * g, h // g, w // g)


class Expand(nn.Module):
    """Depth to space, the inverse of Contract: (b, c, h, w) -> (b, c/(g*g), h*g, w*g)."""

    def __init__(self, gain=2):
        super().__init__()
        self.gain = gain

    def forward(self, x):
        b, c, h, w = x.shape
        g = self.gain
        x = x.view(b, g, g, c // g ** 2, h, w).permute(0, 3, 4, 1, 5, 2).contiguous()
        return x.view(b, c // g ** 2, h * g, w * g)


class Proto(nn.Module):
    """The prototype branch: 3x3 conv, 2x nearest upsample, 3x3 conv, 1x1 conv to c2 masks (1/4 of the input for a
    P3 input)."""

    def __init__(self, c1, c_=256, c2=32):
        super().__init__()
        self.cv1 = Conv(c1, c_, k=3)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.cv2 = Conv(c_, c_, k=3)
        self.cv3 = Conv(c_, c2)

    def forward(self, x):
        return self.cv3(self.cv2(self.upsample(self.cv1(x))))


class Classify(nn.Module):
    """Classification head: conv to 1280 channels (EfficientNet-B0's width), global average pool, dropout, linear."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, dropout_p=0.0):
        super().__init__()
        c_ = 1280
        self.conv = Conv(c1, c_, k, s, autopad(k, p), g)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(p=dropout_p, inplace=True)
        self.linear = nn.Linear(c_, c2)

    def forward(self, x):
        if isinstance(x, list):
            x = torch.cat(x, 1)
        return self.linear(self.drop(self.pool(self.conv(x)).flatten(1)))
