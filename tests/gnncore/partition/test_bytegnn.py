"""ByteGNN blocks and block assignment against the pure-Python references."""

from __future__ import annotations

import numpy as np
import pytest

from gnncore import _C
from gnncore.errors import InputError
from gnncore.partition import PartitionOptions, partition_metrics, symmetric_graph
from gnncore.partition.base import SymmetricGraph
from gnncore.partition.bytegnn import ByteGnnPartitioner, bytegnn_blocks, bytegnn_partition
from gnncore.partition.metrics import max_part_size
from gnncore.partition.postprocess import split_codes
from gnncore.partition.simple import random_assignment
from gnncore.store import GraphDir
from gnncore.testing.partition_reference import (
    bytegnn_assign_reference,
    bytegnn_blocks_reference,
    write_random_graph,
)

THIRDS = (1 / 3, 1 / 3, 1 / 3)


def sym_of(num_nodes: int, edges: list[tuple[int, int]]) -> SymmetricGraph:
    u = np.array([a for a, b in edges] + [b for a, b in edges], dtype=np.int64)
    v = np.array([b for a, b in edges] + [a for a, b in edges], dtype=np.int64)
    indptr, indices, _ = _C.build_csr(u, v, num_nodes)
    return SymmetricGraph(num_nodes, indptr, indices)


@pytest.fixture(scope="module")
def random_graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bytegnn")
    specs = [(80, 120, 0.1), (150, 300, 0.3), (200, 220, 0.05), (120, 500, 1.0)]
    return [
        GraphDir.open(write_random_graph(root / f"g{s}", n, m, seed=s, labelled=f))
        for s, (n, m, f) in enumerate(specs)
    ]


def test_blocks_on_a_path():
    path = sym_of(7, [(i, i + 1) for i in range(6)])
    block, level = bytegnn_blocks(path, np.array([0, 6]), hops=2)
    assert block.tolist() == [0, 0, 0, 3, 6, 6, 6]  # node 3 is 3 hops away: a singleton
    assert level.tolist() == [0, 1, 2, -1, 2, 1, 0]
    block, level = bytegnn_blocks(path, np.array([0, 6]), hops=3)
    assert block[3] == 0 and level[3] == 3  # equidistant: the smaller centre wins
    block, _ = bytegnn_blocks(path, np.array([6, 0]), hops=0)
    assert block.tolist() == list(range(7))


def test_blocks_match_the_reference(random_graphs):
    for graph in random_graphs:
        sym = symmetric_graph(graph)
        centres = np.flatnonzero(split_codes(graph) >= 0)
        for hops in (0, 1, 2, 3):
            block, level = bytegnn_blocks(sym, centres, hops)
            want_block, want_level = bytegnn_blocks_reference(
                sym.indptr, sym.indices, centres, hops
            )
            assert block.tolist() == want_block.tolist()
            assert level.tolist() == want_level.tolist()


def test_assignment_matches_the_reference(random_graphs):
    for graph in random_graphs:
        sym = symmetric_graph(graph)
        codes = split_codes(graph)
        n = graph.num_nodes
        for hops in (1, 2):
            block, level = bytegnn_blocks(sym, np.flatnonzero(codes >= 0), hops)
            for parts in (2, 3, 5):
                for cap in (max_part_size(n, parts, 0.03), -(-n // parts)):
                    for weights in (THIRDS, (0.6, 0.3, 0.1)):
                        got = bytegnn_partition(sym, codes, parts, cap, hops, weights)
                        want = bytegnn_assign_reference(
                            sym.indptr, sym.indices, block, level, codes, parts, cap, weights
                        )
                        assert got.tolist() == want.tolist()
                        assert np.bincount(got, minlength=parts).max() <= cap


def test_a_block_larger_than_any_room_is_split_centre_first():
    # A train star of 10 nodes (hops 1) and two isolated train nodes, p = 2, cap 6.
    star = sym_of(12, [(0, i) for i in range(1, 10)])
    codes = np.full(12, -1, dtype=np.int8)
    codes[[0, 10, 11]] = 0
    labels = bytegnn_partition(star, codes, parts=2, capacity=6, hops=1)
    assert labels[:6].tolist() == [0] * 6 and labels[6:10].tolist() == [1] * 4
    assert np.bincount(labels).tolist() == [6, 6]


def test_partitioner_keeps_blocks_together_under_the_cap(random_graphs):
    graph = random_graphs[1]
    labels = ByteGnnPartitioner().assign(graph, PartitionOptions(parts=4))
    assert labels.dtype == np.int64 and labels.shape == (graph.num_nodes,)
    metrics = partition_metrics(graph, labels, 4)
    assert max(metrics.part_sizes) <= max_part_size(graph.num_nodes, 4, 0.03)
    random_cut = partition_metrics(
        graph, random_assignment(graph.num_nodes, 4, 0), 4
    ).edge_cut_fraction
    assert metrics.edge_cut_fraction < 0.8 * random_cut
    # options.extra overrides the constructor's hops
    one_hop = ByteGnnPartitioner(hops=1).assign(graph, PartitionOptions(parts=4))
    assert np.array_equal(
        one_hop,
        ByteGnnPartitioner(hops=2).assign(graph, PartitionOptions(parts=4, extra={"hops": 1})),
    )


def test_graph_without_splits_is_rejected(tmp_path):
    graph = GraphDir.open(write_random_graph(tmp_path / "g", 30, 40, seed=0, labelled=0))
    with pytest.raises(InputError, match="needs train/val/test node splits"):
        ByteGnnPartitioner().assign(graph, PartitionOptions(parts=2))
    with pytest.raises(ValueError, match="hops"):
        ByteGnnPartitioner(hops=-1)
