"""ThrashGuard: kill a cgroup's processes once they thrash at its limit (on fake cgroup files)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gnncore_bench.thrash_guard import ThrashGuard

LIMIT = 1 << 30


def fake_group(root: Path, usage: int, faults: int, pids: Sequence[int] = ()) -> Path:
    """The files of a cgroup v1 memory group, each replaced whole (a rename), as the
    kernel's read at once: the guard's thread may read them while a test rewrites them,
    and a file caught truncated (``cgroup.procs`` empty) let it stall without a kill."""
    root.mkdir(exist_ok=True)
    files = {
        "memory.limit_in_bytes": f"{LIMIT}\n",
        "memory.usage_in_bytes": f"{usage}\n",
        "memory.stat": f"cache 0\nrss {usage}\ntotal_pgmajfault {faults}\n",
        "cgroup.procs": "".join(f"{p}\n" for p in pids),
    }
    for name, text in files.items():
        (root / f".{name}.tmp").write_text(text)
        (root / f".{name}.tmp").replace(root / name)
    return root


def test_kills_after_thrashing_at_the_limit_long_enough(tmp_path: Path) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        guard = ThrashGuard(lambda: None, seconds=10)
        group = tmp_path / "g"
        # 100 major faults a second at the limit, observed every 2 s
        for step in range(6):
            fake_group(group, LIMIT, 200 * step, [victim.pid])
            killed = guard.check(group, 2.0 * step)
            assert killed == (step == 5), step  # 0 -> 10 s of thrashing at step 5
        assert guard.stalled and guard.stalled_seconds == pytest.approx(10.0)
        assert victim.wait(10) == -9
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize(
    ("usage", "faults_per_step"),
    [
        (LIMIT, 0),  # at the limit on page cache alone: no major faults
        (LIMIT // 2, 500),  # faulting hard but far from the limit
    ],
)
def test_leaves_a_command_that_is_not_thrashing(
    tmp_path: Path, usage: int, faults_per_step: int
) -> None:
    guard = ThrashGuard(lambda: None, seconds=1)
    for step in range(20):
        assert not guard.check(fake_group(tmp_path / "g", usage, faults_per_step * step), step)
    assert not guard.stalled


def test_a_break_in_the_thrashing_restarts_the_count(tmp_path: Path) -> None:
    guard = ThrashGuard(lambda: None, seconds=5)
    group, faults = tmp_path / "g", 0
    for t in range(30):
        calm = t % 5 == 4  # every fifth second it gets below the limit
        faults += 0 if calm else 100
        assert not guard.check(fake_group(group, LIMIT // 2 if calm else LIMIT, faults), t)


def test_the_thread_watches_the_group_it_is_given(tmp_path: Path) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    group = fake_group(tmp_path / "g", LIMIT, 0, [victim.pid])
    try:
        with ThrashGuard(lambda: group, seconds=0.2, interval=0.05) as guard:
            for faults in range(0, 100_000, 1000):  # the fake counter races ahead
                fake_group(group, LIMIT, faults, [victim.pid])
                if victim.poll() is not None:
                    break
                subprocess.run(["sleep", "0.02"])
        assert guard.stalled
        assert victim.wait(10) == -9
    finally:
        victim.kill()
        victim.wait()
