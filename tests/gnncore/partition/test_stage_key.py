"""The partition stage key: settings and graph version name the output; reuse is exact."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import planted_graph
from gnncore.partition import MethodSettings, partition_graph
from gnncore.partition.run import partition_stage_key
from gnncore.store import GraphDir


def test_key_covers_labels_settings_and_graph_version_not_speed(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g"))
    base = partition_stage_key(graph, "grem", 4, seed=0, settings=MethodSettings())
    assert base == partition_stage_key(graph, "grem", 4, seed=0, settings=MethodSettings(workers=3))
    for other in (
        partition_stage_key(graph, "grem", 4, seed=1),
        partition_stage_key(graph, "grem", 2, seed=0),
        partition_stage_key(graph, "metis", 4, seed=0),
        partition_stage_key(graph, "grem", 4, settings=MethodSettings(chunk=0.2)),
        partition_stage_key(graph, "grem", 4, imbalance=0.1),
    ):
        assert other != base
    changed = GraphDir.open(planted_graph(tmp_path / "h", num_nodes=401))
    assert partition_stage_key(changed, "grem", 4, seed=0) != base


def test_reuse_returns_the_recorded_report_without_rewriting(tmp_path: Path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g"))
    out = tmp_path / "p"
    first = partition_graph(graph.path, out, method="metis", parts=3, seed=4)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stage_key"] == first.stage_key and not first.reused
    written = (out / "assignment.npy").stat().st_mtime_ns
    again = partition_graph(graph.path, out, method="metis", parts=3, seed=4, reuse=True)
    assert again.reused and again.stage_key == first.stage_key
    assert again.metrics == first.metrics and again.seconds == first.seconds
    assert (out / "assignment.npy").stat().st_mtime_ns == written
    # other settings into the same directory recompute and replace it
    other = partition_graph(graph.path, out, method="metis", parts=3, seed=5, reuse=True)
    assert not other.reused and other.stage_key != first.stage_key
    assert json.loads((out / "manifest.json").read_text())["stage_key"] == other.stage_key
