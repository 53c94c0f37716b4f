"""Sampler views: in-, out- and both-direction neighbours, edge-type filters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnncore.sampler import DenseSampler, NeighborSampler
from gnncore.sampler.orient import orient_adjacency
from gnncore.testing.graphs import node_input, random_csr

N = 40


def rows_of(indptr: np.ndarray, indices: np.ndarray) -> list[list[int]]:
    return [sorted(indices[indptr[v] : indptr[v + 1]].tolist()) for v in range(len(indptr) - 1)]


@pytest.fixture(scope="module")
def csc() -> tuple[np.ndarray, np.ndarray]:
    return random_csr(N, 200, seed=7)


def test_views_hold_the_expected_neighbours(csc) -> None:
    indptr, indices = csc
    edges = [(int(indices[e]), v) for v in range(N) for e in range(indptr[v], indptr[v + 1])]
    out_rows = [sorted(t for s, t in edges if s == v) for v in range(N)]
    both_rows = [
        sorted({s for s, t in edges if t == v} | {t for s, t in edges if s == v}) for v in range(N)
    ]
    for direction, expected in (("out", out_rows), ("both", both_rows)):
        new_indptr, new_indices, position = orient_adjacency(indptr, indices, direction)
        assert rows_of(new_indptr, new_indices) == expected
        # position points at the input entry each new entry came from
        source = np.repeat(np.arange(N), np.diff(new_indptr))
        old_target = np.repeat(np.arange(N), np.diff(indptr))[position]
        old_source = indices[position]
        pairs = {(int(a), int(b)) for a, b in zip(old_source, old_target)}
        assert all(
            (int(n), int(r)) in pairs or (int(r), int(n)) in pairs
            for n, r in zip(new_indices, source)
        )
    assert orient_adjacency(indptr, indices, "in")[2] is None  # unchanged, no copy


def test_edge_type_filter(csc) -> None:
    indptr, indices = csc
    edge_type = np.arange(len(indices)) % 3
    new_indptr, new_indices, position = orient_adjacency(indptr, indices, "in", edge_type, [1])
    assert np.all(edge_type[position] == 1)
    assert len(new_indices) == int((edge_type == 1).sum())
    with pytest.raises(ValueError, match="needs edge_type"):
        orient_adjacency(indptr, indices, "in", None, [1])
    with pytest.raises(ValueError, match="direction"):
        orient_adjacency(indptr, indices, "sideways")


@pytest.mark.parametrize("cls", [NeighborSampler, DenseSampler])
def test_samplers_sample_from_the_view(csc, cls) -> None:
    indptr, indices = csc
    sampler = cls((indptr, indices), [-1], direction="out")
    out = sampler.sample_from_nodes(node_input([3]))
    expected = sorted(v for v in range(N) if 3 in indices[indptr[v] : indptr[v + 1]].tolist())
    assert sorted(out.node[1:].tolist()) == expected  # node 3's out-neighbours
    # edge ids map back to input positions whose source is node 3
    positions = sampler.edge_permutation[out.edge]
    assert torch.all(torch.from_numpy(indices.astype(np.int64))[positions] == 3)
