"""Stop a command that thrashes at its cgroup's memory limit instead of dying.

A process whose anonymous memory grows to a cgroup v1 limit is not always
OOM-killed: while the kernel can still evict *something* -- the page cache,
then the process's own code and mapped files, which it at once faults back
in -- reclaim "succeeds", and the process crawls on for many minutes with
almost no user time. Measured in ``gnncore bench scale``: METIS (pymetis) on
200M edges under 8 GiB sat at 8.36 GB of anonymous memory, 50 MB of file
pages and ~120 major faults a second for over five minutes, gaining 0.02 s of
user time and 4.2 s of system time per 10 s.

:class:`ThrashGuard` watches one cgroup from a thread: once its usage has
stayed within :data:`NEAR_LIMIT_FRACTION` of the limit *and* it has taken
major faults at more than ``faults_per_second`` for ``seconds`` in a row, it
SIGKILLs every process in the cgroup and sets ``stalled``. A command that
merely runs at the limit on page cache (streaming a file) takes few major
faults and is left alone.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

#: Usage at or above this fraction of the limit counts as "at the limit".
NEAR_LIMIT_FRACTION = 0.98


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _major_faults(group: Path) -> int | None:
    try:
        for line in (group / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "total_pgmajfault":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


class ThrashGuard:
    """Kill the processes of cgroup ``group`` once they thrash at its limit.

    Use as ``with ThrashGuard(find_group, seconds=120) as guard: ...`` around
    the command; ``find_group`` returns the cgroup's directory once it exists
    (``None`` before). ``stalled`` says whether it killed; ``stalled_seconds``
    how long the thrashing had lasted then. :meth:`check` is one observation
    (the thread calls it every ``interval`` seconds; tests call it directly).
    """

    def __init__(
        self,
        find_group: Callable[[], Path | None],
        seconds: float,
        *,
        faults_per_second: float = 20.0,
        interval: float = 1.0,
    ) -> None:
        if seconds <= 0:
            raise ValueError(f"seconds must be positive; got {seconds}")
        self._find_group = find_group
        self.seconds = seconds
        self.faults_per_second = faults_per_second
        self.interval = interval
        self.stalled = False
        self.stalled_seconds = 0.0
        self._since: float | None = None
        self._last: tuple[float, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ThrashGuard:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval) and not self.stalled:
            group = self._find_group()
            if group is not None:
                self.check(group, time.monotonic())

    def check(self, group: Path, now: float) -> bool:
        """Observe ``group`` at time ``now``; kill and return True when it has
        thrashed at its limit for ``seconds``."""
        limit = _read_int(group / "memory.limit_in_bytes")
        usage = _read_int(group / "memory.usage_in_bytes")
        faults = _major_faults(group)
        if limit is None or usage is None or faults is None:
            return False
        last, self._last = self._last, (now, faults)
        if last is None or now <= last[0]:
            return False
        rate = (faults - last[1]) / (now - last[0])
        if usage < NEAR_LIMIT_FRACTION * limit or rate < self.faults_per_second:
            self._since = None
            return False
        if self._since is None:
            self._since = last[0]
        if now - self._since < self.seconds:
            return False
        self.stalled_seconds = now - self._since
        self.stalled = True
        for pid in _pids(group):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return True


def _pids(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []
