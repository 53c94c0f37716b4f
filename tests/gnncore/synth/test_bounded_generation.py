"""Generation in bounded memory: the same graph directory, byte for byte, as in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gnncore.store import GraphDir, edge_keys
from gnncore.synth import SynthSpec, generate_graph
from gnncore.synth.dataset import BOUNDED_PHASES

TINY = 64 << 10  # forces many edge chunks, sort runs and merges, and the memory-mapped shuffle

SPECS = {
    "one-community-per-class": SynthSpec(
        num_nodes=5000, avg_degree=8, num_classes=4, num_features=12, seed=3
    ),
    "communities-per-class": SynthSpec(
        num_nodes=7000,
        avg_degree=6,
        num_classes=3,
        num_features=5,
        seed=1,
        communities_per_class=4,
    ),  # fmt: skip
    "bipartite": SynthSpec(
        num_nodes=5000, avg_degree=6, num_classes=3, num_features=4, seed=2, model="bipartite"
    ),
}


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("budget", [TINY, "1GiB"])
@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_same_directory_as_in_memory(tmp_path, monkeypatch, spec, budget):
    out = tmp_path / "g"  # both into the same path: the manifest records it as the source
    mem = generate_graph(out, spec)
    expected = snapshot(out)
    runs = []
    spill = edge_keys.KeySorter._spill
    monkeypatch.setattr(
        edge_keys.KeySorter, "_spill", lambda self: (runs.append(self._fill), spill(self))[1]
    )
    ext = generate_graph(out, spec, memory_budget=budget)
    assert snapshot(out) == expected
    GraphDir.open(out).validate(checksums=True)
    if budget == TINY:
        assert sum(1 for n in runs if n) > 5  # many sorted key runs, merged
    for field in ("num_nodes", "num_input_edges", "self_loops_removed", "duplicates_removed",
                  "num_canonical_edges", "num_edges", "directed", "num_features",
                  "num_classes", "details", "format", "source", "out_dir"):  # fmt: skip
        assert getattr(mem, field) == getattr(ext, field), field
    assert ext.duplicates_removed > 0
    assert set(ext.phases) == set(BOUNDED_PHASES)
    assert ext.peak_rss_bytes and ext.peak_rss_bytes > 0
    assert ext.memory_budget == (TINY if budget == TINY else 1 << 30)
    assert mem.memory_budget is None  # small enough for "auto" to stay in memory
    assert list(mem.phases)[0] == "generate" and "canonical edges" in mem.phases
    assert (
        mem.output_bytes
        == ext.output_bytes
        == sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    )
    # nothing left beside the output: no scratch, no temporary directories
    assert [p.name for p in tmp_path.iterdir()] == ["g"]


@pytest.mark.parametrize("budget", [None, TINY])
def test_given_splits_and_details_replace_the_generators(tmp_path, budget):
    """A benchmark's own splits (subsets of the generator's) and extra manifest
    details, in both paths."""
    import numpy as np

    spec = SPECS["one-community-per-class"]
    splits = (np.arange(0, 50), np.arange(50, 60), np.arange(60, 80))
    out = tmp_path / "g"
    report = generate_graph(out, spec, memory_budget=budget, splits=splits, details={"k": 1})
    graph = GraphDir.open(out)
    for name, ids in zip(("train_idx", "val_idx", "test_idx"), splits, strict=True):
        assert np.array_equal(np.load(out / f"{name}.npy"), ids)
    stats = json.loads((out / "manifest.json").read_text())["stats"]
    assert stats["k"] == 1 and stats["synth_spec"]["num_nodes"] == spec.num_nodes
    assert report.details["k"] == 1 and graph.num_nodes == spec.num_nodes


def test_refusals(tmp_path):
    with pytest.raises(ValueError, match="at least"):
        generate_graph(tmp_path / "g", SPECS["one-community-per-class"], memory_budget=1000)
    assert list(tmp_path.iterdir()) == []


def test_failure_leaves_the_previous_output(tmp_path, monkeypatch):
    import gnncore.io.bounded.stream as external

    spec = SPECS["one-community-per-class"]
    out = tmp_path / "g"
    generate_graph(out, spec, name="before")
    previous = snapshot(out)

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(external, "write_edges_parquet", fail)
    with pytest.raises(OSError, match="disk full"):
        generate_graph(out, spec, name="after", memory_budget=TINY)
    assert snapshot(out) == previous
    assert [p.name for p in tmp_path.iterdir()] == ["g"]


KILLED = """
import os, signal, sys
import gnncore.io.bounded.stream as external
from gnncore.synth import SynthSpec, generate_graph

def killed(*_):  # after the edges were sorted: scratch runs and a partial output on disk
    os.kill(os.getpid(), signal.SIGKILL)

external.write_edges_parquet = killed
spec = SynthSpec(num_nodes=5000, avg_degree=8, num_classes=4, num_features=12, seed=3)
generate_graph(sys.argv[1], spec, memory_budget={budget})
"""


def test_killed_run_leaves_no_output_and_the_next_cleans_up(tmp_path):
    out = tmp_path / "g"
    code = textwrap.dedent(KILLED.format(budget=TINY))
    done = subprocess.run([sys.executable, "-c", code, str(out)], check=False)
    assert done.returncode == -9
    assert not out.exists()
    left = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert left == [".g.synth", ".g.tmp"]  # the scratch runs and the unfinished directory
    mine = tmp_path / f".g.synth-{os.getpid()}-feedface"  # a live process's: kept
    mine.mkdir()
    generate_graph(out, SPECS["one-community-per-class"], memory_budget=TINY)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, "g"])
    GraphDir.open(out).validate(checksums=True)


def test_cli_memory_budget(tmp_path):
    out = tmp_path / "g"
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "gnncore.cli.main", "synth", str(out), "--nodes", "3000",
           "--avg-degree", "6", "--classes", "3", "--features", "8", "--seed", "2",
           "--communities-per-class", "2", "--memory-budget", "64KiB", "--no-progress",
           "--json", str(summary)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = json.loads(summary.read_text())
    assert report["layout"] == "graph" and report["memory_budget"] == 64 << 10
    assert set(report["phases"]) == set(BOUNDED_PHASES) and report["peak_rss_bytes"] > 0
    streamed = snapshot(out)
    # --avg-degree is a float, recorded as such in the spec
    spec = SynthSpec(num_nodes=3000, avg_degree=6.0, num_classes=3, num_features=8, seed=2,
                     communities_per_class=2)  # fmt: skip
    generate_graph(out, spec)
    assert snapshot(out) == streamed
    bad = subprocess.run(
        cmd[:-2] + ["--layout", "ogb"], capture_output=True, text=True, check=False
    )
    assert bad.returncode != 0 and "--layout graph" in bad.stderr
