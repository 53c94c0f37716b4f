"""METIS partitioning, its metrics and the partition directory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.cli.main import main
from gnncore.errors import InputError
from gnncore.partition import PartitionDir, partition_graph, partition_metrics
from gnncore.store import GraphDir


def slow_cut(graph: GraphDir, assignment: np.ndarray) -> tuple[int, int]:
    """Cut edges counted pair by pair from the adjacency (reference)."""
    pairs = set()
    for v in range(graph.num_nodes):
        for u in graph.indices[graph.indptr[v] : graph.indptr[v + 1]]:
            pairs.add((min(v, int(u)), max(v, int(u))))
    return sum(assignment[a] != assignment[b] for a, b in pairs), len(pairs)


def test_metis_finds_planted_communities(small_graph, tmp_path):
    report = partition_graph(small_graph, tmp_path / "p", parts=4, seed=1)
    graph = GraphDir.open(small_graph)
    part = PartitionDir.open(tmp_path / "p", graph)
    assignment = np.asarray(part.assignment())
    cut, total = slow_cut(graph, assignment)
    assert report.metrics.edge_cut == cut and report.metrics.num_edges == total
    # 90% of edges are intra-community, so a good cut is well below random's 75%.
    assert report.metrics.edge_cut_fraction < 0.2
    assert report.metrics.max_part_ratio <= np.ceil(1.03 * 400 / 4) / 100
    assert sum(report.metrics.split_counts["train"]) == len(graph.split("train"))
    assert part.metrics["edge_cut"] == cut


def test_metrics_on_a_hand_made_assignment(small_graph):
    graph = GraphDir.open(small_graph)
    assignment = np.zeros(graph.num_nodes, dtype=np.int64)
    assignment[:100] = 1
    metrics = partition_metrics(graph, assignment, 2)
    assert metrics.part_sizes == [300, 100]
    assert metrics.max_part_ratio == pytest.approx(1.5)
    assert metrics.edge_cut == slow_cut(graph, assignment)[0]


def test_partition_of_a_changed_graph_is_detected(tmp_path):
    g = planted_graph(tmp_path / "g")
    partition_graph(g, tmp_path / "p", parts=2)
    planted_graph(tmp_path / "g", seed=3)  # the graph is rebuilt with other edges
    with pytest.raises(InputError, match="different version"):
        PartitionDir.open(tmp_path / "p", GraphDir.open(g))


def test_cli_contract_keys(small_graph, tmp_path, capsys):
    out_json = tmp_path / "p.json"
    code = main(
        [
            "partition",
            str(small_graph),
            str(tmp_path / "p"),
            "--method",
            "metis",
            "--parts",
            "4",
            "--seed",
            "0",
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    summary = json.loads(out_json.read_text())
    for key in (
        "method",
        "parts",
        "edge_cut_fraction",
        "max_part_ratio",
        "seconds",
        "peak_rss_bytes",
    ):
        assert key in summary
    assert summary["method"] == "metis" and summary["parts"] == 4
    assert summary["peak_rss_bytes"] > 10 * 2**20


def test_cli_rejects_more_parts_than_nodes(small_graph, tmp_path, capsys):
    code = main(["partition", str(small_graph), str(tmp_path / "p"), "--parts", "100000"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot split 400 nodes" in err
    assert not (tmp_path / "p").exists()


def test_partition_directory_holds_distdgl_postprocessing(small_graph, tmp_path):
    report = partition_graph(small_graph, tmp_path / "p", parts=4, seed=0)
    graph = GraphDir.open(small_graph)
    part = PartitionDir.open(tmp_path / "p", graph)
    assignment = np.asarray(part.assignment())
    offsets = np.asarray(part.array("offsets"))
    new_of_old = np.asarray(part.array("relabel_new_of_old"))
    old_of_new = np.asarray(part.array("relabel_old_of_new"))
    assert np.array_equal(old_of_new[new_of_old], np.arange(graph.num_nodes))
    for p in range(4):  # each part is one contiguous range of new ids
        members = old_of_new[offsets[p] : offsets[p + 1]]
        assert set(members.tolist()) == set(np.flatnonzero(assignment == p).tolist())
        halo = np.asarray(part.array(f"halo_{p}"))
        assert np.all(assignment[halo] != p) and len(halo) == report.halo_sizes[p]
    balancing = report.balancing
    assert balancing is not None and balancing["satisfied"]
    assert balancing["cut_cost"] == balancing["cut_after"] - balancing["cut_before"]
    for split, ratio in report.metrics.split_balance.items():
        assert ratio <= 1.10 + 1e-9, split
