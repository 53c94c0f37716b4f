"""Bounded ingestion of an edge list writes ``node_ids.parquet`` on a thread beside
the remap and the CSR (``StreamJob.before_beside``): same directory, and an
error there still fails the run and leaves no output (an existing one kept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnncore.io import ingest
from gnncore.io.bounded import text_ingest
from gnncore.store import GraphDir
from gnncore.synth.edge_csv import write_edge_csv
from gnncore.synth.model import SynthSpec


def edges_csv(tmp_path: Path) -> Path:
    path = tmp_path / "edges.csv"
    write_edge_csv(path, SynthSpec(num_nodes=400, avg_degree=5, num_classes=2, num_features=1))
    return path


def test_node_ids_beside_the_edges_same_directory(tmp_path):
    source = edges_csv(tmp_path)
    ingest(source, tmp_path / "mem", memory_budget=None)
    ingest(source, tmp_path / "ext", memory_budget=1 << 30)
    for file in sorted(p.name for p in (tmp_path / "mem").iterdir()):
        assert (tmp_path / "mem" / file).read_bytes() == (tmp_path / "ext" / file).read_bytes()
    GraphDir.open(tmp_path / "ext").validate(checksums=True)


def test_node_data_error_beside_the_edges_fails_the_run(tmp_path, monkeypatch):
    source = edges_csv(tmp_path)
    ingest(source, tmp_path / "out", memory_budget=1 << 30, seed=1)
    kept = (tmp_path / "out" / "manifest.json").read_bytes()

    def broken(_raw_ids):
        raise OSError("disk full while writing node_ids")

    monkeypatch.setattr(text_ingest, "node_id_table", broken)
    with pytest.raises(OSError, match="disk full"):
        ingest(source, tmp_path / "out", memory_budget=1 << 30, seed=2)
    assert (tmp_path / "out" / "manifest.json").read_bytes() == kept
    with pytest.raises(OSError, match="disk full"):
        ingest(source, tmp_path / "new", memory_budget=1 << 30)
    assert not (tmp_path / "new").exists()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith((".out", ".new"))]
    assert left == []  # no scratch or temporary directory left behind
