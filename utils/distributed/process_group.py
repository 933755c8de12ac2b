"""A DDP job's process group and watchdog: started once per rank before any collective, finished when the rank ends
normally. Both are no-ops in a single process.

Environment (utils/settings.py; the launcher's configuration rather than who this process is): YOLO_DDP_TIMEOUT seconds
(default 10800) bounds the process group's collectives and is the watchdog's no-progress limit;
YOLO_DDP_PEER_TIMEOUT (default 60 s) is how long a silent peer is tolerated; YOLO_DDP_WATCHDOG=0 turns the watchdog
off (e.g. behind a firewall that blocks its port)."""
from utils import backend
from utils.distributed import watchdog
from utils.settings import DDP_PEER_TIMEOUT, DDP_TIMEOUT, DDP_WATCHDOG

DEFAULT_DDP_LIMIT_S = DDP_TIMEOUT.default  # 3 h, as ultralytics: the other ranks wait while rank 0 validates COCO


def ddp_limit_s():
    return DDP_TIMEOUT.get()


def start(ctx, device):
    """The process group (with the timeout) and this rank's watchdog."""
    if not ctx.distributed:
        return
    backend.dist_init(device, int(ddp_limit_s()))
    if not DDP_WATCHDOG.get():
        return
    watchdog.start(ctx, stall_limit_s=ddp_limit_s(), peer_limit_s=DDP_PEER_TIMEOUT.get())


def finish():
    """This rank ended normally (or stops on a signal its peers got too): tell the peers' watchdogs it is not a
    crash, then stop watching."""
    watchdog.finish()
