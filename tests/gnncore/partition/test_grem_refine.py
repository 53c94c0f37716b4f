"""GREM's final k-way refinement (gnncore.partition.grem.refine): size-constrained
label propagation over the whole partition, streamed over the CSR in blocks."""

from __future__ import annotations

import numpy as np
import pytest

from gnncore import _C
from gnncore.partition import PartitionOptions, partition_metrics
from gnncore.partition.grem import GreedyPartitioner, GremPartitioner
from gnncore.partition.grem.refine import csr_blocks, refine_kway
from gnncore.partition.metrics import max_part_size
from gnncore.store import GraphDir, create_graph_dir
from gnncore.synth import SynthSpec, generate_graph


def lp_reference(indptr, indices, labels, sizes, cap):
    """The sweep, literally: node by node in row order, counts by dict."""
    labels, sizes = labels.copy(), sizes.copy()
    moves = gain = 0
    for v in range(len(indptr) - 1):
        count: dict[int, int] = {}
        for u in indices[indptr[v] : indptr[v + 1]]:
            if u != v:
                count[int(labels[u])] = count.get(int(labels[u]), 0) + 1
        own = int(labels[v])
        if sizes[own] <= 1:  # the last node of its part stays
            continue
        room = [q for q in count if q != own and sizes[q] < cap]
        if not room:
            continue
        best = max(room, key=lambda q: (count[q], -sizes[q], -room.index(q)))
        better = count[best] > count.get(own, 0)
        lighter = count[best] == count.get(own, 0) and sizes[best] + 2 <= sizes[own]
        if better or lighter:
            gain += count[best] - count.get(own, 0)
            moves += 1
            sizes[own] -= 1
            sizes[best] += 1
            labels[v] = best
    return labels, sizes, moves, gain


def symmetric_csr(n: int, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    both = np.concatenate([pairs, pairs[:, ::-1]])
    both = np.unique(both[both[:, 0] != both[:, 1]], axis=0)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, both[:, 0] + 1, 1)
    return np.cumsum(indptr), both[:, 1].copy()


def cut_edges(indptr, indices, labels) -> int:
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return int(np.count_nonzero(labels[rows] != labels[indices])) // 2


def test_a_misplaced_node_moves_unless_its_part_is_full():
    # two triangles {0,1,2} and {3,4,5}; node 2 sits in part 1 with 3, 4, 5
    indptr, indices = symmetric_csr(6, np.array([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5]]))
    labels = np.array([0, 0, 1, 1, 1, 1], dtype=np.int64)
    sizes = np.array([2, 4], dtype=np.int64)
    moves, gain = _C.grem_kway_lp_block(indptr, indices, 0, labels, sizes, 4)
    assert (moves, gain) == (1, 2) and labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert sizes.tolist() == [3, 3]
    full = np.array([0, 0, 1, 1, 1, 1], dtype=np.int64)
    full_sizes = np.array([2, 4], dtype=np.int64)  # cap 2: part 0 has no room
    assert _C.grem_kway_lp_block(indptr, indices, 0, full, full_sizes, 2) == (0, 0)
    assert full.tolist() == [0, 0, 1, 1, 1, 1]
    # node 0 alone in part 0, all its neighbours in part 1: it stays (moving would
    # empty part 0), and its triangle then joins it by ties towards the lighter part
    last = np.array([0, 1, 1, 1, 1, 1], dtype=np.int64)
    last_sizes = np.array([1, 5], dtype=np.int64)
    _C.grem_kway_lp_block(indptr, indices, 0, last, last_sizes, 6)
    assert last.tolist() == [0, 0, 0, 1, 1, 1] and last_sizes.tolist() == [3, 3]


@pytest.mark.parametrize("label_dtype", [np.int64, np.int8, np.int16])
@pytest.mark.parametrize("trial", range(4))
def test_sweep_matches_the_literal_reference(trial, label_dtype):
    rng = np.random.default_rng(trial)
    n, parts = 300, 2 + trial
    indptr, indices = symmetric_csr(n, rng.integers(0, n, size=(900, 2)))
    labels = rng.integers(0, parts, size=n).astype(np.int64)
    sizes = np.bincount(labels, minlength=parts).astype(np.int64)
    cap = int(sizes.max()) + 3
    expected = lp_reference(indptr, indices, labels, sizes, cap)
    got_labels, got_sizes = labels.astype(label_dtype), sizes.copy()
    moves, gain = _C.grem_kway_lp_block(
        indptr, indices.astype(np.int32), 0, got_labels, got_sizes, cap
    )
    assert got_labels.dtype == label_dtype  # updated in place, in the width given
    assert np.array_equal(got_labels, expected[0]) and np.array_equal(got_sizes, expected[1])
    assert (moves, gain) == expected[2:] and moves > 0
    assert cut_edges(indptr, indices, labels) - cut_edges(indptr, indices, got_labels) == gain
    assert got_sizes.max() <= cap and np.array_equal(
        got_sizes, np.bincount(got_labels, minlength=parts)
    )


