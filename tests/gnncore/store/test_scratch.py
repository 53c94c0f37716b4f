"""Scratch directories name their process; a killed process's are reclaimed by the
next one that makes a directory of the same prefix, a live one's never."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from gnncore.store.scratch import scratch, scratch_dir, sweep_orphans

MAKE_AND_WAIT = """
import sys, time
from gnncore.store.scratch import scratch_dir
path = scratch_dir(sys.argv[1], sys.argv[2])
(path / "rows.npy").write_bytes(b"x" * 4096)
print(path, flush=True)
time.sleep(600)
"""


def _child_scratch(prefix: str, parent: Path) -> tuple[subprocess.Popen, Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", MAKE_AND_WAIT, prefix, str(parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_killed_processs_scratch_is_reclaimed_a_live_ones_is_not(tmp_path: Path) -> None:
    killed, left = _child_scratch("gnncore-sort-", tmp_path)
    live, kept = _child_scratch("gnncore-sort-", tmp_path)
    try:
        assert left.name.startswith("gnncore-sort-") and f"-{killed.pid}-" in left.name
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert (left / "rows.npy").exists()  # nothing could remove it
        other = scratch_dir("gnncore-eval-order-", tmp_path)  # another prefix: untouched
        assert left.exists()
        mine = scratch_dir("gnncore-sort-", tmp_path)
        assert not left.exists()  # reclaimed
        assert kept.exists() and (kept / "rows.npy").exists()  # its process runs
        assert mine.exists() and other.exists() and oct(mine.stat().st_mode)[-3:] == "700"
        assert sweep_orphans("gnncore-sort-", tmp_path) == []  # this process's own stays
    finally:
        live.kill()
        live.wait()
    assert sweep_orphans("gnncore-sort-", tmp_path) == [kept]


def test_names_it_cannot_read_or_of_another_namespace_are_left_alone(tmp_path: Path) -> None:
    dead = _dead_pid()
    namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    foreign = tmp_path / f"gnncore-sort-{int(namespace) + 1}-{dead}-abc"
    unnamed = tmp_path / "gnncore-sort-mine"
    not_a_dir = tmp_path / f"gnncore-sort-{namespace}-{dead}-file"
    ours = tmp_path / f"gnncore-sort-{namespace}-{dead}-xyz"
    for folder in (foreign, unnamed, ours):
        folder.mkdir()
    not_a_dir.write_text("a file")
    assert sweep_orphans("gnncore-sort-", tmp_path) == [ours]
    assert foreign.exists() and unnamed.exists() and not_a_dir.exists()


def test_the_context_removes_its_directory(tmp_path: Path) -> None:
    with scratch("gnncore-eval-layers-", tmp_path) as path:
        (path / "layer-0.npy").write_bytes(b"rows")
    assert not path.exists() and list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
