"""gnncore.memory: what this process may still take, machine and own cgroup."""

from __future__ import annotations

from gnncore.memory import memory_available


def test_memory_available_is_the_smaller_of_the_machine_and_the_own_cgroup(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  24000000 kB\nMemAvailable:   20000000 kB\n")
    own = tmp_path / "cgroup"
    own.write_text("12:cpu,cpuacct:/\n7:memory:/gnncore-test\n1:name=systemd:/\n")
    group = tmp_path / "memory" / "gnncore-test"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    (group / "memory.usage_in_bytes").write_text(f"{512 << 20}\n")
    root = tmp_path / "memory"
    assert memory_available(meminfo, own, root) == (2 << 30) - (512 << 20)
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # no limit
    assert memory_available(meminfo, own, root) == 20000000 * 1024
    own.write_text("0::/\n")  # cgroup v2 only: the machine's figure
    assert memory_available(meminfo, own, root) == 20000000 * 1024
    assert memory_available(tmp_path / "absent", tmp_path / "absent", root) is None
