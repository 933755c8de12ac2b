"""benchmarks/loss_reads.py: both formulations give the same loss and map gradients, the loss's reads are restored
afterwards, and the benchmark writes its figures (a small batch; PyTorch)."""
import json

import pytest

from utils.backend import IS_TORCH

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="PyTorch's head_reads against plain indexing")


def test_benchmark_writes_equal_figures_and_restores_the_loss(tmp_path):
    import utils.loss as loss_module
    from benchmarks import loss_reads
    from tests.test_backend.test_deterministic_fill import deterministic_mode
    from utils.backend import head_reads
    out = tmp_path / "reads.json"
    # main() sets deterministic mode for its process: put back for the tests after this one (conftest puts back the
    # project logger's level, which main() also sets)
    with deterministic_mode(fill=True):
        rows = loss_reads.main(loss_reads.parse_opt(["--configs", "n320", "--batch", "2", "--reps", "1",
                                                     "--json", str(out)]))
    assert loss_module.head_reads is head_reads  # the loss reads through the backend again
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "loss_reads" and doc["rows"] == rows
    (row,) = rows
    assert row["bit_equal"] is True and row["dtype"] == "bfloat16"
    assert row["levels"] == [[2, 3, 40, 40, 85], [2, 3, 20, 20, 85], [2, 3, 10, 10, 85]]
    assert row["ms"]["plain"] > 0 and row["ms"]["head_reads"] > 0
