"""Which dataset positions each process loads, in which order, with which random seeds."""
import math
import random

import numpy as np

from utils.backend import torch
from utils.child_processes import end_with_parent
from utils.distributed import DistContext


def rank_share(n, world_size, rank, seed=0, batch_size=None):
    """The dataset positions rank `rank` trains on, fixed for the whole run (so --cache holds only them and mosaic
    partners come from them, as ultralytics' SmartDistributedSampler does). Shares are disjoint and cover all n.
    With batch_size (ordered data, e.g. --rect) each rank takes whole consecutive batches, round robin, so that
    every batch it collates shares one letterbox shape; otherwise a seeded random split."""
    if world_size <= 1:
        return np.arange(n)
    if batch_size:
        group = np.arange(n) // batch_size
        return np.flatnonzero(group % world_size == rank)
    return np.flatnonzero(np.random.RandomState(seed).permutation(n) % world_size == rank)


class YoloSampler(torch.utils.data.Sampler):
    """Dataset positions for one rank, reshuffled every epoch. One process: all positions, mapped through
    dataset.indices (image weights) here, in the main process, so persistent workers never use stale ones.
    DDP: the rank's fixed share (rank_share), shuffled within, padded to the same length on every rank. The
    order depends on (seed, epoch) only; set_epoch(e) sets the epoch, and without it the epoch advances on
    every pass."""

    def __init__(self, dataset, shuffle=True, seed=0, rank=0, world_size=1, batch_size=None):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.epoch = 0
        self._epoch_set = False
        n = len(dataset)
        self.share = rank_share(n, self.world_size, self.rank, self.seed, None if shuffle else batch_size)
        self.num_samples = math.ceil(n / self.world_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)
        self._epoch_set = True

    def __iter__(self):
        if self.world_size > 1:
            pool = self.share
        else:
            pool = np.asarray(getattr(self.dataset, "indices", np.arange(len(self.dataset))))
        order = np.random.default_rng((self.seed, self.epoch)).permutation(len(pool)) if self.shuffle \
            else np.arange(len(pool))
        out = [int(pool[j]) for j in order]
        if out and len(out) < self.num_samples:  # equal length on every rank: repeat the end (same batch shape)
            out += [out[-1]] * (self.num_samples - len(out)) if not self.shuffle else \
                (out * math.ceil(self.num_samples / len(out)))[:self.num_samples - len(out)]
        if not self._epoch_set:
            self.epoch += 1
        self._epoch_set = False
        return iter(out)

    def __len__(self):
        return self.num_samples


class SmartDistributedSampler(YoloSampler):
    """Official's DDP sampler, by its constructor (DistributedSampler's): each rank a fixed share of the dataset,
    shuffled per (seed, epoch), every rank the same length (drop_last: cut to the shortest share instead of padded).
    num_replicas, rank: default the launcher's (WORLD_SIZE, RANK), as DistributedSampler takes the process group's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        env = DistContext.from_env()
        world = env.world_size if num_replicas is None else int(num_replicas)
        super().__init__(dataset, shuffle=shuffle, seed=seed, rank=env.rank if rank is None else rank,
                         world_size=world)
        self.drop_last = bool(drop_last)
        if self.drop_last:
            self.num_samples = len(dataset) // max(world, 1)

    def __iter__(self):
        return iter(list(super().__iter__())[:self.num_samples])


class SeedWorker:
    """worker_init_fn: seeds python's and numpy's RNG of each worker from (seed, rank, worker id), so runs with the
    same --seed draw the same augmentations. It must not call into OpenCV's thread pool: see make_loader."""

    def __init__(self, seed, rank):
        self.seed, self.rank = int(seed), int(rank)

    def __call__(self, worker_id):
        end_with_parent()  # a worker outlives a SIGKILLed trainer for good when blocked in a read (a FIFO, a share)
        s = int(np.random.SeedSequence([self.seed, self.rank, worker_id]).generate_state(1)[0])
        random.seed(s)
        np.random.seed(s)
