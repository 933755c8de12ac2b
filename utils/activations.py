"""Activation modules under ultralytics' import path (`from utils.activations import SiLU, Hardswish, ...`), for users'
models and scripts. The project's own blocks use the framework's nn.SiLU; nothing in the project imports this file.

Formulas: SiLU x*sigmoid(x); Hardswish x*relu6(x+3)/6; Mish x*tanh(softplus(x)); FReLU max(x, BN(depthwise conv x))
(arXiv 2007.11824); ACON (arXiv 2009.04759): (p1-p2)x * sigmoid(beta (p1-p2)x) + p2 x, beta learned per channel
(AconC) or made from the input's channel means by two 1x1 convolutions (MetaAconC)."""
from utils.backend import nn, torch


class SiLU(nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)


class Hardswish(nn.Module):
    @staticmethod
    def forward(x):
        return x * nn.functional.hardtanh(x + 3, 0.0, 6.0) / 6.0  # hardtanh form: exports to every format


class Mish(nn.Module):
    @staticmethod
    def forward(x):
        return x * nn.functional.softplus(x).tanh()


class MemoryEfficientMish(Mish):
    """Mish by name: the official class saves memory with a hand-written backward; here autograd's own backward of the
    same formula (the same values and gradients)."""


class FReLU(nn.Module):
    def __init__(self, c1, k=3):
        super().__init__()
        self.conv = nn.Conv2d(c1, c1, k, 1, 1, groups=c1, bias=False)
        self.bn = nn.BatchNorm2d(c1)

    def forward(self, x):
        return torch.max(x, self.bn(self.conv(x)))


def _acon(x, p1, p2, beta):
    dpx = (p1 - p2) * x
    return dpx * torch.sigmoid(beta * dpx) + p2 * x


class AconC(nn.Module):
    def __init__(self, c1):
        super().__init__()
        self.p1 = nn.Parameter(torch.randn(1, c1, 1, 1))
        self.p2 = nn.Parameter(torch.randn(1, c1, 1, 1))
        self.beta = nn.Parameter(torch.ones(1, c1, 1, 1))

    def forward(self, x):
        return _acon(x, self.p1, self.p2, self.beta)


class MetaAconC(nn.Module):
    def __init__(self, c1, k=1, s=1, r=16):
        super().__init__()
        c2 = max(r, c1 // r)
        self.p1 = nn.Parameter(torch.randn(1, c1, 1, 1))
        self.p2 = nn.Parameter(torch.randn(1, c1, 1, 1))
        self.fc1 = nn.Conv2d(c1, c2, k, s, bias=True)
        self.fc2 = nn.Conv2d(c2, c1, k, s, bias=True)

    def forward(self, x):
        y = x.mean(dim=2, keepdim=True).mean(dim=3, keepdim=True)
        beta = torch.sigmoid(self.fc2(self.fc1(y)))  # no BatchNorm: a batch of one would make it unstable
        return _acon(x, self.p1, self.p2, beta)
