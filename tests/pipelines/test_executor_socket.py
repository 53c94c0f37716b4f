"""The code location's executor starts its forkserver under a long ``TMPDIR``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import multiprocessing, sys
if sys.argv[1] == "short":
    from gnncore.forkserver import short_socket_dir
    short_socket_dir()
ctx = multiprocessing.get_context("forkserver")
p = ctx.Process(target=print, args=("child ran",))
p.start(); p.join()
sys.exit(p.exitcode)
"""


def _probe(tmpdir: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, timeout=120
    )


def test_steps_start_under_a_temporary_directory_too_long_for_a_socket(tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 90)
    long_dir.mkdir()
    # multiprocessing alone cannot bind the forkserver's socket there ...
    plain = _probe(long_dir, "plain")
    assert plain.returncode != 0 and "AF_UNIX path too long" in plain.stderr
    # ... the executor's set-up moves only multiprocessing's own directory
    fixed = _probe(long_dir, "short")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "child ran" in fixed.stdout