def test_clusters_stay_inside_their_parts_and_under_the_weight():
    rng = np.random.default_rng(7)
    n = 400
    indptr, indices = symmetric_csr(n, rng.integers(0, n, size=(1600, 2)))
    labels = rng.integers(0, 3, size=n).astype(np.int64)
    cluster, weight = np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    scratch = np.zeros(n, dtype=np.int64)
    moves = sum(
        _C.grem_kway_cluster_block(indptr, indices, 0, labels, cluster, weight, 5, scratch)
        for _ in range(3)
    )
    assert moves > 0 and not scratch.any()
    assert np.array_equal(np.bincount(cluster, minlength=n), weight) and weight.max() <= 5
    for c in np.unique(cluster):
        assert len(np.unique(labels[cluster == c])) == 1  # never across two parts
    assert len(np.unique(cluster)) < n // 2


def test_weighted_sweep_moves_a_heavy_node_only_where_it_fits():
    # node 0 (weight 3) is tied to node 1 (part 1) by weight 5, to node 2 (part 0) by 1
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    indices, weights = np.array([1, 2, 0, 0], dtype=np.int64), np.array([5, 1, 5, 1], np.int64)
    node_weight = np.array([3, 1, 1], dtype=np.int64)
    for cap, expected in ((4, [1, 1, 0]), (3, [0, 1, 0])):
        labels, sizes = np.array([0, 1, 0], dtype=np.int64), np.array([4, 1], dtype=np.int64)
        got = _C.grem_kway_lp_weighted(indptr, indices, weights, node_weight, labels, sizes, cap)
        assert labels.tolist() == expected
        assert got == ((1, 4) if cap == 4 else (0, 0)) and sizes.sum() == 5


def test_coarse_csr_holds_each_pair_in_both_rows():
    k = 5
    keys = np.array([0 * k + 1, 0 * k + 4, 2 * k + 3, 3 * k + 4], dtype=np.int64)
    counts = np.array([7, 1, 2, 3], dtype=np.int64)
    indptr, heads, weights = _C.grem_coarse_csr(keys, counts, k)
    spans = [slice(indptr[a], indptr[a + 1]) for a in range(k)]
    rows = {a: sorted(zip(heads[s].tolist(), weights[s].tolist())) for a, s in enumerate(spans)}
    assert rows == {0: [(1, 7), (4, 1)], 1: [(0, 7)], 2: [(3, 2)], 3: [(2, 2), (4, 3)],
                    4: [(0, 1), (3, 3)]}  # fmt: skip
    with pytest.raises(IndexError):
        _C.grem_coarse_csr(np.array([k * k], dtype=np.int64), counts[:1], k)


def test_bad_blocks_are_refused():
    indptr, indices = symmetric_csr(3, np.array([[0, 1], [1, 2]]))
    labels, sizes = np.zeros(3, dtype=np.int64), np.array([3, 0], dtype=np.int64)
    with pytest.raises(IndexError):
        _C.grem_kway_lp_block(indptr, indices, 1, labels, sizes, 3)  # rows past the labels
    with pytest.raises(IndexError):
        _C.grem_kway_lp_block(indptr, indices, 0, np.full(3, 5, dtype=np.int64), sizes, 3)
    with pytest.raises(ValueError):
        _C.grem_kway_lp_block(indptr, indices[:-1], 0, labels, sizes, 3)
    many = np.zeros(200, dtype=np.int64)  # 200 parts do not fit int8 labels
    with pytest.raises(ValueError, match="cannot hold every part"):
        _C.grem_kway_lp_block(indptr, indices, 0, labels.astype(np.int8), many, 3)


