"""``gnncore synth --layout csv``: the generated edges as one CSV, equal to the generated graph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gnncore.io import ingest
from gnncore.store import GraphDir
from gnncore.store.atomic import overwrite_allowed
from gnncore.synth import SynthSpec, generate_graph, iter_edge_chunks, write_edge_csv

SPEC = SynthSpec(num_nodes=3000, avg_degree=8, num_classes=4, num_features=4, seed=5)


def canonical_pairs(src: np.ndarray, dst: np.ndarray) -> set[tuple[int, int]]:
    """Distinct undirected pairs ``(min, max)`` without self-loops."""
    keep = src != dst
    lo, hi = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    return set(zip(lo.tolist(), hi.tolist()))


def graph_pairs_in_raw_ids(graph_dir: Path) -> set[tuple[int, int]]:
    """The graph's canonical edges, mapped back to the raw ids through its id map
    (the identity when it has none)."""
    edges = pl.read_parquet(graph_dir / "edges.parquet")
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    ids = graph_dir / "node_ids.parquet"
    if ids.exists():
        table = pl.read_parquet(ids).sort("node_id")
        assert table["node_id"].to_list() == list(range(table.height))
        raw = table["raw_id"].to_numpy()
        src, dst = raw[src], raw[dst]
    return canonical_pairs(src, dst)


def test_the_csv_holds_the_generator_stream_line_for_line(tmp_path: Path) -> None:
    path = tmp_path / "edges.csv"
    report = write_edge_csv(path, SPEC, chunk_edges=1000)  # many chunks
    table = pl.read_csv(path)
    assert table.columns == ["src", "dst"]
    src = np.concatenate([s for s, _ in iter_edge_chunks(SPEC)])
    dst = np.concatenate([d for _, d in iter_edge_chunks(SPEC)])
    np.testing.assert_array_equal(table["src"].to_numpy(), src)
    np.testing.assert_array_equal(table["dst"].to_numpy(), dst)
    assert report["num_edges"] == SPEC.num_edges == table.height
    assert report["bytes"] == path.stat().st_size
    assert report["output_bytes"] == path.stat().st_size
    assert set(report["phases"]) == {"generate", "write"}
    assert report["peak_rss_bytes"] > 0
    # no temporary left; the hidden record lets a later run replace this file
    assert sorted(p.name for p in tmp_path.iterdir()) == [".edges.csv.gnncore.json", "edges.csv"]


@pytest.mark.parametrize("budget", ["none", "64KiB"])
def test_ingesting_the_csv_gives_the_generated_graph(tmp_path: Path, budget: str) -> None:
    csv = tmp_path / "edges.csv"
    write_edge_csv(csv, SPEC)
    generated = tmp_path / "generated"
    generate_graph(generated, SPEC, memory_budget=None)
    ingested = tmp_path / "ingested"
    report = ingest(
        csv, ingested, format="edgelist", memory_budget=None if budget == "none" else budget
    )
    expected = graph_pairs_in_raw_ids(generated)
    assert graph_pairs_in_raw_ids(ingested) == expected
    assert report.num_canonical_edges == len(expected)
    # the generator's repeats and self-loops are in the file and dropped the same way
    gen = GraphDir.open(generated).manifest
    assert report.duplicates_removed + report.self_loops_removed > 0
    assert report.num_input_edges == SPEC.num_edges
    assert int(gen.num_canonical_edges) == report.num_canonical_edges


def test_a_failed_write_leaves_neither_file_nor_temporary(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n1,2\n")  # an earlier, complete file stays until replaced

    def broken(*args, **kwargs):
        yield np.arange(3), np.arange(3)
        raise OSError("disk full")

    monkeypatch.setattr("gnncore.synth.edge_csv.iter_edge_chunks", broken)
    with pytest.raises(OSError, match="disk full"), overwrite_allowed():  # the user's file
        write_edge_csv(path, SPEC)
    assert [p.name for p in tmp_path.iterdir()] == ["edges.csv"]
    assert path.read_text() == "src,dst\n1,2\n"


def test_cli_layout_csv(tmp_path: Path) -> None:
    out, summary = tmp_path / "g.csv", tmp_path / "s.json"
    args = ["--nodes", "500", "--avg-degree", "4", "--classes", "2", "--features", "2"]
    subprocess.run(
        [sys.executable, "-m", "gnncore.cli.main", "synth", str(out), "--layout", "csv", *args]
        + ["--no-progress", "--json", str(summary)],
        check=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    result = json.loads(summary.read_text())
    assert result["layout"] == "csv"
    assert result["num_edges"] == 1000 == pl.read_csv(out).height
