"""`dg check defs` — the CLI users and CI run to validate the code location."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_dg_check_defs_passes(tmp_path):
    dg = Path(sys.executable).parent / "dg"
    if not dg.exists():
        pytest.skip(f"dg is not installed beside {sys.executable}")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "GNNCORE_DATA_ROOT": str(tmp_path)}
    done = subprocess.run(
        [str(dg), "check", "defs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All definitions loaded successfully" in done.stdout + done.stderr
