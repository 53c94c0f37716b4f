"""Filtered ranking (MRR, Hits@k) against a loop-based reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnncore.sampler import NegativeDraw
from gnncore.testing.ranking_reference import filtered_ranks_reference
from gnncore.train.link.models import DistMult, DotProduct
from gnncore.train.link.ranking import RankingMetrics, filtered_ranks, known_edges

N, R = 25, 3


def problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((N, 4)).astype(np.float32)
    z[7] = z[3]  # two identical entities: ties
    triples = np.stack(
        [rng.integers(0, N, 60), rng.integers(0, R, 60), rng.integers(0, N, 60)], axis=1
    )
    return z, triples[:45], triples[45:]


@pytest.mark.parametrize("decoder", ["distmult", "dot"])
@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize("chunk", [1 << 20, 6])
def test_filtered_ranks_match_the_reference(decoder: str, reciprocal: bool, chunk: int) -> None:
    z, train, test = problem(0)
    relations = 2 * R if reciprocal else R
    model = DistMult(relations, 4) if decoder == "distmult" else DotProduct()
    known = known_edges([train, test], N, R)
    ranks = filtered_ranks(
        torch.from_numpy(z),
        model.query,
        test,
        known,
        R,
        reciprocal=reciprocal,
        batch_size=7,
        entity_chunk=chunk,
    )
    vectors = model.relations.weight.detach().numpy() if decoder == "distmult" else None
    truth = {tuple(t) for t in np.concatenate([train, test]).tolist()}
    expected = filtered_ranks_reference(z, vectors, test, truth, R, reciprocal)
    np.testing.assert_allclose(ranks.numpy(), expected, rtol=0, atol=1e-9)


def test_sampled_negatives_skip_known_answers() -> None:
    z, train, test = problem(1)
    known = known_edges([train, test], N, R)
    model = DotProduct()
    # N draws of every entity: the sampled protocol then sees every candidate
    everyone = NegativeDraw(N, np.ones(N))
    sampled = filtered_ranks(
        torch.from_numpy(z), model.query, test, known, R, num_negatives=4000, negatives=everyone
    )
    full = filtered_ranks(torch.from_numpy(z), model.query, test, known, R)
    # repeats of a candidate count once per draw, so compare who outranks the answer
    assert torch.all((sampled == 1) == (full == 1))
    assert torch.all(sampled >= 1)


def test_metrics_from_ranks() -> None:
    metrics = RankingMetrics.from_ranks(torch.tensor([1.0, 2.0, 4.0, 20.0]))
    assert metrics.mrr == pytest.approx((1 + 0.5 + 0.25 + 0.05) / 4)
    assert metrics.hits == {1: 0.25, 3: 0.5, 10: 0.75}
    assert metrics.mean_rank == pytest.approx(6.75)
    assert metrics.as_dict("test_")["test_hits@10"] == 0.75
    assert metrics.as_dict("val_", metric_names=True)["val_hits_at_3"] == 0.5


def test_symmetric_known_edges_filter_both_orientations() -> None:
    """An undirected edge stored once as (0, 0, 1) is a known answer of (1, 0, ?) too."""
    known = known_edges([np.array([[0, 0, 1], [1, 0, 2]])], 3, 1, symmetric=True)
    rows, tails = known.true_tails(np.array([1]), np.array([0]))
    assert sorted(tails.tolist()) == [0, 2]
    one_way = known_edges([np.array([[0, 0, 1], [1, 0, 2]])], 3, 1)
    assert one_way.true_tails(np.array([1]), np.array([0]))[1].tolist() == [2]
