"""Bounded ingestion killed (SIGKILL) as each of its stages starts: no output, nothing
left but the run's own hidden scratch and temporary directories, which the next run
into the same output removes before writing the same graph as an undisturbed run."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnncore.io import ingest

#: The stages bounded ingestion reports to its progress callback, in order (the
#: undisturbed run checks that these are all of them).
STAGES = (
    "reading edges",
    "sorting edges",
    "remapping ids",
    "node data",
    "writing edges and CSR",
    "shuffled edge stream",
    "checksums and manifest",
)
#: A child that ingests in bounded memory and kills itself when stage ``argv[3]``
#: first starts.
CHILD = """
import os, signal, sys
from gnncore.io import ingest

def die_at(name):
    if name == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)

ingest(sys.argv[1], sys.argv[2], memory_budget=64 << 10, seed=5, progress=die_at)
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    pairs = rng.integers(0, 3000, (20_000, 2))
    path = tmp_path_factory.mktemp("edges") / "g.csv"
    path.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    return path


@pytest.fixture(scope="module")
def undisturbed(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("clean") / "graph"
    seen: list[str] = []
    ingest(source, out, memory_budget=64 << 10, seed=5, progress=seen.append)
    assert list(dict.fromkeys(seen)) == list(STAGES)
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("stage", STAGES)
def test_a_run_killed_at_a_stage_leaves_no_output_and_the_next_run_cleans_up(
    source: Path, undisturbed: dict[str, bytes], tmp_path: Path, stage: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = work / "graph"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(source), str(out), stage],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    # No output; what is left is hidden beside it and carries the dead run's pid.
    assert not out.exists()
    left = sorted(p.name for p in work.iterdir())
    assert left and all(name.startswith(".graph.") for name in left), left
    # The next run removes them and writes what an undisturbed run writes.
    ingest(source, out, memory_budget=64 << 10, seed=5)
    assert sorted(p.name for p in work.iterdir()) == ["graph"]
    assert {p.name: p.read_bytes() for p in sorted(out.iterdir())} == undisturbed
