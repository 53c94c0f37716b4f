"""Edge-based sampling for LinkLoader, negative draws and the known-edge set."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.loader import LinkLoader
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling

from gnncore.sampler import DenseSampler, KnownEdges, NegativeDraw, NeighborSampler
from gnncore.sampler.negative import degree_weights
from gnncore.store import CSCGraphStore, EmptyFeatureStore
from gnncore.testing.graphs import random_csr

NUM_NODES = 60


@pytest.fixture(scope="module")
def csr() -> tuple[np.ndarray, np.ndarray]:
    return random_csr(NUM_NODES, 400, seed=3)


def graph_edges(indptr: np.ndarray, indices: np.ndarray) -> set[tuple[int, int]]:
    """``(source, target)`` of every adjacency entry."""
    return {
        (int(indices[e]), v)
        for v in range(len(indptr) - 1)
        for e in range(indptr[v], indptr[v + 1])
    }


def loader(csr, sampler_cls, mode: str, amount: int = 2, **kw) -> tuple[LinkLoader, torch.Tensor]:
    indptr, indices = csr
    store = CSCGraphStore(indptr, indices)
    sampler = sampler_cls(store, [3, 2], seed=5)
    rng = np.random.default_rng(0)
    pairs = torch.from_numpy(rng.integers(0, NUM_NODES, (2, 50)))
    return LinkLoader(
        (EmptyFeatureStore(), store),
        sampler,
        edge_label_index=(None, pairs),
        neg_sampling=NegativeSampling(mode, amount, **kw),
        batch_size=16,
    ), pairs


@pytest.mark.parametrize("sampler_cls", [NeighborSampler, DenseSampler])
def test_triplet_batches_point_at_the_input_edges(csr, sampler_cls) -> None:
    link_loader, pairs = loader(csr, sampler_cls, "triplet", amount=3)
    edges = graph_edges(*csr)
    seen = []
    for batch in link_loader:
        n_id = batch.n_id
        heads, tails = pairs[:, batch.input_id]
        assert torch.equal(n_id[batch.src_index], heads)
        assert torch.equal(n_id[batch.dst_pos_index], tails)
        assert batch.dst_neg_index.shape == (len(batch.input_id), 3)
        # seeds are the unique endpoints and negatives, sorted, first in n_id
        seeds = n_id[: batch.num_sampled_nodes[0]]
        expected = torch.unique(torch.cat([heads, tails, n_id[batch.dst_neg_index].reshape(-1)]))
        assert torch.equal(seeds, expected)
        # every message edge is a graph edge (source -> target)
        src, dst = n_id[batch.edge_index[0]], n_id[batch.edge_index[1]]
        assert all((int(s), int(d)) in edges for s, d in zip(src, dst))
        seen.append(batch.input_id)
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(pairs.size(1)))


def test_binary_batches_label_positives_and_negatives(csr) -> None:
    link_loader, pairs = loader(csr, NeighborSampler, "binary", amount=1)
    batch = next(iter(link_loader))
    count = len(batch.input_id)
    assert batch.edge_label.tolist() == [1.0] * count + [0.0] * count
    endpoints = batch.n_id[batch.edge_label_index]
    assert torch.equal(endpoints[:, :count], pairs[:, batch.input_id])


def test_edge_sampling_is_reproducible_and_resumable(csr) -> None:
    indptr, indices = csr
    edge_input = EdgeSamplerInput(
        torch.arange(4), torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])
    )
    negatives = NegativeSampling("triplet", 5)

    def run(sampler: NeighborSampler) -> list[torch.Tensor]:
        out = sampler.sample_from_edges(edge_input, negatives)
        return [out.node, out.row, out.col, out.node[out.metadata[3]]]

    a, b = (
        NeighborSampler((indptr, indices), [3], seed=1),
        NeighborSampler((indptr, indices), [3], seed=1),
    )
    first, second = run(a), run(a)
    assert all(torch.equal(x, y) for x, y in zip(first, run(b)))
    assert not torch.equal(first[3], second[3])  # the next batch draws other negatives
    resumed = NeighborSampler((indptr, indices), [3], seed=1)
    resumed._num_batches = a.num_batches - 1  # what a checkpoint restores
    assert all(torch.equal(x, y) for x, y in zip(second, run(resumed)))


def test_edge_sampling_rejects_temporal_input(csr) -> None:
    sampler = NeighborSampler(csr, [2])
    with pytest.raises(ValueError, match="temporal"):
        sampler.sample_from_edges(
            EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([1]), time=torch.tensor([3]))
        )


def test_weighted_negatives_follow_the_weights() -> None:
    weights = np.array([0.0, 1.0, 3.0, 0.0, 6.0])
    draw = NegativeDraw(5, weights)
    ids = draw(np.random.default_rng(0), 100_000)
    counts = np.bincount(ids, minlength=5)
    assert counts[0] == counts[3] == 0  # zero weight: never drawn
    np.testing.assert_allclose(counts / counts.sum(), weights / weights.sum(), atol=0.01)
    uniform = NegativeDraw(5)(np.random.default_rng(0), 50_000)
    np.testing.assert_allclose(np.bincount(uniform) / 50_000, 0.2, atol=0.01)
    with pytest.raises(ValueError, match="non-negative"):
        NegativeDraw(2, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="2 entries for 3 nodes"):
        NegativeDraw(3, np.array([1.0, 1.0]))


def test_degree_weights_count_both_endpoints() -> None:
    np.testing.assert_array_equal(
        degree_weights(4, np.array([0, 0, 1]), np.array([1, 2, 2])), [2, 2, 2, 0]
    )


def test_known_edges_against_a_set() -> None:
    rng = np.random.default_rng(1)
    triples = np.stack(
        [rng.integers(0, 30, 500), rng.integers(0, 4, 500), rng.integers(0, 30, 500)], axis=1
    )
    known = KnownEdges.from_triples(triples, 30, 4)
    truth = {tuple(t) for t in triples.tolist()}
    assert len(known) == len(truth)  # repeats removed
    queries = np.stack(
        [rng.integers(0, 30, 2000), rng.integers(0, 4, 2000), rng.integers(0, 30, 2000)], axis=1
    )
    expected = [tuple(q) in truth for q in queries.tolist()]
    assert known.contains(queries[:, 0], queries[:, 1], queries[:, 2]).tolist() == expected
    rows, tails = known.true_tails(queries[:50, 0], queries[:50, 1])
    for i, (h, r, _) in enumerate(queries[:50].tolist()):
        want = sorted(t for (hh, rr, t) in truth if hh == h and rr == r)
        assert tails[rows == i].tolist() == want
    with pytest.raises(ValueError, match="relations outside"):
        KnownEdges.from_triples(np.array([[0, 4, 1]]), 30, 4)


def test_known_edges_on_huge_id_spaces_and_broadcast_shapes() -> None:
    """head * R + rel then * N + tail would overflow int64 here; lookups still work."""
    big = 2**40
    triples = np.array([[big - 1, 2, big - 2], [5, 0, big - 1], [5, 0, 7]])
    known = KnownEdges.from_triples(triples, big, 3)
    heads = np.array([[big - 1], [5]])
    tails = np.array([[big - 2, big - 1, 7]])
    mask = known.contains(heads, np.array([[2], [0]]), tails)
    assert mask.shape == (2, 3)
    assert mask.tolist() == [[True, False, False], [False, True, True]]
