"""utils/data/early_start.py: a pass started ahead loads while the caller works, then is the next pass handed out,
with the same batches a fresh pass would give; later passes are ordinary ones."""
import time

from utils.backend import torch
from utils.data import EarlyStartLoader


class SlowItems(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        time.sleep(0.1)  # loading an image
        return torch.tensor([i])


def _loader():
    return torch.utils.data.DataLoader(SlowItems(), batch_size=2, num_workers=2, persistent_workers=True)


def test_started_pass_is_loaded_meanwhile_and_equals_a_fresh_pass():
    fresh = [b.tolist() for b in _loader()]
    loader = EarlyStartLoader(_loader())
    assert len(loader) == 4 and loader.batch_size == 2 and not loader.started  # the DataLoader's attributes
    loader.start()
    assert loader.started
    time.sleep(1.5)  # the caller's other work: the workers fill their prefetch queue meanwhile
    t0 = time.perf_counter()
    it = iter(loader)
    first = next(it)
    waited = time.perf_counter() - t0
    assert waited < 0.1, waited  # a fresh pass would wait at least two item loads (0.2 s) for its first batch
    assert [first.tolist()] + [b.tolist() for b in it] == fresh
    assert not loader.started and [b.tolist() for b in loader] == fresh  # the next pass: an ordinary one
