"""utils.backend.head_reads: the loss's reads of a level map (objectness logits, rows at candidate cells) give the
values and the map gradient that plain indexing of the map's fp32 copy gives, to the bit, in the trainer's
deterministic mode (PyTorch: torch_head_reads.py writes the gradient itself; OneFlow runs the plain indexing)."""
import pytest

from tests.test_backend.test_deterministic_fill import deterministic_mode
from utils.backend import IS_TORCH, head_reads, torch

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="the PyTorch backward (OneFlow's head_reads is the plain form)")


def plain(pi, idx):
    pf = pi.float()
    return pf[..., 4], pf.reshape(-1, pf.shape[-1]).index_select(0, idx)


def _case(dtype, n_idx, seed=0):
    g = torch.Generator().manual_seed(seed)
    pi = torch.randn(2, 3, 5, 4, 9, generator=g).to(dtype)
    # repeated cells (several candidates of one cell), cell 0 over and over (invalid candidates read it)
    idx = torch.cat([torch.randint(0, 120, (n_idx,), generator=g), torch.zeros(3, dtype=torch.long),
                     torch.full((2,), 7)])[:n_idx]
    w_obj = torch.randn(2, 3, 5, 4, generator=g)
    w_rows = torch.randn(max(n_idx, 0), 9, generator=g)
    return pi, idx, w_obj, w_rows


def _run(reads, pi, idx, w_obj, w_rows, use_obj=True, use_rows=True):
    x = pi.clone().requires_grad_()
    obj, rows = reads(x, idx)
    loss = 0.0
    if use_obj:
        loss = loss + (obj * w_obj).sum()
    if use_rows:
        loss = loss + (rows * w_rows).sum()
    loss.backward()
    return obj.detach(), rows.detach(), x.grad


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("n_idx", [60, 1, 0])
@pytest.mark.parametrize("used", ["both", "obj", "rows"])
def test_values_and_gradient_equal_plain_indexing(dtype, n_idx, used):
    if used == "rows" and n_idx == 0:
        pytest.skip("nothing reads the map")
    pi, idx, w_obj, w_rows = _case(getattr(torch, dtype), n_idx)
    kw = {"use_obj": used != "rows", "use_rows": used != "obj"}
    with deterministic_mode(fill=False):
        ref = _run(plain, pi, idx, w_obj, w_rows, **kw)
        got = _run(head_reads, pi, idx, w_obj, w_rows, **kw)
    assert got[0].dtype == got[1].dtype == torch.float32 and got[2].dtype == pi.dtype
    for a, b in zip(ref, got):
        assert a.shape == b.shape
        assert torch.equal(a, b)


def test_repeated_cells_sum_in_fp32_before_rounding():
    """Many candidates of one bf16 cell: their gradients are summed in fp32, then rounded once (summing in bf16
    would lose the small ones)."""
    pi = torch.zeros(1, 1, 1, 2, 6, dtype=torch.bfloat16)
    idx = torch.tensor([1] * 300)
    x = pi.clone().requires_grad_()
    _, rows = head_reads(x, idx)
    (rows * 1e-3).sum().backward()
    assert x.grad[0, 0, 0, 1, 0].float().item() == pytest.approx(0.3, rel=1e-2)
    assert x.grad[0, 0, 0, 0].abs().sum() == 0
