"""LDG and Fennel: the C++ kernels against the pure-Python references."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import planted_graph
from gnncore import _C
from gnncore.partition import PartitionOptions, partition_metrics, symmetric_graph
from gnncore.partition.metrics import max_part_size
from gnncore.partition.simple import RandomPartitioner
from gnncore.partition.stream import FennelPartitioner, LdgPartitioner, fennel_alpha
from gnncore.store import GraphDir
from gnncore.testing.partition_reference import (
    fennel_reference,
    ldg_reference,
    stream_order_reference,
    write_random_graph,
)


@pytest.fixture(scope="module")
def random_graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    return [
        GraphDir.open(write_random_graph(root / f"g{s}", n, m, seed=s))
        for s, (n, m) in enumerate([(60, 90), (150, 450), (220, 300)])
    ]


@pytest.mark.parametrize("seed", [0, 7, 2**70 + 3, -5])
def test_stream_order_is_the_seeded_permutation(seed):
    order = _C.stream_order(97, seed)
    assert order.tolist() == stream_order_reference(97, seed)
    assert sorted(order.tolist()) == list(range(97))


def test_ldg_and_fennel_match_the_references(random_graphs):
    for graph in random_graphs:
        sym = symmetric_graph(graph)
        n = graph.num_nodes
        for parts in (2, 3, 7):
            for seed in (0, 11):
                cap = max_part_size(n, parts, 0.03)
                got = LdgPartitioner().assign_symmetric(sym, parts, cap, seed)
                assert (
                    got.tolist()
                    == ldg_reference(sym.indptr, sym.indices, parts, cap, seed).tolist()
                )
                alpha = fennel_alpha(n, len(sym.indices) // 2, parts)
                got = FennelPartitioner().assign_symmetric(sym, parts, cap, seed)
                want = fennel_reference(sym.indptr, sym.indices, parts, cap, alpha, 1.5, seed)
                assert got.tolist() == want.tolist()


def test_int32_and_int64_indices_agree(random_graphs):
    sym = symmetric_graph(random_graphs[1])
    i32, i64 = sym.indices.astype(np.int32), sym.indices.astype(np.int64)
    fennel = _C.FennelOptions(parts=4, capacity=40, alpha=0.1, gamma=1.5, seed=3)
    for fn, args in ((_C.ldg_partition, (4, 40, 3)), (_C.fennel_partition, (fennel,))):
        assert np.array_equal(fn(sym.indptr, i32, *args), fn(sym.indptr, i64, *args))


def test_tight_cap_is_never_exceeded(random_graphs):
    sym = symmetric_graph(random_graphs[1])
    n = random_graphs[1].num_nodes
    for parts in (2, 4, 8):
        cap = -(-n // parts)  # imbalance 0: every part at most ceil(N/p)
        for labels in (
            LdgPartitioner().assign_symmetric(sym, parts, cap, 1),
            FennelPartitioner().assign_symmetric(sym, parts, cap, 1),
        ):
            assert np.bincount(labels, minlength=parts).max() <= cap
            assert labels.min() >= 0 and labels.max() < parts


def test_stream_partitioners_beat_random_on_a_planted_graph(tmp_path):
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=600, degree=10))
    options = PartitionOptions(parts=4, seed=0)
    random_cut = partition_metrics(
        graph, RandomPartitioner().assign(graph, options), 4
    ).edge_cut_fraction
    for partitioner in (LdgPartitioner(), FennelPartitioner()):
        labels = partitioner.assign(graph, options)
        assert labels.dtype == np.int64 and labels.shape == (600,)
        metrics = partition_metrics(graph, labels, 4)
        assert max(metrics.part_sizes) <= max_part_size(600, 4, 0.03)
        assert metrics.edge_cut_fraction < 0.8 * random_cut
        # deterministic in the seed, different across seeds
        assert np.array_equal(labels, partitioner.assign(graph, options))
        other = partitioner.assign(graph, PartitionOptions(parts=4, seed=1))
        assert not np.array_equal(labels, other)


def test_one_part_and_bad_arguments(random_graphs):
    graph = random_graphs[0]
    labels = LdgPartitioner().assign(graph, PartitionOptions(parts=1))
    assert not labels.any()
    sym = symmetric_graph(graph)
    with pytest.raises(ValueError, match="capacity"):
        _C.ldg_partition(sym.indptr, sym.indices, 4, 3, 0)
    with pytest.raises(ValueError, match="gamma"):
        FennelPartitioner(gamma=0.5)
    with pytest.raises(ValueError, match="cannot split"):
        FennelPartitioner().assign(graph, PartitionOptions(parts=1000))
