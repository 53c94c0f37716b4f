"""Random and range baselines: exact balance and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from gnncore.partition import PartitionOptions
from gnncore.partition.simple import (
    RandomPartitioner,
    RangePartitioner,
    random_assignment,
    range_assignment,
)
from gnncore.store import GraphDir
from gnncore.testing.partition_reference import write_random_graph


@pytest.mark.parametrize("n,parts", [(1, 1), (10, 3), (101, 7), (64, 64), (1000, 16)])
def test_both_are_exactly_balanced(n, parts):
    for labels in (random_assignment(n, parts, seed=5), range_assignment(n, parts)):
        assert labels.dtype == np.int64 and labels.shape == (n,)
        sizes = np.bincount(labels, minlength=parts)
        assert sizes.min() == n // parts and sizes.max() == -(-n // parts)


def test_random_is_a_seeded_permutation_dealt_round_robin():
    labels = random_assignment(50, 4, seed=3)
    perm = np.random.default_rng(3).permutation(50)
    assert labels[perm].tolist() == [i % 4 for i in range(50)]
    assert np.array_equal(labels, random_assignment(50, 4, seed=3))
    assert not np.array_equal(labels, random_assignment(50, 4, seed=4))


def test_range_is_contiguous():
    labels = range_assignment(103, 5)
    assert np.all(np.diff(labels) >= 0) and labels[0] == 0 and labels[-1] == 4
    for i in range(5):  # part i holds [ceil(i·N/p), ceil((i+1)·N/p))
        ids = np.flatnonzero(labels == i)
        assert ids[0] == -(-i * 103 // 5) and ids[-1] == -(-(i + 1) * 103 // 5) - 1


def test_partitioners_on_a_graph_directory(tmp_path):
    graph = GraphDir.open(write_random_graph(tmp_path / "g", 90, 200, seed=1))
    options = PartitionOptions(parts=4, seed=9)
    assert RandomPartitioner.name == "random" and RangePartitioner.name == "range"
    assert np.array_equal(RandomPartitioner().assign(graph, options), random_assignment(90, 4, 9))
    assert np.array_equal(RangePartitioner().assign(graph, options), range_assignment(90, 4))
    with pytest.raises(ValueError, match="parts"):
        RangePartitioner().assign(graph, PartitionOptions(parts=0))
