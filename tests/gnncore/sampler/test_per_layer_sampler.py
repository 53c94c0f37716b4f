"""gnncore.sampler.PerLayerSampler, _C.sample_per_layer and build_sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GraphSAGE

from conftest import assert_batch_matches_graph, planted_graph
from gnncore import _C
from gnncore.sampler import (
    SAMPLER_MODES,
    DenseSampler,
    NeighborSampler,
    PerLayerSampler,
    build_sampler,
)
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.testing.graphs import node_input, random_csr
from gnncore.testing.per_layer_reference import (
    sample_per_layer_reference,
    sample_row_reference,
)


def assert_same(a, b) -> None:
    for x, y in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(x, y)
    assert list(a[4]) == list(b[4]) and list(a[5]) == list(b[5])


def check_per_layer(
    indptr: np.ndarray, indices: np.ndarray, seeds, fanouts: list[int], out, replace: bool = False
) -> None:
    """Every structural property of a per-layer sample, whatever the draws."""
    node, row, col, edge, nn, ne = out
    seeds = np.asarray(seeds, dtype=np.int64)
    _, first = np.unique(seeds, return_index=True)
    unique_seeds = seeds[np.sort(first)]
    np.testing.assert_array_equal(node[: len(unique_seeds)], unique_seeds)  # seeds first
    assert nn[0] == len(unique_seeds)
    assert len(nn) == len(fanouts) + 1 and len(ne) == len(fanouts)
    assert len(np.unique(node)) == len(node) == sum(nn)  # deduplicated
    assert len(row) == len(col) == len(edge) == sum(ne)
    np.testing.assert_array_equal(indices[edge], node[row])  # every edge is real
    targets = node[col]
    assert np.all((indptr[targets] <= edge) & (edge < indptr[targets + 1]))
    degree = np.diff(indptr)
    node_end = np.cumsum(nn)
    edge_bounds = np.concatenate([[0], np.cumsum(ne)])
    for hop, fanout in enumerate(fanouts):
        lo, hi = edge_bounds[hop], edge_bounds[hop + 1]
        known = node_end[hop]  # nodes known before the hop: all of them are expanded
        cols, rows = col[lo:hi], row[lo:hi]
        assert np.all(np.diff(cols) >= 0)  # grouped by target in local-id order
        assert np.all(cols < known) and np.all(rows < node_end[hop + 1])  # trim_to_layer
        want = degree[node[:known]]
        if fanout >= 0:
            want = np.where(want > 0, fanout, 0) if replace else np.minimum(want, fanout)
        np.testing.assert_array_equal(np.bincount(cols, minlength=known), want)
        if not replace:
            assert len(np.unique(edge[lo:hi])) == hi - lo  # distinct within a hop
        # new nodes of this hop are numbered in first-seen order
        fresh = rows[rows >= known]
        _, first_seen = np.unique(fresh, return_index=True)
        np.testing.assert_array_equal(
            fresh[np.sort(first_seen)], np.arange(known, node_end[hop + 1])
        )


# degree ~47: Floyd's scan; degree ~230 with fanout 70: partial Fisher-Yates;
# degree ~330 with fanout 70: Floyd with a hash set.
@pytest.mark.parametrize(
    "graph,fanouts",
    [
        ((400, 20_000), [3, 2]),
        ((400, 20_000), [5, 0, -1]),
        ((400, 20_000), [10, 4, 2]),
        ((300, 200_000), [70, 2]),
        ((1_000, 400_000), [70, 1]),
    ],
)
@pytest.mark.parametrize("replace", [False, True])
def test_kernel_equals_the_reference_exactly(graph, fanouts, replace) -> None:
    indptr, indices = random_csr(*graph, seed=len(fanouts) + fanouts[0])
    seeds = np.array([5, 3, 5, 100, 7, 250])
    for batch_seed in (0, 42, -1):
        got = _C.sample_per_layer(indptr, indices, seeds, fanouts, batch_seed, replace)
        want = sample_per_layer_reference(indptr, indices, seeds, fanouts, batch_seed, replace)
        assert_same(got, want)
        check_per_layer(indptr, indices, seeds, fanouts, got, replace)


@pytest.mark.parametrize("fanouts", [[4, 3, 2], [70, 2]])
def test_dense_and_hop_wise_kernels_equal_the_reference_without_resampling(fanouts) -> None:
    indptr, indices = random_csr(300, 200_000 if fanouts[0] > 64 else 3_000, seed=10)
    seeds = np.array([9, 4, 9, 250, 0])
    for batch_seed in (1, 77):
        want = sample_per_layer_reference(
            indptr, indices, seeds, fanouts, batch_seed, resample=False
        )
        assert_same(_C.sample_dense_pyg(indptr, indices, seeds, fanouts, batch_seed), want)
        assert_same(_C.sample_neighbors(indptr, indices, seeds, fanouts, batch_seed), want)


def test_reference_draws_are_the_shared_kernel_draws() -> None:
    # Hop 0 expands the seeds in every sampler, each seed from node_rng(seed, 0, i).
    indptr, indices = random_csr(300, 200_000, seed=3)
    seeds = np.arange(0, 300, 3)
    for fanout in (4, 70):
        first = _C.sample_neighbors(indptr, indices, seeds, [fanout], 9)
        per_layer = _C.sample_per_layer(indptr, indices, seeds, [fanout], 9)
        assert_same(first, per_layer)
        rows = [
            np.asarray(sample_row_reference(9, 0, i, int(indptr[s + 1] - indptr[s]), fanout, False))
            + indptr[s]
            for i, s in enumerate(seeds)
        ]
        np.testing.assert_array_equal(per_layer[3], np.concatenate(rows))


def test_hand_drawn_take_all() -> None:
    # edges (u, v): 0 <- 1, 2   1 <- 0, 3   2 <- 0   3 <- 1
    src = np.array([1, 2, 0, 3, 0, 1])
    dst = np.array([0, 0, 1, 1, 2, 3])
    order = np.lexsort((src, dst))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=4))])
    indices = src[order]
    node, row, col, edge, nn, ne = _C.sample_per_layer(indptr, indices, np.array([0]), [-1, -1], 0)
    np.testing.assert_array_equal(node, [0, 1, 2, 3])
    assert nn == [1, 2, 1] and ne == [2, 5]
    # hop 0: the row of 0; hop 1: the rows of 0 (again), 1 and 2
    np.testing.assert_array_equal(node[col], [0, 0, 0, 0, 1, 1, 2])
    np.testing.assert_array_equal(node[row], [1, 2, 1, 2, 0, 3, 0])
    np.testing.assert_array_equal(edge, [0, 1, 0, 1, 2, 3, 4])


def test_full_fanout_re_samples_what_dense_samples_once() -> None:
    # With every fanout -1 both reach the same nodes; hop h of per-layer holds
    # the rows of all nodes known before it, i.e. DENSE's edges of hops <= h.
    indptr, indices = random_csr(500, 2_000, seed=4)
    seeds = np.array([10, 20, 30])
    dense = _C.sample_dense_pyg(indptr, indices, seeds, [-1, -1, -1], 1)
    per_layer = _C.sample_per_layer(indptr, indices, seeds, [-1, -1, -1], 1)
    np.testing.assert_array_equal(dense[0], per_layer[0])
    assert dense[4] == per_layer[4]
    dense_bounds = np.cumsum([0, *dense[5]])
    pl_bounds = np.cumsum([0, *per_layer[5]])
    for hop in range(3):
        want = np.sort(dense[3][: dense_bounds[hop + 1]])
        np.testing.assert_array_equal(
            np.sort(per_layer[3][pl_bounds[hop] : pl_bounds[hop + 1]]), want
        )
    assert sum(per_layer[5]) > sum(dense[5])


def test_determinism_and_thread_count_independence() -> None:
    indptr, indices = random_csr(20_000, 200_000, seed=5)
    seeds = np.arange(0, 20_000, 7)  # frontiers of thousands: the parallel path
    for replace in (False, True):
        one = _C.sample_per_layer(indptr, indices, seeds, [8, 4], 5, replace, num_threads=1)
        for threads in (2, 3, 8):
            assert_same(
                one,
                _C.sample_per_layer(
                    indptr, indices, seeds, [8, 4], 5, replace, num_threads=threads
                ),
            )
        check_per_layer(indptr, indices, seeds, [8, 4], one, replace)
        other = _C.sample_per_layer(indptr, indices, seeds, [8, 4], 6, replace)
        assert not np.array_equal(one[3], other[3])
    a = PerLayerSampler((indptr, indices), [6, 3], seed=3, num_threads=1)
    b = PerLayerSampler((indptr, indices), [6, 3], seed=3, num_threads=3)
    for _ in range(2):
        x, y = a.sample_from_nodes(node_input(seeds)), b.sample_from_nodes(node_input(seeds))
        for field in ("node", "row", "col", "edge"):
            assert torch.equal(getattr(x, field), getattr(y, field))
        assert x.num_sampled_nodes == y.num_sampled_nodes
    # the next batch draws differently
    assert not torch.equal(a.sample_from_nodes(node_input(seeds)).edge, x.edge)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_sampler_output(index_dtype: type) -> None:
    indptr, indices = random_csr(3_000, 40_000, seed=6)
    indices = indices.astype(index_dtype)
    seeds = np.array([4, 1_500, 7, 2_999, 0])
    fanouts = [5, 3, 2]
    out = PerLayerSampler((indptr, indices), fanouts, seed=2).sample_from_nodes(node_input(seeds))
    fields = tuple(t.numpy() for t in (out.node, out.row, out.col, out.edge))
    check_per_layer(
        indptr, indices, seeds, fanouts, (*fields, out.num_sampled_nodes, out.num_sampled_edges)
    )
    # it samples more edges than DENSE: the earlier hops' nodes are sampled again
    dense = DenseSampler((indptr, indices), fanouts, seed=2).sample_from_nodes(node_input(seeds))
    assert sum(out.num_sampled_edges) > sum(dense.num_sampled_edges)


def test_rejects_bad_input() -> None:
    indptr, indices = random_csr(20, 60, seed=7)
    with pytest.raises(IndexError):
        _C.sample_per_layer(indptr, indices, np.array([20]), [2], 0)
    with pytest.raises(ValueError):
        _C.sample_per_layer(indptr, indices, np.array([0]), [-2], 0)
    with pytest.raises(ValueError):
        _C.sample_per_layer(indptr[:-1], indices, np.array([0]), [2], 0)
    broken = indices.astype(np.int64).copy()
    broken[:] = 20
    with pytest.raises(IndexError):
        _C.sample_per_layer(indptr, broken, np.arange(20), [-1], 0)
    # the ids the failed batch had mapped are forgotten
    assert_same(
        _C.sample_per_layer(indptr, indices, np.arange(19, -1, -1), [3, 2], 0),
        sample_per_layer_reference(indptr, indices, np.arange(19, -1, -1), [3, 2], 0),
    )
    with pytest.raises(ValueError, match="repeats a seed"):
        PerLayerSampler((indptr, indices), [2]).sample_from_nodes(node_input([1, 1]))


def test_build_sampler() -> None:
    indptr, indices = random_csr(50, 300, seed=8)
    assert SAMPLER_MODES == ("dense", "per-layer")
    dense = build_sampler("dense", (indptr, indices), [3, 2], seed=4, num_threads=1)
    per_layer = build_sampler("per-layer", (indptr, indices), [3, 2], seed=4, replace=True)
    assert type(dense) is DenseSampler and type(per_layer) is PerLayerSampler
    assert isinstance(per_layer, NeighborSampler)
    assert dense.fanouts == [3, 2] and dense.seed == 4 and dense.num_threads == 1
    assert per_layer.replace and per_layer.seed == 4
    with pytest.raises(ValueError, match="'dense', 'per-layer'"):
        build_sampler("dgl", (indptr, indices), [3])
    with pytest.raises(TypeError):  # DENSE samples without replacement only
        build_sampler("dense", (indptr, indices), [3], replace=True)


def test_graphsage_trimmed_forward(tmp_path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=300, features=6))
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    train = torch.from_numpy(graph.split("train").copy())
    loader = NodeLoader(
        data=(features, topology),
        node_sampler=build_sampler("per-layer", topology, [5, 4, 3], seed=0),
        input_nodes=train,
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    torch.manual_seed(0)
    model = GraphSAGE(6, 8, 3, out_channels=4).eval()
    batches = 0
    for batch in loader:
        assert_batch_matches_graph(batch, graph, train)
        with torch.no_grad():
            trimmed = model(
                batch.x,
                batch.edge_index,
                num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                num_sampled_edges_per_hop=batch.num_sampled_edges,
            )
        # the last layer runs on the seeds and the nodes first reached at hop 1
        assert trimmed.shape == (batch.num_sampled_nodes[0] + batch.num_sampled_nodes[1], 4)
        assert torch.isfinite(trimmed).all()
        batches += 1
    assert batches == (len(train) + 15) // 16


@pytest.fixture
def hashed_ids():
    """Makes the samplers map ids through the hash map, not the direct array."""
    previous = _C.set_sampler_direct_map_limit(0)
    yield
    _C.set_sampler_direct_map_limit(previous)


def test_hash_and_direct_id_maps_agree(hashed_ids) -> None:
    indptr, indices = random_csr(3_000, 30_000, seed=9)
    seeds = np.array([7, 2_000, 7, 13, 2_999, 0])
    fanouts = [6, 3, 2]
    hashed = [
        f(indptr, indices, seeds, fanouts, 4)
        for f in (_C.sample_per_layer, _C.sample_neighbors, _C.sample_dense_pyg, _C.sample_dense)
    ]
    assert_same(hashed[0], sample_per_layer_reference(indptr, indices, seeds, fanouts, 4))
    _C.set_sampler_direct_map_limit(1 << 26)
    direct = [
        f(indptr, indices, seeds, fanouts, 4)
        for f in (_C.sample_per_layer, _C.sample_neighbors, _C.sample_dense_pyg, _C.sample_dense)
    ]
    for a, b in zip(hashed, direct):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
