"""Per-stage timing of the training dataset, installed from outside (benchmarks/loader.py): the dataset only names
its stage methods (LoadImagesAndLabels.STAGES); the timer wraps them on one instance, so production code carries no
timing lines."""
import functools
import time


class StageTimer:
    """Accumulates seconds per stage in self.t. Time is exclusive: a stage called inside another (an image decode
    inside the mosaic) counts for itself only. clock=time.thread_time gives CPU seconds, robust when other
    processes share the cores."""

    def __init__(self, clock=time.perf_counter):
        self.t = {}
        self.now = clock
        self._inner = []  # per open stage: time spent in the stages it called

    def install(self, dataset):
        """Time dataset's stage methods from now on (this instance only); returns the dataset."""
        for method, stage in dataset.STAGES.items():
            setattr(dataset, method, self.timed(stage, getattr(dataset, method)))
        return dataset

    def timed(self, stage, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = self.now()
            self._inner.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                dt = self.now() - t0
                self.t[stage] = self.t.get(stage, 0.0) + dt - self._inner.pop()
                if self._inner:
                    self._inner[-1] += dt
        return wrapper
