"""Memory this process may use (utils/memory_limits.py): the host's MemAvailable or its memory cgroup's headroom
(v2 memory.max - memory.current, v1 memory.limit_in_bytes - memory.usage_in_bytes, reclaimable page cache given
back), whichever is smaller, read from fake cgroup trees."""
import pytest

from utils.memory_limits import cgroup_memory_available, memory_available

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

GB = 1 << 30


def _write(root, rel, **files):
    d = root.joinpath(*[p for p in rel.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1) if name.startswith("memory_") else d / name).write_text(f"{text}\n")
    return d


def _proc(tmp_path, text):
    f = tmp_path / "self_cgroup"
    f.write_text(text)
    return str(f)


def _meminfo(tmp_path, gb):
    f = tmp_path / "meminfo"
    f.write_text(f"MemTotal: {256 * 1024 * 1024} kB\nMemAvailable: {gb * 1024 * 1024} kB\n")
    return str(f)


def test_v2_limit_tighter_than_the_host(tmp_path):
    cg = tmp_path / "cg"
    _write(cg, "/ctr", memory_max=int(2.5 * GB), memory_current=1 * GB, memory_stat=f"anon 1\ninactive_file {GB // 2}")
    m = memory_available(str(cg), _proc(tmp_path, "0::/ctr\n"), _meminfo(tmp_path, 64))
    assert m.available == int(2.5 * GB) - GB + GB // 2 and "memory.max" in m.source
    # a host with less free than the container's headroom: the host's figure
    m = memory_available(str(cg), _proc(tmp_path, "0::/ctr\n"), _meminfo(tmp_path, 1))
    assert m.available == GB and m.source == "host MemAvailable"


def test_a_parent_limit_binds_and_max_means_none(tmp_path):
    cg = tmp_path / "cg"
    _write(cg, "/a", memory_max=GB, memory_current=GB // 4)
    _write(cg, "/a/b", memory_max="max", memory_current=GB // 4)
    assert cgroup_memory_available(str(cg), _proc(tmp_path, "0::/a/b\n")).available == GB - GB // 4
    _write(cg, "/c", memory_max="max", memory_current=5)
    assert cgroup_memory_available(str(cg), _proc(tmp_path, "0::/c\n")) is None


def test_v1_memory_controller_and_its_no_limit_value(tmp_path):
    cg = tmp_path / "cg"
    _write(cg, "/memory/docker/x", memory_limit_in_bytes=2 * GB, memory_usage_in_bytes=GB // 2,
           memory_stat=f"cache 5\ntotal_inactive_file {GB // 4}")
    proc = _proc(tmp_path, "4:memory:/docker/x\n0::/\n")
    assert cgroup_memory_available(str(cg), proc).available == 2 * GB - GB // 2 + GB // 4
    _write(cg, "/memory/docker/x", memory_limit_in_bytes=9223372036854771712)
    assert cgroup_memory_available(str(cg), proc) is None


def test_no_cgroup_files_at_all(tmp_path):
    assert cgroup_memory_available(str(tmp_path / "none"), str(tmp_path / "missing")) is None
    assert memory_available(str(tmp_path / "none"), str(tmp_path / "missing"), str(tmp_path / "nomem")) is None