@pytest.fixture(scope="module")
def bipartite(tmp_path_factory) -> GraphDir:
    out = tmp_path_factory.mktemp("bip") / "g"
    spec = SynthSpec(num_nodes=4000, avg_degree=6, num_classes=2, num_features=2, seed=4,
                     model="bipartite", power_law_exponent=2.3)  # fmt: skip
    generate_graph(out, spec, memory_budget=None)
    return GraphDir.open(out)


def test_blocks_cover_the_csr_and_any_blocking_gives_the_same_labels(bipartite):
    indptr, indices = np.asarray(bipartite.indptr), np.asarray(bipartite.indices)
    blocks = list(csr_blocks(bipartite.path, 1000))
    assert len(blocks) > 10 and all(len(i) <= 1000 for _, _, i in blocks)
    assert np.array_equal(np.concatenate([i for _, _, i in blocks]), indices)
    assert [b[0] for b in blocks] == sorted({b[0] for b in blocks}) and blocks[0][0] == 0
    labels = np.random.default_rng(0).integers(0, 4, bipartite.num_nodes).astype(np.int64)
    cap = max_part_size(bipartite.num_nodes, 4, 0.03)
    small, large = labels.copy(), labels.copy()
    r_small = refine_kway(bipartite.path, small, 4, cap, max_passes=3, block_entries=500)
    r_large = refine_kway(bipartite.path, large, 4, cap, max_passes=3, block_entries=1 << 22)
    assert np.array_equal(small, large) and r_small.moves == r_large.moves
    assert r_small.coarse_gains == r_large.coarse_gains and r_small.clusters > 0
    nodes_only = labels.copy()
    refine_kway(bipartite.path, nodes_only, 4, cap, max_passes=3, coarse=False)
    cuts = [cut_edges(indptr, indices, x) for x in (labels, nodes_only, small)]
    assert cuts[0] > cuts[1] > cuts[2]  # the coarse level cuts less again
    assert np.bincount(small, minlength=4).max() <= cap


def test_bigger_graphs_get_the_node_passes_only(bipartite, monkeypatch):
    from gnncore.partition.grem import refine as grem_refine

    monkeypatch.setattr(grem_refine, "COARSE_MAX_EDGES", 1000)
    labels = np.random.default_rng(1).integers(0, 4, bipartite.num_nodes).astype(np.int64)
    record = refine_kway(bipartite.path, labels, 4, max_part_size(bipartite.num_nodes, 4, 0.03))
    assert record.clusters == 0 and not record.coarse_moves and sum(record.gains) > 0


@pytest.mark.parametrize("parts", [4, 8])
def test_grem_refined_cuts_less_within_the_cap(bipartite, parts):
    options = PartitionOptions(parts=parts)
    plain = GremPartitioner(final_passes=0).assign(bipartite, options)
    refined_partitioner = GremPartitioner()
    refined = refined_partitioner.assign(bipartite, options)
    before, after = (partition_metrics(bipartite, x, parts) for x in (plain, refined))
    assert after.edge_cut_fraction < before.edge_cut_fraction - 0.02
    assert max(after.part_sizes) <= max_part_size(bipartite.num_nodes, parts, 0.03)
    assert min(after.part_sizes) > 0
    record = refined_partitioner.last_refine
    assert record is not None and record.passes >= 1 and sum(record.gains) > 0
    assert 0 < record.clusters < bipartite.num_nodes and record.coarse_moves
    assert np.array_equal(refined, GremPartitioner().assign(bipartite, options))


def test_greedy_zero_passes_and_directed_graphs_run_no_refinement(tmp_path):
    with create_graph_dir(tmp_path / "g", name="two") as w:
        w.write_topology(4, np.array([0, 2]), np.array([1, 3]), directed=False)
    graph = GraphDir.open(tmp_path / "g")
    for partitioner in (GreedyPartitioner(), GremPartitioner(final_passes=0)):
        partitioner.assign(graph, PartitionOptions(parts=2))
        assert partitioner.final_passes == 0 and partitioner.last_refine is None
    with create_graph_dir(tmp_path / "d", name="directed") as w:
        w.write_topology(6, np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4]), directed=True)
    partitioner = GremPartitioner()  # a directed CSR is not symmetric: no refinement
    partitioner.assign(GraphDir.open(tmp_path / "d"), PartitionOptions(parts=2))
    assert partitioner.final_passes == 8 and partitioner.last_refine is None
    with pytest.raises(ValueError, match="final_passes"):
        GremPartitioner(final_passes=-1)
