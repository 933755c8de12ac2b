"""Wall-clock timing of the inference stages (pre-process, inference, NMS) for the Speed lines."""
import time

from utils.backend import wait_for_work


class Profile:
    """A context manager that adds the time of each block to .t (seconds; .dt is the last block). It waits for
    queued device work at both ends, because CUDA and OneFlow run asynchronously: without the wait the time would
    land in whichever later stage first reads a result."""

    def __init__(self, t=0.0, device=None):
        self.t, self.dt, self.device = t, 0.0, device

    def __enter__(self):
        wait_for_work(self.device)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        wait_for_work(self.device)
        self.dt = time.perf_counter() - self.start
        self.t += self.dt


def ms_per_image(profiles, n_images):
    """(pre-process, inference, NMS) milliseconds per image."""
    return tuple(p.t / max(n_images, 1) * 1e3 for p in profiles)
