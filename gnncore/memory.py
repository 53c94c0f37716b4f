"""How much memory this process may still take: the machine's ``MemAvailable``,
or less where the process's cgroup v1 memory limit leaves less; and the
cgroup's limit itself (:func:`cgroup_limit`), which with ``MemAvailable`` gives
a deployment's ``auto`` budget (:func:`gnncore.usage.process_budget`).

Default memory budgets (:func:`gnncore.usage.default_memory_budget`) and the
out-of-core mode's choice of what fits read it; the benchmark harness
(``gnncore_bench.limits``) makes cgroups under :data:`CGROUP_ROOT`.
"""

from __future__ import annotations

import os
from pathlib import Path

StrPath = str | os.PathLike[str]

#: Where the cgroup v1 memory controller is mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def memory_available(
    meminfo: StrPath = "/proc/meminfo",
    own_cgroup: StrPath = "/proc/self/cgroup",
    root: StrPath = CGROUP_ROOT,
) -> int | None:
    """Bytes this process may still take: the machine's ``MemAvailable``, or less
    where the process's cgroup v1 memory limit leaves less (limit minus usage,
    page cache included); ``None`` when neither can be read."""
    available = mem_available(meminfo)
    group = memory_group(own_cgroup, root)
    if group is None:
        return available
    try:
        limit = int((group / "memory.limit_in_bytes").read_text())
        usage = int((group / "memory.usage_in_bytes").read_text())
    except (OSError, ValueError):
        return available
    room = max(limit - usage, 0)
    return room if available is None else min(available, room)


def memory_group(
    own_cgroup: StrPath = "/proc/self/cgroup", root: StrPath = CGROUP_ROOT
) -> Path | None:
    """The folder of this process's cgroup v1 memory controller under ``root``;
    ``None`` when the process has none (or ``own_cgroup`` cannot be read)."""
    try:
        lines = Path(own_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path(root) / path.lstrip("/")
    return None


#: A cgroup v1 limit at or above this is "no limit" (the kernel writes 2^63 - 4096).
UNLIMITED = 1 << 60


def cgroup_limit(
    own_cgroup: StrPath = "/proc/self/cgroup", root: StrPath = CGROUP_ROOT
) -> int | None:
    """The memory limit of this process's cgroup v1 memory controller in bytes;
    ``None`` when there is none (or it cannot be read)."""
    group = memory_group(own_cgroup, root)
    if group is None:
        return None
    try:
        limit = int((group / "memory.limit_in_bytes").read_text())
    except (OSError, ValueError):
        return None
    return limit if limit < UNLIMITED else None


def mem_available(meminfo: StrPath = "/proc/meminfo") -> int | None:
    """The machine's ``MemAvailable`` in bytes; ``None`` when it cannot be read."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
