"""Running a command under a kernel-enforced memory limit, and what it measures."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from gnncore.memory import CGROUP_ROOT
from gnncore_bench.limits import LimitUnavailable, MemoryCgroup, cgroup_available, run_limited
from gnncore_bench.page_cache import evict_page_cache

MiB = 2**20
WHY_NOT = cgroup_available()
needs_cgroup = pytest.mark.skipif(WHY_NOT is not None, reason=f"no memory cgroup: {WHY_NOT}")


def _touch(mib: int) -> list[str]:
    """A Python child that allocates ``mib`` MiB and writes every page."""
    code = f"b = bytearray({mib} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    return [sys.executable, "-c", code]


def _our_cgroups() -> set[str]:
    return {p.name for p in CGROUP_ROOT.glob(f"gnncore-{os.getpid()}-*")}


def _gone(pid: int) -> bool:
    """No such process, or a zombie (killed; waiting for init to reap it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in ("Z", "X")


@needs_cgroup
def test_a_child_over_the_limit_is_killed_for_memory_and_its_cgroup_removed():
    before = _our_cgroups()
    run = run_limited(_touch(300), 128 * MiB)
    assert run.limited and run.reason is None
    assert run.killed_for_memory and not run.ok
    assert run.exit_code != 0 and not run.timed_out
    assert run.peak_memory_bytes is not None and run.peak_memory_bytes <= 128 * MiB
    assert _our_cgroups() == before


@needs_cgroup
def test_a_child_under_the_limit_succeeds_and_reports_its_peaks(tmp_path):
    # This process's own peak must not leak into the child's ru_maxrss.
    ballast = bytearray(200 * MiB)
    ballast[::4096] = b"\1" * len(ballast[::4096])
    run = run_limited(_touch(20), 256 * MiB, capture_dir=tmp_path, capture_name="small")
    assert run.ok and run.exit_code == 0 and not run.killed_for_memory
    assert run.peak_rss_bytes is not None and 20 * MiB <= run.peak_rss_bytes < 150 * MiB
    assert run.peak_memory_bytes is not None
    assert 20 * MiB <= run.peak_memory_bytes <= 256 * MiB
    assert run.failcnt == 0
    assert run.stdout_path == str(tmp_path / "small.stdout")
    assert Path(run.stderr_path or "").is_file()
    assert json.loads(json.dumps(run.to_dict()))["memory_limit_bytes"] == 256 * MiB


def _fs_type(path: Path) -> str:
    """The filesystem type of the mount holding ``path`` (from /proc/self/mounts)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount, fstype = line.split()[:3]
        if str(path).startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


@needs_cgroup
def test_reads_of_an_evicted_file_are_counted_and_charged(tmp_path):
    if _fs_type(tmp_path.resolve()) in ("tmpfs", "ramfs"):
        pytest.skip(f"{tmp_path} is in memory: nothing is read from storage")
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(64 * MiB))
    cmd = ["sh", "-c", f"cat '{data}' > /dev/null"]
    run = run_limited(cmd, 512 * MiB, evict=[data])
    assert run.ok and run.evicted_files == 1
    assert run.read_bytes is not None and run.read_bytes >= 60 * MiB
    # The page cache the read brought in is charged to the cgroup.
    assert run.peak_memory_bytes is not None and run.peak_memory_bytes >= 60 * MiB
    # Cached now: a second run without eviction reads (nearly) nothing from storage.
    again = run_limited(cmd, 512 * MiB)
    assert again.read_bytes is not None and again.read_bytes < 8 * MiB


@needs_cgroup
def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    cmd = ["sh", "-c", f"sleep 100 & echo $! > '{pid_file}'; wait"]
    started = time.monotonic()
    run = run_limited(cmd, 256 * MiB, timeout=0.5)
    assert time.monotonic() - started < 10
    assert run.timed_out and not run.ok and not run.killed_for_memory
    assert _gone(int(pid_file.read_text()))


def test_without_a_limit_it_runs_anywhere(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    cmd = ["sh", "-c", f"sleep 100 & echo $! > '{pid_file}'; echo hello; wait"]
    run = run_limited(cmd, None, timeout=0.5, capture_dir=tmp_path)
    assert not run.limited and run.reason == "no memory limit requested"
    assert run.peak_memory_bytes is None and run.failcnt is None
    assert run.timed_out and _gone(int(pid_file.read_text()))
    assert (tmp_path / "run.stdout").read_text() == "hello\n"
    done = run_limited([sys.executable, "-c", "raise SystemExit(3)"], None)
    assert done.exit_code == 3 and not done.timed_out
    assert done.peak_rss_bytes is not None and done.peak_rss_bytes > 0
    assert run_limited(["no-such-command-gnncore"], None).exit_code == 127


def test_without_a_cgroup_a_requested_limit_is_reported_not_faked(tmp_path, monkeypatch):
    import gnncore_bench.limits as limits

    monkeypatch.setattr(limits, "cgroup_available", lambda: "not root (test)")
    run = run_limited(["true"], 64 * MiB)
    assert run.ok and not run.limited and run.reason == "not root (test)"
    assert run.peak_memory_bytes is None and not run.killed_for_memory
    with pytest.raises(LimitUnavailable, match="not root"):
        run_limited(["true"], 64 * MiB, require_limit=True)


@needs_cgroup
def test_memory_cgroup_is_removed_after_an_error():
    with pytest.raises(RuntimeError, match="boom"):
        with MemoryCgroup(64 * MiB) as group:
            assert group.path.is_dir() and group.pids() == []
            assert group.limit_bytes == 64 * MiB
            raise RuntimeError("boom")
    assert not group.path.exists()


def test_evict_page_cache_counts_the_files_of_a_directory(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y")
    (tmp_path / "sub" / "c").write_bytes(b"")
    assert evict_page_cache([tmp_path]) == 3
    assert evict_page_cache([tmp_path / "a"]) == 1
    with pytest.raises(FileNotFoundError):
        evict_page_cache([tmp_path / "missing"])
