"""gnncore.sampler.NeighborSampler: the PyG BaseSampler over _C.sample_neighbors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NodeSamplerInput

from conftest import planted_graph
from gnncore.sampler import NeighborSampler
from gnncore.store import GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.testing.graphs import node_input, random_csr
from gnncore.testing.reference import sample_neighbors_reference


def check_output(
    indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray, fanouts: list[int], out
) -> None:
    node, row, col, edge = (t.numpy() for t in (out.node, out.row, out.col, out.edge))
    assert all(t.dtype == torch.long for t in (out.node, out.row, out.col, out.edge))
    np.testing.assert_array_equal(node[: len(seeds)], seeds)  # seeds first
    assert len(np.unique(node)) == len(node)
    assert sum(out.num_sampled_nodes) == len(node)
    assert sum(out.num_sampled_edges) == len(row) == len(col) == len(edge)
    # every sampled edge is a real edge, at its CSR position
    np.testing.assert_array_equal(indices[edge], node[row])
    targets = node[col]
    assert np.all((indptr[targets] <= edge) & (edge < indptr[targets + 1]))
    # fan-out bounds per hop, and hop h only expands nodes first seen at hop h - 1
    start, begin = 0, 0
    for hop, (count, fanout) in enumerate(zip(out.num_sampled_edges, fanouts)):
        cols = col[start : start + count]
        end = begin + out.num_sampled_nodes[hop]
        assert np.all((begin <= cols) & (cols < end))
        if fanout >= 0:
            assert np.bincount(cols).max(initial=0) <= fanout
        begin, start = end, start + count


def test_full_fanout_equals_the_reference_exactly() -> None:
    indptr, indices = random_csr(60, 300, seed=1)
    seeds = np.array([3, 17, 0, 42])
    max_degree = int(np.diff(indptr).max())
    for fanouts in ([-1, -1], [max_degree, max_degree, -1]):
        out = NeighborSampler((indptr, indices), fanouts, seed=5).sample_from_nodes(
            node_input(seeds)
        )
        ref = sample_neighbors_reference(indptr, indices, seeds, fanouts, np.random.default_rng(0))
        for got, want in zip((out.node, out.row, out.col, out.edge), ref[:4]):
            np.testing.assert_array_equal(got.numpy(), want)
        assert out.num_sampled_nodes == ref[4] and out.num_sampled_edges == ref[5]
        check_output(indptr, indices, seeds, fanouts, out)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_small_fanout_invariants(index_dtype: type) -> None:
    indptr, indices = random_csr(200, 3000, seed=2)
    indices = indices.astype(index_dtype)
    sampler = NeighborSampler((torch.from_numpy(indptr), torch.from_numpy(indices)), [3, 2])
    seeds = np.array([5, 150, 7, 99, 0])
    for _ in range(3):
        out = sampler.sample_from_nodes(node_input(seeds))
        check_output(indptr, indices, seeds, [3, 2], out)
        assert out.num_sampled_edges[0] == 3 * len(seeds)  # every seed has degree >= 3
        input_id, time = out.metadata
        assert torch.equal(input_id, torch.arange(len(seeds))) and time is None
    assert sampler.num_batches == 3


def test_same_seed_same_batches_and_batches_differ() -> None:
    indptr, indices = random_csr(300, 6000, seed=3)
    seeds = node_input(np.arange(0, 300, 7))

    def run(seed: int) -> list[np.ndarray]:
        sampler = NeighborSampler((indptr, indices), [4, 4], seed=seed)
        return [sampler.sample_from_nodes(seeds).edge.numpy() for _ in range(3)]

    first, again, other = run(0), run(0), run(1)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # the batch counter changes the draw
    assert not np.array_equal(first[0], other[0])


def test_from_graph_store_matches_arrays(tmp_path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=150, features=4))
    from_store = NeighborSampler(GraphDirGraphStore(graph), [5, 5], seed=9)
    from_arrays = NeighborSampler((graph.indptr, graph.indices), [5, 5], seed=9)
    assert from_store.edge_permutation is None
    seeds = node_input([1, 2, 3, 100])
    a, b = from_store.sample_from_nodes(seeds), from_arrays.sample_from_nodes(seeds)
    for name in ("node", "row", "col", "edge"):
        assert torch.equal(getattr(a, name), getattr(b, name))


def test_rejects_bad_input() -> None:
    indptr, indices = random_csr(20, 60, seed=4)
    sampler = NeighborSampler((indptr, indices), [2])
    assert isinstance(sampler, BaseSampler)
    with pytest.raises(ValueError, match="repeats a seed"):
        sampler.sample_from_nodes(node_input([1, 2, 1]))
    with pytest.raises(ValueError, match="homogeneous"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([1]), input_type="p"))
    with pytest.raises(ValueError, match="homogeneous"):
        sampler.sample_from_edges(
            EdgeSamplerInput(
                None, torch.tensor([0]), torch.tensor([1]), input_type=("p", "to", "p")
            )
        )
    with pytest.raises(ValueError, match="fanouts"):
        NeighborSampler((indptr, indices), [])
    with pytest.raises(ValueError, match="indptr ends"):
        NeighborSampler((indptr, indices[:-1]), [2])


def test_node_loader_over_graph_dir_stores(tmp_path) -> None:
    graph = GraphDir.open(planted_graph(tmp_path / "g", num_nodes=200, features=5))
    features, topology = GraphDirFeatureStore(graph), GraphDirGraphStore(graph)
    x, y = np.asarray(graph.features()), np.asarray(graph.labels())
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    train = torch.from_numpy(graph.split("train").copy())
    loader = NodeLoader(
        data=(features, topology),
        node_sampler=NeighborSampler(topology, [4, 3], seed=0),
        input_nodes=train,
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    seen = []
    for batch in loader:
        n_id = batch.n_id.numpy()
        assert batch.batch_size == len(batch.input_id) <= 16
        np.testing.assert_array_equal(n_id[: batch.batch_size], train[batch.input_id].numpy())
        np.testing.assert_array_equal(batch.x.numpy(), x[n_id])
        np.testing.assert_array_equal(batch.y.numpy(), y[n_id])
        src, dst = n_id[batch.edge_index[0].numpy()], n_id[batch.edge_index[1].numpy()]
        e_id = batch.e_id.numpy()  # CSR positions
        np.testing.assert_array_equal(indices[e_id], src)
        assert np.all((indptr[dst] <= e_id) & (e_id < indptr[dst + 1]))
        assert sum(batch.num_sampled_nodes) == batch.num_nodes
        seen.append(batch.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(len(train)))
