"""How much memory this process may still use: the host's MemAvailable and, inside a container (a memory cgroup), the
cgroup's limit minus its usage, whichever is smaller. A container's limit is invisible in /proc/meminfo, which shows
the host: sized from it, `--cache ram` in a 2.5 GB container cached 4.2 GB and was killed by the kernel (rc 137, no
message). Reads cgroup v2 (memory.max, memory.current) and v1 (memory.limit_in_bytes, memory.usage_in_bytes), at
this process's cgroup and every ancestor (a parent's limit binds too). Page cache the kernel can drop
(inactive_file) is not counted as used. Framework-free; the paths are parameters so that tests can point them at
fake files."""
import os
from dataclasses import dataclass
from typing import Optional

CGROUP_ROOT = "/sys/fs/cgroup"
PROC_SELF_CGROUP = "/proc/self/cgroup"
MEMINFO = "/proc/meminfo"
UNLIMITED = 1 << 60  # v1 writes 'no limit' as a page-rounded 2**63-1; v2 writes 'max'


@dataclass(frozen=True)
class MemoryLimit:
    available: int  # bytes
    source: str  # where the figure came from, for the message


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == "max":
        return UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def _reclaimable(stat_file, key):
    try:
        with open(stat_file) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_paths(proc_self_cgroup):
    """{'v2': '/a/b'} and/or {'v1': '/a/b'} (the memory controller's) from /proc/self/cgroup."""
    out = {}
    try:
        with open(proc_self_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            out["v2"] = parts[2]
        elif "memory" in parts[1].split(","):
            out["v1"] = parts[2]
    return out


def _levels(base, rel):
    """base/rel, then each parent folder up to base itself (a container often sees its own cgroup as the root)."""
    rel = rel.strip("/")
    parts = rel.split("/") if rel else []
    return [os.path.join(base, *parts[:n]) for n in range(len(parts), -1, -1)]


def cgroup_memory_available(root=None, proc_self_cgroup=None):
    """The tightest (limit - usage + reclaimable page cache) over this process's memory cgroups, or None when no
    limit applies (no cgroup, or none with a limit). The paths default to the module's CGROUP_ROOT and
    PROC_SELF_CGROUP, read at each call."""
    root, proc_self_cgroup = root or CGROUP_ROOT, proc_self_cgroup or PROC_SELF_CGROUP
    paths = _cgroup_paths(proc_self_cgroup)
    files = []  # (folder, limit file, usage file, stat key)
    if "v2" in paths:  # the unified hierarchy: at the root, or under unified/ on hybrid hosts
        files += [(d, "memory.max", "memory.current", "inactive_file")
                  for base in (root, os.path.join(root, "unified")) for d in _levels(base, paths["v2"])]
    if "v1" in paths:
        files += [(d, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
                  for d in _levels(os.path.join(root, "memory"), paths["v1"])]
    best = None
    for folder, limit_name, usage_name, key in files:
        limit, usage = _read_int(os.path.join(folder, limit_name)), _read_int(os.path.join(folder, usage_name))
        if limit is None or usage is None or limit >= UNLIMITED:
            continue
        free = max(limit - usage + _reclaimable(os.path.join(folder, "memory.stat"), key), 0)
        if best is None or free < best.available:
            best = MemoryLimit(free, f"memory cgroup limit {limit / (1 << 30):.2f}GB ({folder}/{limit_name})")
    return best


def host_memory_available(meminfo=None):
    try:
        with open(meminfo or MEMINFO) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return MemoryLimit(int(line.split()[1]) * 1024, "host MemAvailable")
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_available(root=None, proc_self_cgroup=None, meminfo=None) -> Optional[MemoryLimit]:
    """The smaller of the host's available memory and the cgroup's headroom, or None when neither can be read."""
    found = [m for m in (host_memory_available(meminfo), cgroup_memory_available(root, proc_self_cgroup)) if m]
    return min(found, key=lambda m: m.available) if found else None
