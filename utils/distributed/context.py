"""Who this process is in a training job, decided once (in train.py) and passed down.

One convention everywhere: a single process is rank 0 of a world of 1, local rank 0, and the main process. Code
asks ``ctx.distributed`` instead of comparing ranks with -1, and nothing below train.py reads the launcher's
environment again.
"""
import os
from dataclasses import dataclass


def _env_int(env, name, default):
    try:
        return int(env.get(name, default))
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class DistContext:
    rank: int = 0  # global rank
    local_rank: int = 0  # rank on this node (which GPU)
    world_size: int = 1

    @property
    def distributed(self):
        return self.world_size > 1

    @property
    def is_main(self):
        """Rank 0 alone validates, keeps the EMA, logs, plots and writes the run folder."""
        return self.rank == 0

    @classmethod
    def from_env(cls, env=None):
        """The context a launcher (torch.distributed.run, oneflow.distributed.launch) describes in the environment.
        TRAP: importing OneFlow 0.9.0 sets RANK=-1 and LOCAL_RANK=0 even without a launcher, so the ranks are read
        only when WORLD_SIZE says there is more than one process."""
        env = os.environ if env is None else env
        world_size = max(_env_int(env, "WORLD_SIZE", 1), 1)
        if world_size == 1:
            return cls()
        return cls(rank=_env_int(env, "RANK", 0), local_rank=_env_int(env, "LOCAL_RANK", 0), world_size=world_size)
