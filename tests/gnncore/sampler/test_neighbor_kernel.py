"""The C++ multi-hop neighbour sampler ``_C.sample_neighbors``."""

from __future__ import annotations

import numpy as np
import pytest

from gnncore import _C
from gnncore.testing.reference import sample_neighbors_reference


def csr(num_nodes: int, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """CSR whose row ``v`` lists the sources ``u`` of the edges ``(u, v)``."""
    if not edges:
        return np.zeros(num_nodes + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    src, dst = np.asarray(edges, dtype=np.int64).T
    return csr_from_arrays(num_nodes, src, dst)


def csr_from_arrays(num_nodes: int, src: np.ndarray, dst: np.ndarray):
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


def random_csr(num_nodes: int, num_edges: int, seed: int, power: bool = False):
    """A simple random graph (no self-loops, no repeated edges); heavy-tailed if power."""
    rng = np.random.default_rng(seed)
    p = None
    if power:
        w = rng.pareto(1.5, num_nodes) + 1
        p = w / w.sum()
    src = rng.choice(num_nodes, num_edges, p=p)
    dst = rng.choice(num_nodes, num_edges, p=p)
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
    return csr_from_arrays(num_nodes, pairs[:, 0], pairs[:, 1])


def sample(indptr, indices, seeds, fanouts, seed=0, replace=False, **kw):
    return _C.sample_neighbors(
        indptr, indices, np.asarray(seeds, dtype=np.int64), fanouts, seed, replace, **kw
    )


def check_sample(indptr, indices, seeds, fanouts, out, replace=False):
    """Every structural property an output must have, whatever the random choices."""
    node, row, col, edge, num_nodes_hop, num_edges_hop = out
    for a in (node, row, col, edge):
        assert a.dtype == np.int64
    assert len(num_nodes_hop) == len(fanouts) + 1
    assert len(num_edges_hop) == len(fanouts)
    assert sum(num_nodes_hop) == len(node)
    assert sum(num_edges_hop) == len(row) == len(col) == len(edge)
    assert len(np.unique(node)) == len(node)

    _, first = np.unique(np.asarray(seeds, dtype=np.int64), return_index=True)
    unique_seeds = np.asarray(seeds, dtype=np.int64)[np.sort(first)]
    assert num_nodes_hop[0] == len(unique_seeds)
    np.testing.assert_array_equal(node[: len(unique_seeds)], unique_seeds)

    # Every emitted edge is the CSR entry `edge` of the row of node[col].
    deg = np.diff(indptr)
    targets, sources = node[col], node[row]
    assert np.all(indptr[targets] <= edge) and np.all(edge < indptr[targets + 1])
    np.testing.assert_array_equal(indices[edge], sources)

    node_bounds = np.concatenate([[0], np.cumsum(num_nodes_hop)])
    edge_bounds = np.concatenate([[0], np.cumsum(num_edges_hop)])
    for h, fanout in enumerate(fanouts):
        lo, hi = edge_bounds[h], edge_bounds[h + 1]
        frontier = np.arange(node_bounds[h], node_bounds[h + 1])
        # Hop h expands exactly the nodes first added in hop h - 1 ...
        assert np.all(np.isin(col[lo:hi], frontier))
        # ... and only reaches nodes known by the end of hop h.
        assert np.all(row[lo:hi] < node_bounds[h + 2])
        # Edges are grouped by target in frontier order.
        assert np.all(np.diff(col[lo:hi]) >= 0)
        counts = np.bincount(col[lo:hi] - node_bounds[h], minlength=len(frontier))
        d = deg[node[frontier]]
        if fanout == -1:
            expected = d
        elif replace:
            expected = np.where(d > 0, fanout, 0)
        else:
            expected = np.minimum(d, fanout)
        np.testing.assert_array_equal(counts, expected)
    if not replace:  # no CSR entry (so no neighbour of a simple graph) twice
        assert len(np.unique(edge)) == len(edge)
    # New nodes get the next local id in the order they are first reached.
    known = num_nodes_hop[0]
    for r in row.tolist():
        if r >= known:
            assert r == known
            known += 1
    assert known == len(node)


def assert_same(a, b):
    for x, y in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(x, y)
    assert a[4] == b[4] and a[5] == b[5]


# A small hand-drawn graph; edges (u, v) mean u sends a message to v.
#   0 <- 1, 2, 3     1 <- 0, 4     2 <- 3     3 <- (none)     4 <- 5, 0     5 <- 1
HAND = csr(6, [(1, 0), (2, 0), (3, 0), (0, 1), (4, 1), (3, 2), (5, 4), (0, 4), (1, 5)])


def test_hand_drawn_take_all_is_exact():
    indptr, indices = HAND
    np.testing.assert_array_equal(indptr, [0, 3, 5, 6, 6, 8, 9])
    node, row, col, edge, nn, ne = sample(indptr, indices, [0], [-1, -1])
    np.testing.assert_array_equal(node, [0, 1, 2, 3, 4])
    # hop 0: 1->0, 2->0, 3->0 ; hop 1: 0->1, 4->1, 3->2 (3 has no in-edges)
    np.testing.assert_array_equal(row, [1, 2, 3, 0, 4, 3])
    np.testing.assert_array_equal(col, [0, 0, 0, 1, 1, 2])
    np.testing.assert_array_equal(edge, [0, 1, 2, 3, 4, 5])
    assert nn == [1, 3, 1] and ne == [3, 3]


def test_hand_drawn_repeated_and_adjacent_seeds():
    indptr, indices = HAND
    out = sample(indptr, indices, [4, 0, 4, 5], [-1])
    node, row, col, edge, nn, ne = out
    np.testing.assert_array_equal(node, [4, 0, 5, 1, 2, 3])
    # 4 <- 0, 5 (both already seeds); 0 <- 1, 2, 3 (new); 5 <- 1 (now known)
    np.testing.assert_array_equal(node[row], [0, 5, 1, 2, 3, 1])
    np.testing.assert_array_equal(node[col], [4, 4, 0, 0, 0, 5])
    assert nn == [3, 3] and ne == [6]
    check_sample(indptr, indices, [4, 0, 4, 5], [-1], out)


def test_no_hops_and_no_seeds():
    indptr, indices = HAND
    node, row, col, edge, nn, ne = sample(indptr, indices, [3, 1, 3], [])
    np.testing.assert_array_equal(node, [3, 1])
    assert len(row) == len(col) == len(edge) == 0 and nn == [2] and ne == []
    node, row, col, edge, nn, ne = sample(indptr, indices, [], [2, 2])
    assert len(node) == 0 and len(row) == 0 and nn == [0, 0, 0] and ne == [0, 0]


def test_zero_fanout_and_empty_graph():
    indptr, indices = HAND
    node, row, _, _, nn, ne = sample(indptr, indices, [0, 1], [0, 5])
    np.testing.assert_array_equal(node, [0, 1])
    assert len(row) == 0 and nn == [2, 0, 0] and ne == [0, 0]
    indptr, indices = csr(3, [])
    node, row, _, _, nn, ne = sample(indptr, indices, [2], [3])
    np.testing.assert_array_equal(node, [2])
    assert nn == [1, 0] and ne == [0]


@pytest.mark.parametrize("fanouts", [[3], [5, 2], [10, 5, 3], [0, 4], [1, -1], [25, 10]])
@pytest.mark.parametrize("replace", [False, True])
def test_structure_on_random_graphs(fanouts, replace):
    indptr, indices = random_csr(2_000, 20_000, seed=len(fanouts) + 7, power=True)
    rng = np.random.default_rng(3)
    seeds = rng.choice(2_000, 300, replace=True)
    out = sample(indptr, indices, seeds, fanouts, seed=11, replace=replace)
    check_sample(indptr, indices, seeds, fanouts, out, replace=replace)
    ref = sample_neighbors_reference(indptr, indices, seeds, fanouts, rng, replace=replace)
    check_sample(indptr, indices, seeds, fanouts, ref, replace=replace)


@pytest.mark.parametrize("fanouts", [[-1, -1], "maxdeg", [-1, "maxdeg", -1]])
def test_matches_reference_when_taking_all(fanouts):
    indptr, indices = random_csr(1_500, 6_000, seed=5, power=True)
    max_deg = int(np.diff(indptr).max())
    if fanouts == "maxdeg":
        fanouts = [max_deg, max_deg + 7]
    fanouts = [max_deg if f == "maxdeg" else f for f in fanouts]
    seeds = np.random.default_rng(1).choice(1_500, 40, replace=False)
    out = sample(indptr, indices, seeds, fanouts, seed=99)
    ref = sample_neighbors_reference(indptr, indices, seeds, fanouts, np.random.default_rng(0))
    assert_same(out, ref)
    check_sample(indptr, indices, seeds, fanouts, out)


def test_reproducible_by_seed():
    indptr, indices = random_csr(3_000, 40_000, seed=2)
    seeds = np.arange(0, 3_000, 7)
    a = sample(indptr, indices, seeds, [5, 3], seed=123)
    b = sample(indptr, indices, seeds, [5, 3], seed=123)
    c = sample(indptr, indices, seeds, [5, 3], seed=124)
    assert_same(a, b)
    assert not np.array_equal(a[3], c[3])
    # Any Python int is a seed; it acts modulo 2**64.
    assert_same(
        sample(indptr, indices, seeds, [5, 3], seed=-1),
        sample(indptr, indices, seeds, [5, 3], seed=2**64 - 1),
    )


def test_independent_of_thread_count():
    # Frontiers of thousands of nodes take the parallel path.
    indptr, indices = random_csr(20_000, 200_000, seed=4, power=True)
    seeds = np.arange(0, 20_000, 3)
    for replace in (False, True):
        one = sample(indptr, indices, seeds, [8, 4], seed=5, replace=replace, num_threads=1)
        for threads in (2, 3, 8):
            many = sample(
                indptr, indices, seeds, [8, 4], seed=5, replace=replace, num_threads=threads
            )
            assert_same(one, many)
        check_sample(indptr, indices, seeds, [8, 4], one, replace=replace)


def test_int32_and_int64_indices_agree():
    indptr, indices = random_csr(2_000, 15_000, seed=8)
    seeds = np.arange(0, 2_000, 11)
    for replace in (False, True):
        a = sample(indptr, indices.astype(np.int64), seeds, [6, 4], seed=7, replace=replace)
        b = sample(indptr, indices.astype(np.int32), seeds, [6, 4], seed=7, replace=replace)
        assert_same(a, b)
    # Non-contiguous or differently typed input is copied, never narrowed.
    wide = np.repeat(indices.astype(np.int64), 2)[::2]
    assert_same(
        sample(indptr, wide, seeds, [6, 4], seed=7),
        sample(indptr, indices.astype(np.int32), seeds, [6, 4], seed=7),
    )


def test_uniform_one_of_ten_over_seeds():
    # Node 0 has ten in-neighbours 1..10; draw one of them 20k times.
    indptr, indices = csr(11, [(u, 0) for u in range(1, 11)])
    trials = 20_000
    counts = np.zeros(11, dtype=np.int64)
    seeds = np.zeros(1, dtype=np.int64)
    for s in range(trials):
        node, row, _, _, _, _ = _C.sample_neighbors(indptr, indices, seeds, [1], s)
        counts[node[row[0]]] += 1
    p = 0.1
    sigma = np.sqrt(trials * p * (1 - p))
    assert counts[0] == 0 and counts.sum() == trials
    assert np.all(np.abs(counts[1:] - trials * p) < 5 * sigma), counts


@pytest.mark.parametrize("degree,fanout", [(10, 3), (100, 70), (1_000, 70), (50, 49), (40, 1)])
def test_uniform_inclusion_across_algorithms(degree, fanout):
    # Many targets share one neighbour list; each target has its own generator.
    # The cases cover Floyd's scan, partial Fisher-Yates and Floyd with a hash set.
    targets = 4_000 if degree <= 100 else 400
    src = np.tile(np.arange(targets, targets + degree), targets)
    dst = np.repeat(np.arange(targets), degree)
    indptr, indices = csr_from_arrays(targets + degree, src, dst)
    node, row, col, edge, _, _ = sample(indptr, indices, np.arange(targets), [fanout], seed=1)
    check_sample(
        indptr,
        indices,
        np.arange(targets),
        [fanout],
        (node, row, col, edge, [targets, len(node) - targets], [len(row)]),
    )
    counts = np.bincount(node[row] - targets, minlength=degree)
    p = fanout / degree
    trials = targets
    sigma = np.sqrt(trials * p * (1 - p))
    assert np.all(np.abs(counts - trials * p) < 5 * sigma), counts


def test_with_replacement_repeats():
    indptr, indices = csr(4, [(1, 0), (2, 0)])
    node, row, col, edge, nn, ne = sample(indptr, indices, [0], [50], seed=3, replace=True)
    assert ne == [50]
    assert set(node[row].tolist()) == {1, 2}
    # -1 still takes every neighbour once.
    node, row, _, _, _, ne = sample(indptr, indices, [0], [-1], seed=3, replace=True)
    assert ne == [2] and sorted(node[row].tolist()) == [1, 2]


def test_bad_inputs_raise():
    indptr, indices = HAND
    with pytest.raises(IndexError, match="seeds\\[1\\] = 6"):
        sample(indptr, indices, [0, 6], [2])
    with pytest.raises(IndexError, match="outside"):
        sample(indptr, indices, [-1], [2])
    with pytest.raises(ValueError, match="fanouts\\[1\\] = -2"):
        sample(indptr, indices, [0], [2, -2])
    with pytest.raises(ValueError, match="indptr"):
        sample(np.zeros(0, dtype=np.int64), indices, [], [2])
    with pytest.raises(ValueError, match="end at len\\(indices\\)"):
        sample(indptr[:-1], indices, [0], [2])
    with pytest.raises(ValueError, match="non-decreasing"):
        bad = indptr.copy()
        bad[1] = 10
        sample(bad, indices, [0], [2])
    with pytest.raises(IndexError, match="indices\\[1\\] = 9"):
        broken = indices.copy()
        broken[1] = 9
        sample(indptr, broken, [0], [-1])
    with pytest.raises(TypeError):
        sample(indptr, indices, [0], [2], seed="x")
