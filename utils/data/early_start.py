"""A loader whose next pass can begin before the caller asks for it.

Loader workers start (fork) and load their first batches only when a pass is iterated: at the first training step
and at each validation. On a small machine the training run's set-up (AutoAnchor, checkpoints, the plots) and the
training epoch before a validation leave a core idle, so start() begins the pass then: its iterator is created at
once, the workers load the first prefetch_factor batches each, and the next iter() hands that pass out instead of a
new one (a new iter() of a DataLoader with persistent workers would discard what they loaded). The official trainer
gets the same effect from its endless loader, whose workers never stop loading.
Only start() a pass whose order is settled: the training sampler's epoch set, image weights drawn.
"""


class EarlyStartLoader:
    """Wraps a DataLoader; everything but iteration goes to it (len, sampler, dataset, num_workers, ...)."""

    def __init__(self, loader):
        self.loader = loader
        self._started = None

    def start(self):
        """Begin the next pass now (no-op when one is started already)."""
        if self._started is None:
            self._started = iter(self.loader)

    @property
    def started(self):
        return self._started is not None

    def __iter__(self):
        it, self._started = self._started, None
        return it if it is not None else iter(self.loader)

    def close(self):
        """End the worker processes now: those of a pass begun and not taken, and those a loader with persistent
        workers keeps between passes. Left to the garbage collector, the DataLoader ends them whenever a collection
        reaches the loader, which in a process that goes on (--evolve's next generation, a test) can be in the
        middle of an import: seen there, no worker stopped when told to and every join waited out its 5 s (40 s
        after two --evolve generations with 2 + 2 workers each). No-op without workers; the next iter() starts new
        ones."""
        started, self._started = self._started, None
        kept = getattr(self.loader, "_iterator", None)  # DataLoader keeps its persistent workers' iterator there
        for iterator in (started, kept):  # the same one with persistent workers: a second shutdown is a no-op
            shut_down = getattr(iterator, "_shutdown_workers", None)
            if shut_down is not None:
                shut_down()
        if kept is not None:
            self.loader._iterator = None

    def __len__(self):
        return len(self.loader)

    def __getattr__(self, name):
        if name == "loader":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)
