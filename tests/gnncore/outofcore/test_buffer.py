"""The partition buffer walking BETA, COMET and Alg. 7 epochs over a real store."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import planted_graph
from gnncore.outofcore import (
    beta_states,
    beta_swap_count,
    comet_epoch,
    first_cover_buckets,
    node_classification_states,
)
from gnncore.outofcore.buffer import PartitionBuffer
from gnncore.outofcore.store import write_partitioned_store
from gnncore.partition import partition_graph


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("buffer")
    graph = planted_graph(root / "g", num_nodes=800, degree=10)
    partition_graph(graph, root / "part", method="random", parts=8, balance=False)
    return write_partitioned_store(graph, root / "part", root / "store")


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_beta_epoch_trains_every_edge_once_within_capacity(store, prefetch):
    states = beta_states(8, 3, np.random.default_rng(0))
    plan = first_cover_buckets(states, 8)
    buffer = PartitionBuffer(store, capacity=3, prefetch=prefetch)
    seen = []
    x = np.asarray(store.array("features"))
    offsets = store.offsets
    for view in buffer.epoch(states, plan):
        assert set(view.features) == set(view.state) and len(view.state) <= 3
        for part, rows in view.features.items():
            assert np.array_equal(rows, x[offsets[part] : offsets[part + 1]])
        for (i, j), edges in view.buckets.items():
            assert i in view.state and j in view.state
            assert np.array_equal(edges, store.bucket(i, j))
            seen.append((i, j))
    assert sorted(seen) == [(i, j) for i in range(8) for j in range(8)]
    stats = buffer.stats
    assert stats.swaps == beta_swap_count(8, 3)
    assert stats.partitions_read == 3 + stats.swaps
    assert stats.resident_max == 3
    assert stats.buckets_read == 64
    # Every bucket once, and every partition each time it enters the buffer.
    row_bytes = x.shape[1] * 4
    entering = [set(states[0])] + [set(t) - set(s) for s, t in zip(states, states[1:])]
    feature_bytes = sum(
        int(offsets[p + 1] - offsets[p]) * row_bytes for parts in entering for p in parts
    )
    assert stats.bytes_read == len(store.array("edges")) * 16 + feature_bytes


def test_prefetch_and_plain_walks_read_the_same_bytes(store):
    states = beta_states(8, 4)
    plan = first_cover_buckets(states, 8)
    results = []
    for prefetch in (True, False):
        buffer = PartitionBuffer(store, capacity=4, prefetch=prefetch)
        views = [
            (v.state, {b: e.tolist() for b, e in v.buckets.items()})
            for v in buffer.epoch(states, plan)
        ]
        results.append((views, buffer.stats.bytes_read, buffer.stats.swaps))
    assert results[0] == results[1]
    x = np.asarray(store.array("features"))
    feature_bytes = sum(x[store.offsets[p] : store.offsets[p + 1]].nbytes for p in states[0])
    assert results[0][1] >= feature_bytes + len(store.array("edges")) * 16


def test_comet_and_node_classification_epochs(store):
    rng = np.random.default_rng(1)
    plan = comet_epoch(8, 4, 2, rng)
    buffer = PartitionBuffer(store, capacity=4)
    trained = [b for view in buffer.epoch(plan.states, plan.buckets) for b in view.buckets]
    assert sorted(trained) == [(i, j) for i in range(8) for j in range(8)]
    assert buffer.stats.swaps == plan.swaps
    states = node_classification_states(8, 3, rng)
    buffer = PartitionBuffer(store, capacity=3)
    parts = {p for view in buffer.epoch(states) for p in view.features}
    assert parts == set(range(8)) and buffer.stats.partitions_read == 8


def test_a_state_over_capacity_is_refused_before_reading(store):
    buffer = PartitionBuffer(store, capacity=2)
    with pytest.raises(ValueError, match="holds 3 partitions; the buffer holds 2"):
        next(iter(buffer.epoch([(0, 1, 2)])))
    assert buffer.stats.bytes_read == 0
