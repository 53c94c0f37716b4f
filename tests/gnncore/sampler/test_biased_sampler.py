"""Biased DENSE sampling: locality-aware boosting (Song & Jiang) and HDR threshold
pruning (HyDRA), gnncore.sampler.biased and _C.sample_biased_pyg."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import EdgeSamplerInput

from gnncore import _C
from gnncore.sampler import (
    BiasedDenseSampler,
    DenseSampler,
    LocalityAwareSampler,
    PrunedSampler,
    ScaleController,
    boost_path_counts,
    boost_sets,
    edge_weight_of,
)
from gnncore.testing.biased_reference import (
    boost_sets_reference,
    capped_inclusion_probabilities,
    fits_some_window,
    goodness_of_fit_pvalue,
    las_edge_weights,
    las_row_reference,
    paper_q_new,
    path_counts_reference,
    remote_reads_reference,
    scale_sequence,
    systematic_pps_reference,
    two_sample_pvalue,
    window_positions,
)
from gnncore.testing.dense_reference import dense_to_pyg_reference, sample_dense_reference
from gnncore.testing.graphs import node_input, random_csr
from gnncore.testing.per_layer_reference import node_rng

#: The statistical tests' node 0 has in-neighbours 1..HUB_DEGREE.
HUB_DEGREE = 12
HUB_NODES = 40
DRAWS = 4000
FANOUT = 3
#: p-value below which two samples are said to differ (fixed seeds: no flakiness).
ALPHA = 1e-3


def csr_of(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row ``v`` lists the sources of the edges into ``v``, sorted."""
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, np.asarray(src)[order].astype(np.int64)


@pytest.fixture(scope="module")
def hub() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    src = np.concatenate([np.arange(1, HUB_DEGREE + 1), rng.integers(1, HUB_NODES, 150)])
    dst = np.concatenate([np.zeros(HUB_DEGREE, np.int64), rng.integers(1, HUB_NODES, 150)])
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], 1), axis=0)
    return csr_of(HUB_NODES, pairs[:, 0], pairs[:, 1])


def hub_draws(sampler, draws: int = DRAWS) -> tuple[np.ndarray, list[tuple[int, ...]], list]:
    """Per neighbour id of node 0, how often a batch seeded at 0 sampled it at hop 0;
    the sampled sets; and each batch's (neighbour ids, weights)."""
    counts = np.zeros(HUB_NODES, dtype=np.int64)
    sets, weighted = [], []
    for _ in range(draws):
        out = sampler.sample_from_nodes(node_input([0]))
        first = out.num_sampled_edges[0]
        nbrs = out.node[out.row[:first]].numpy()
        counts[nbrs] += 1
        sets.append(tuple(sorted(nbrs.tolist())))
        weight = edge_weight_of(out)
        weighted.append((nbrs, None if weight is None else weight[:first].numpy()))
    return counts, sets, weighted


def hub_boost(boosted: list[int]) -> np.ndarray:
    mask = np.zeros(HUB_NODES, dtype=bool)
    mask[boosted] = True
    return mask


# Statistical tests --------------------------------------------------------------


def test_unboosted_variants_draw_like_the_dense_sampler(hub) -> None:
    plain, _, _ = hub_draws(DenseSampler(hub, [FANOUT], seed=100))
    uniform = np.r_[0, np.full(HUB_DEGREE, FANOUT / HUB_DEGREE), np.zeros(HUB_NODES - 13)]
    assert goodness_of_fit_pvalue(plain, uniform, DRAWS) > ALPHA
    boost = [hub_boost([1, 2, 3])]
    variants = {
        "las s=1": LocalityAwareSampler(hub, [FANOUT], seed=7, boost=boost, scale=1.0),
        "las no boost": LocalityAwareSampler(hub, [FANOUT], seed=8, scale=8.0),
        "las all boosted": LocalityAwareSampler(
            hub, [FANOUT], seed=9, boost=[np.ones(HUB_NODES, bool)], scale=8.0
        ),
        "pruned theta >= max degree": PrunedSampler(
            hub, [FANOUT], seed=10, owner=np.ones(HUB_NODES, np.int64), part=0, theta=HUB_DEGREE
        ),
        # windowing alone keeps every entry's marginal min(1, f/d): the offset is uniform
        "pruned theta 5": PrunedSampler(
            hub, [FANOUT], seed=11, owner=np.ones(HUB_NODES, np.int64), part=0, theta=5
        ),
    }
    for name, sampler in variants.items():
        counts, _, weighted = hub_draws(sampler)
        p_two = two_sample_pvalue(counts, plain)
        p_fit = goodness_of_fit_pvalue(counts, uniform, DRAWS)
        assert p_two > ALPHA and p_fit > ALPHA, (name, p_two, p_fit, counts)
        for _, weight in weighted:
            assert weight is None or np.all(weight == 1.0), name


def test_equal_weights_are_the_dense_draws_themselves(hub) -> None:
    # Stronger than the distribution: same seed, same batches.
    indptr, indices = random_csr(300, 4000, seed=2)
    rng = np.random.default_rng(1)
    boost = [rng.random(300) < 0.3, rng.random(300) < 0.3]
    seeds = np.array([5, 150, 7, 99, 0, 201])
    max_degree = int(np.diff(indptr).max())
    samplers = [
        LocalityAwareSampler((indptr, indices), [4, 3], seed=3, boost=boost, scale=1.0),
        LocalityAwareSampler((indptr, indices), [4, 3], seed=3),
        PrunedSampler(
            (indptr, indices), [4, 3], seed=3, owner=np.ones(300, int), part=0, theta=max_degree
        ),
    ]
    plain = DenseSampler((indptr, indices), [4, 3], seed=3)
    for _ in range(3):
        want = plain.sample_from_nodes(node_input(seeds))
        for sampler in samplers:
            got = sampler.sample_from_nodes(node_input(seeds))
            for field in ("node", "row", "col", "edge"):
                assert torch.equal(getattr(got, field), getattr(want, field))
            assert got.num_sampled_edges == want.num_sampled_edges
    # set_scale(1) after boosting returns to the plain draws
    las = LocalityAwareSampler((indptr, indices), [4, 3], seed=3, boost=boost, scale=8.0)
    first = las.sample_from_nodes(node_input(seeds))
    las.set_scale(1.0)
    again = DenseSampler((indptr, indices), [4, 3], seed=3)
    again.sample_from_nodes(node_input(seeds))  # same batch counter as `las`
    assert torch.equal(
        las.sample_from_nodes(node_input(seeds)).edge,
        again.sample_from_nodes(node_input(seeds)).edge,
    )
    assert not torch.all(edge_weight_of(first) == 1.0)


def hub_flags(boosted: list[int]) -> list[bool]:
    """Boost flags of node 0's row (neighbours 1..HUB_DEGREE)."""
    return [j in boosted for j in range(1, HUB_DEGREE + 1)]


def hub_pi(boosted: list[int], scale: float) -> np.ndarray:
    """The capped inclusion probabilities of node 0's row, over all HUB_NODES ids."""
    weights = [scale if b else 1.0 for b in hub_flags(boosted)]
    pi = capped_inclusion_probabilities(weights, FANOUT)
    return np.r_[0, pi, np.zeros(HUB_NODES - HUB_DEGREE - 1)]


def binomial_max_z(counts: np.ndarray, pi: np.ndarray, trials: int) -> float:
    """The largest |z| of the per-entry inclusion counts: each batch includes entry
    ``j`` with probability ``π_j``, independently across batches (binomial)."""
    var = trials * pi * (1 - pi)
    spread = counts - trials * pi
    if np.any((var == 0) & (spread != 0)):
        return math.inf
    keep = var > 0
    return float(np.max(np.abs(spread[keep]) / np.sqrt(var[keep]), initial=0.0))


#: Batches of the unbiasedness test.
MEAN_DRAWS = 16000
#: Bias of the weighted mean in units of the spread of x (test_weighted_mean_estimate_is_
#: unbiased, boosted [1, 2, 3]) with the former Efraimidis-Spirakis draws and the paper's
#: weights (b s + d - b) / (d w_j): their inclusion probabilities were not q_new.
ES_BIAS = {2.0: 0.041, 8.0: 0.316}
#: (boosted neighbours of node 0, s): no capping (q_new = π <= 1); boosted entry
#: capped at π = 1 (the paper's q_new = 24/19 > 1); two boosted entries capped.
BOOST_CASES = [([1, 2, 3], 2.0), ([1, 2, 3], 8.0), ([1], 8.0), ([4, 9], 30.0)]


@pytest.mark.parametrize(("boosted", "scale"), BOOST_CASES)
def test_inclusion_frequencies_match_the_capped_probabilities(hub, boosted, scale) -> None:
    plain, _, _ = hub_draws(DenseSampler(hub, [FANOUT], seed=100))
    las = LocalityAwareSampler(hub, [FANOUT], seed=5, boost=[hub_boost(boosted)], scale=scale)
    counts, sets, weighted = hub_draws(las)
    assert two_sample_pvalue(counts, plain) < 1e-6  # it does NOT draw like the plain sampler
    share = counts[boosted].sum() / counts.sum()
    assert share > 1.5 * plain[boosted].sum() / plain.sum()
    pi = hub_pi(boosted, scale)
    assert pi.sum() == pytest.approx(FANOUT)
    assert goodness_of_fit_pvalue(counts, pi, DRAWS) > ALPHA
    assert binomial_max_z(counts, pi, DRAWS) < 4.0  # p ~ 1e-3 after 12 comparisons
    # exactly FANOUT distinct neighbours per batch; certain entries in every batch
    certain = set(np.flatnonzero(pi >= 1.0).tolist())
    assert all(len(set(draw)) == len(draw) == FANOUT and certain <= set(draw) for draw in sets)
    # the paper's q_new is the uncapped probability k w_j / W: equal to π when no
    # q_new exceeds 1; otherwise those are capped at 1 and the rest get more
    q_new = paper_q_new(hub_flags(boosted), FANOUT, scale)
    row_pi = pi[1 : HUB_DEGREE + 1]
    capped = q_new > 1.0
    assert capped.any() == bool(certain) == (len(boosted) == 1 or scale == 30.0)
    if capped.any():
        assert np.all(row_pi[capped] == 1.0) and np.all(row_pi[~capped] > q_new[~capped])
    else:
        np.testing.assert_allclose(q_new, row_pi, rtol=1e-12)
    # every batch carries the Horvitz-Thompson weights c_j = (f / d) / π_j
    q = FANOUT / HUB_DEGREE
    for nbrs, weight in weighted:
        assert weight is not None
        np.testing.assert_allclose(weight, q / pi[nbrs], rtol=1e-6)


@pytest.mark.parametrize(("boosted", "scale"), [([1, 2, 3], 1.0), *BOOST_CASES])
def test_weighted_mean_estimate_is_unbiased(hub, boosted, scale) -> None:
    # sum_{j in S} c_j x_j / k over the k sampled neighbours estimates the neighbour
    # mean without bias at every s: E = sum_j pi_j (q / pi_j) x_j / k = mean(x).
    x = np.zeros(HUB_NODES)
    x[1 : HUB_DEGREE + 1] = np.random.default_rng(3).normal(size=HUB_DEGREE) + np.arange(HUB_DEGREE)
    truth = x[1 : HUB_DEGREE + 1].mean()
    spread = x[1 : HUB_DEGREE + 1].std()
    las = LocalityAwareSampler(hub, [FANOUT], seed=21, boost=[hub_boost(boosted)], scale=scale)
    _, _, weighted = hub_draws(las, MEAN_DRAWS)
    estimates = np.array([(w * x[n]).sum() / len(n) for n, w in weighted])
    se = estimates.std() / math.sqrt(len(estimates))
    assert abs(estimates.mean() - truth) < 4 * se, (scale, estimates.mean(), truth, se)
    if boosted == [1, 2, 3] and scale in ES_BIAS:  # tight enough to see the old bias
        assert 4 * se < ES_BIAS[scale] * spread
    # the expectation is exact, not only within the noise
    pi = hub_pi(boosted, scale)
    c = las_edge_weights(hub_flags(boosted), FANOUT, scale)
    assert float((pi[1 : HUB_DEGREE + 1] * c * x[1 : HUB_DEGREE + 1]).sum() / FANOUT) == (
        pytest.approx(truth, rel=1e-12)
    )
    # the weights: mean 1 per sampled edge in expectation, not per batch
    sums = np.array([w.sum() / len(n) for n, w in weighted])
    assert abs(sums.mean() - 1.0) < 4 * sums.std() / math.sqrt(len(sums)) + 1e-7
    assert float((pi[1 : HUB_DEGREE + 1] * c).sum()) == pytest.approx(FANOUT, rel=1e-12)
    if scale == 1.0:
        assert np.all(c == 1.0) and np.all(sums == 1.0)
    else:
        # Σ c_j varies with the draw, unless the boosted entries are certain (then
        # every draw holds them and k - b plain entries of equal weight)
        assert (sums.std() > 0) == bool(np.all(pi < 1.0))
        assert np.all(c[[j - 1 for j in boosted]] < 1.0) and np.all(
            np.delete(c, [j - 1 for j in boosted]) > 1.0
        )


def test_pruned_windows_change_the_joint_draws(hub) -> None:
    theta = 5
    owner = np.ones(HUB_NODES, np.int64)
    _, sets, _ = hub_draws(PrunedSampler(hub, [FANOUT], seed=4, owner=owner, part=0, theta=theta))
    _, plain_sets, _ = hub_draws(DenseSampler(hub, [FANOUT], seed=4))

    def spread(draw: tuple[int, ...]) -> bool:  # fits no window of theta offsets
        return not fits_some_window([j - 1 for j in draw], HUB_DEGREE, theta)

    assert not any(spread(s) for s in sets)
    assert sum(spread(s) for s in plain_sets) > DRAWS // 4


# Deterministic parts against the references --------------------------------------


def test_take_all_equals_the_dense_reference_with_unit_weights() -> None:
    indptr, indices = random_csr(60, 300, seed=1)
    seeds = np.array([3, 17, 0, 42])
    max_degree = int(np.diff(indptr).max())
    rng = np.random.default_rng(0)
    boost = [rng.random(60) < 0.5 for _ in range(3)]
    remote = rng.random(60) < 0.5
    for fanouts in ([-1, -1], [max_degree, max_degree, -1]):
        ref = dense_to_pyg_reference(
            sample_dense_reference(indptr, indices, seeds, fanouts, np.random.default_rng(0))
        )
        got = _C.sample_biased_pyg(
            indptr,
            indices,
            seeds,
            fanouts,
            5,
            boost=[b.astype(np.uint8) for b in boost[: len(fanouts)]],
            scale=8.0,
            remote=remote.astype(np.uint8),
            theta=[max_degree] * len(fanouts),
        )
        for a, b in zip(got[:6], ref):
            np.testing.assert_array_equal(a, b)
        assert got[6].dtype == np.float32 and np.all(got[6] == 1.0)
        lists, ids = remote_reads_reference(indptr, got[0], got[4], remote, [None] * len(fanouts))
        assert got[7] == lists and got[8] == ids


def row_groups(out: tuple) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """Per expanded node: (hop, global id, sampled CSR positions, weights)."""
    node, _, col, edge, _, num_edges, weight = out[:7]
    groups = []
    start = 0
    for hop, count in enumerate(num_edges):
        cols, edges, weights = (a[start : start + count] for a in (col, edge, weight))
        start += count
        for c in np.unique(cols):
            sel = cols == c
            groups.append((hop, int(node[c]), edges[sel], weights[sel]))
    return groups


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_weights_and_windows_against_the_reference(index_dtype: type) -> None:
    indptr, indices = random_csr(400, 9000, seed=3)
    indices = indices.astype(index_dtype)
    rng = np.random.default_rng(5)
    fanouts = [4, 3]
    boost = [rng.random(400) < 0.3, rng.random(400) < 0.2]
    remote = rng.random(400) < 0.5
    thetas = [9, 7]
    degree = np.diff(indptr)
    seeds = rng.choice(400, 40, replace=False)
    for scale in (1.0, 4.0):
        out = _C.sample_biased_pyg(
            indptr,
            indices,
            seeds,
            fanouts,
            11,
            boost=[b.astype(np.uint8) for b in boost],
            scale=scale,
            remote=remote.astype(np.uint8),
            theta=thetas,
        )
        node, row, col, edge = out[:4]
        np.testing.assert_array_equal(indices[edge], node[row])  # every edge is real
        assert len(np.unique(node)) == len(node)
        assert len(np.unique(edge)) == len(edge)  # without replacement
        windowed = 0
        for hop, v, positions, weights in row_groups(out):
            lo, deg = int(indptr[v]), int(degree[v])
            offsets = positions - lo
            assert np.all((0 <= offsets) & (offsets < deg))
            pruned = bool(remote[v]) and deg > thetas[hop]
            d = thetas[hop] if pruned else deg
            assert len(positions) == min(fanouts[hop], d)
            flags = boost[hop][indices[positions]]
            if not pruned:
                all_flags = boost[hop][indices[lo : lo + deg]]
                c = las_edge_weights(all_flags, fanouts[hop], scale)
                np.testing.assert_allclose(weights, c[offsets], rtol=1e-6)
                continue
            windowed += 1
            assert fits_some_window(offsets, deg, thetas[hop])
            # the weights are those of some window the draw fits in
            matches = []
            for start in range(deg):
                window = window_positions(lo, deg, thetas[hop], start)
                if set(positions.tolist()) <= set(window):
                    c = las_edge_weights(boost[hop][indices[window]], fanouts[hop], scale)
                    wanted = {p: c[i] for i, p in enumerate(window)}
                    matches.append(np.allclose(weights, [wanted[p] for p in positions], 1e-6))
            assert any(matches), (v, flags, weights)
        assert windowed > 10
        lists, ids = remote_reads_reference(indptr, node, out[4], remote, thetas)
        assert out[7] == lists and out[8] == ids


@pytest.mark.parametrize("scale", [1.0, 2.0, 8.0, 30.0])
def test_every_row_replays_the_reference_draw(scale: float) -> None:
    # The kernel's rows, drawn again in Python from the same generator: identical
    # offsets and weights. Every row with f < d yields exactly f distinct entries.
    indptr, indices = random_csr(400, 9000, seed=3)
    rng = np.random.default_rng(5)
    fanouts = [4, 3]
    boost = [rng.random(400) < 0.3, rng.random(400) < 0.2]
    remote = rng.random(400) < 0.5
    thetas = [9, 7]
    seeds = rng.choice(400, 40, replace=False)
    out = _C.sample_biased_pyg(
        indptr,
        indices,
        seeds,
        fanouts,
        11,
        boost=[b.astype(np.uint8) for b in boost],
        scale=scale,
        remote=remote.astype(np.uint8),
        theta=thetas,
    )
    node, _, col, edge, num_nodes, num_edges, weight = out[:7]
    node_start = np.r_[0, np.cumsum(num_nodes)]
    edge_start = np.r_[0, np.cumsum(num_edges)]
    subsampled = weighted = 0
    for hop, fanout in enumerate(fanouts):
        cols = col[edge_start[hop] : edge_start[hop + 1]]
        for i, v in enumerate(node[node_start[hop] : node_start[hop + 1]].tolist()):
            sel = np.flatnonzero(cols == node_start[hop] + i) + edge_start[hop]
            lo, deg = int(indptr[v]), int(indptr[v + 1] - indptr[v])
            gen = node_rng(11, hop, i)
            start = gen.below(deg) if remote[v] and deg > thetas[hop] else 0
            window = window_positions(lo, deg, thetas[hop] if remote[v] else None, start)
            offsets, weights = las_row_reference(gen, boost[hop][indices[window]], fanout, scale)
            want = dict(zip((window[o] for o in offsets), weights))
            got = dict(zip(edge[sel].tolist(), weight[sel].tolist()))
            assert len(got) == len(sel)  # distinct
            assert got.keys() == want.keys(), (hop, v)
            np.testing.assert_allclose([got[p] for p in want], list(want.values()), rtol=1e-6)
            if fanout < len(window):
                subsampled += 1
                assert len(sel) == fanout
                weighted += any(w != 1.0 for w in weights)
    assert subsampled > 100
    assert (weighted > 20) == (scale != 1.0)


def test_window_positions_wrap() -> None:
    assert window_positions(10, 6, 4, 4) == [14, 15, 10, 11]
    assert window_positions(10, 3, 4, 2) == [10, 11, 12]
    assert window_positions(0, 5, None, 3) == [0, 1, 2, 3, 4]
    assert fits_some_window([5, 0], 6, 2) and not fits_some_window([0, 3], 6, 3)


def test_las_weights_formula() -> None:
    # d = 4, f = 2, one boosted of weight 3: q_new = 2 * 3 / 6 = 1 -> π = [1, 1/3, 1/3, 1/3]
    np.testing.assert_allclose(
        las_edge_weights([True, False, False, False], 2, 3.0), [0.5, 1.5, 1.5, 1.5]
    )
    # uncapped: π = q_new = [1/2, 1/2, 1/4, 1/4, 1/4, 1/4], c = (1/3) / π
    np.testing.assert_allclose(
        las_edge_weights([True, True, False, False, False, False], 2, 2.0),
        [2 / 3, 2 / 3, 4 / 3, 4 / 3, 4 / 3, 4 / 3],
    )
    # capped: q_new = 18/13 > 1 -> π = [1, 1/4, 1/4, 1/4, 1/4], c = 0.4 / π (formula (8)
    # would give (b s + d - b) / (d w) = [13/45, 13/5, ...])
    np.testing.assert_allclose(
        las_edge_weights([True, False, False, False, False], 2, 9.0), [0.4, 1.6, 1.6, 1.6, 1.6]
    )
    assert paper_q_new([True, False, False, False, False], 2, 9.0)[0] == pytest.approx(18 / 13)
    np.testing.assert_allclose(las_edge_weights([True, False], 2, 3.0), [1, 1])  # take all
    np.testing.assert_allclose(las_edge_weights([True, True, True], 1, 5.0), [1, 1, 1])
    for flags, scale in (([1, 0, 0, 0], 3.0), ([1, 0, 0, 0], 9.0), ([1, 1, 0, 0], 1.5)):
        out = _C.sample_biased_pyg(
            np.array([0, 0, 0, 0, 0, 4]),
            np.array([0, 1, 2, 3]),
            np.array([4]),
            [2],
            0,
            boost=[np.array([*flags, 0], np.uint8)],
            scale=scale,
        )
        pi = capped_inclusion_probabilities([scale if f else 1.0 for f in flags], 2)
        np.testing.assert_allclose(out[6], [0.5 / pi[n] for n in out[0][out[1]]], rtol=1e-6)
        assert len(set(out[0][out[1]].tolist())) == 2


# Pruned sampler -------------------------------------------------------------------


def test_pruned_sampler_thresholds_and_counters() -> None:
    indptr, indices = random_csr(500, 12000, seed=8)
    rng = np.random.default_rng(2)
    owner = rng.integers(0, 3, 500)
    degree = np.diff(indptr)
    replicated = np.argsort(-degree, kind="stable")[:20]
    fanouts = [5, 3, -1]
    sampler = PrunedSampler(
        (indptr, indices), fanouts, seed=1, owner=owner, part=1, replicated=replicated
    )
    avg = len(indices) / 500
    assert sampler.thetas == (math.ceil(avg + 5), math.ceil(avg + 3), None)
    remote = (owner != 1) & ~np.isin(np.arange(500), replicated)
    np.testing.assert_array_equal(sampler.remote_mask, remote)
    total_lists, per_hop = 0, np.zeros(3, np.int64)
    for _ in range(5):
        seeds = rng.choice(np.flatnonzero(owner == 1), 16, replace=False)
        out = sampler.sample_from_nodes(node_input(seeds))
        assert edge_weight_of(out) is None and len(out.metadata) == 2
        lists, ids = remote_reads_reference(
            indptr, out.node.numpy(), out.num_sampled_nodes, remote, sampler.thetas
        )
        total_lists += sum(lists)
        per_hop += ids
    assert sampler.remote_lists == total_lists > 0
    assert sampler.remote_ids == per_hop.sum()
    np.testing.assert_array_equal(sampler.remote_ids_per_hop, per_hop)
    sampler.reset_counters()
    assert sampler.remote_lists == sampler.remote_ids == 0
    # theta per hop, explicit
    explicit = PrunedSampler(
        (indptr, indices), fanouts, owner=owner, part=1, theta=[4, 2, 9], prune_alpha=0
    )
    assert explicit.thetas == (4, 2, None)
    alpha = PrunedSampler(
        (indptr, indices), [5], owner=owner, part=1, prune_alpha=0.5, prune_beta=2.0
    )
    assert alpha.thetas == (math.ceil(0.5 * avg + 10),)


def test_pruned_sampler_keeps_the_view_permutation() -> None:
    indptr, indices = random_csr(80, 500, seed=9)
    owner = np.zeros(80, np.int64)
    pruned = PrunedSampler((indptr, indices), [3], owner=owner, part=1, direction="both")
    plain = DenseSampler((indptr, indices), [3], direction="both")
    assert pruned.edge_permutation is not None
    assert torch.equal(pruned.edge_permutation, plain.edge_permutation)
    np.testing.assert_array_equal(pruned.indptr, plain.indptr)


# Determinism, loaders, errors ----------------------------------------------------------


def test_determinism_and_thread_count_independence() -> None:
    indptr, indices = random_csr(5000, 60000, seed=4)
    rng = np.random.default_rng(0)
    seeds = rng.choice(5000, 800, replace=False)
    boost = [(rng.random(5000) < 0.2).astype(np.uint8) for _ in range(3)]
    remote = (rng.random(5000) < 0.5).astype(np.uint8)
    args = dict(boost=boost, scale=4.0, remote=remote, theta=[8, 6, 5])
    runs = [
        _C.sample_biased_pyg(indptr, indices, seeds, [10, 5, 3], 11, num_threads=t, **args)
        for t in (1, 4)
    ]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    other = _C.sample_biased_pyg(indptr, indices, seeds, [10, 5, 3], 12, **args)
    assert not np.array_equal(other[3], runs[0][3])
    a = LocalityAwareSampler((indptr, indices), [10, 5, 3], seed=3, boost=boost, num_threads=1)
    b = LocalityAwareSampler((indptr, indices), [10, 5, 3], seed=3, boost=boost, num_threads=4)
    a.scale = b.scale = 4.0
    for _ in range(2):
        x, y = a.sample_from_nodes(node_input(seeds)), b.sample_from_nodes(node_input(seeds))
        assert torch.equal(x.edge, y.edge) and torch.equal(edge_weight_of(x), edge_weight_of(y))


def test_edge_weights_reach_a_node_loader_and_link_outputs() -> None:
    indptr, indices = random_csr(120, 1500, seed=6)
    rng = np.random.default_rng(1)
    boost = [rng.random(120) < 0.3, rng.random(120) < 0.3]
    sampler = LocalityAwareSampler((indptr, indices), [4, 3], seed=2, boost=boost, scale=4.0)

    class WeightedLoader(NodeLoader):
        def filter_fn(self, out):
            data = super().filter_fn(out)
            data.edge_weight = edge_weight_of(out)
            return data

    src = torch.from_numpy(indices.astype(np.int64))
    dst = torch.repeat_interleave(torch.arange(120), torch.from_numpy(np.diff(indptr)))
    data = Data(x=torch.randn(120, 4), edge_index=torch.stack([src, dst]), num_nodes=120)
    loader = WeightedLoader(data, node_sampler=sampler, input_nodes=torch.arange(60), batch_size=20)
    seen = 0
    for batch in loader:
        assert batch.edge_weight.shape == (batch.edge_index.size(1),)
        assert batch.batch_size == 20
        seen += int((batch.edge_weight != 1).sum())
    assert seen > 0
    edges = EdgeSamplerInput(input_id=torch.arange(5), row=torch.arange(5), col=torch.arange(5, 10))
    out = sampler.sample_from_edges(edges)
    weight = edge_weight_of(out)
    assert weight is not None and weight.shape == out.row.shape and len(out.metadata) == 5
    plain = DenseSampler((indptr, indices), [2]).sample_from_nodes(node_input([1]))
    assert edge_weight_of(plain) is None


def test_bad_inputs_raise_naming_the_argument() -> None:
    indptr, indices = random_csr(20, 60, seed=6)
    seeds = np.array([0, 1])
    mask = np.zeros(20, np.uint8)

    def kernel(**kw):
        return _C.sample_biased_pyg(indptr, indices, seeds, [2, 2], 0, **kw)

    with pytest.raises(ValueError, match="boost has 1 masks"):
        kernel(boost=[mask])
    with pytest.raises(ValueError, match=r"boost\[1\] has 3 entries"):
        kernel(boost=[mask, np.zeros(3, np.uint8)])
    for bad in (0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="scale"):
            kernel(scale=bad)
    with pytest.raises(ValueError, match="remote has 19"):
        kernel(remote=mask[:19])
    with pytest.raises(ValueError, match="theta has 1 entries"):
        kernel(theta=[3])
    with pytest.raises(ValueError, match=r"theta\[1\] = -2"):
        kernel(theta=[3, -2])
    with pytest.raises(ValueError, match=r"fanouts\[0\]"):
        _C.sample_biased_pyg(indptr, indices, seeds, [-3], 0)
    with pytest.raises(IndexError):
        _C.sample_biased_pyg(indptr, indices, np.array([20]), [2], 0)

    graph = (indptr, indices)
    with pytest.raises(ValueError, match="boost must have one entry per hop"):
        LocalityAwareSampler(graph, [2, 2], boost=[mask])
    with pytest.raises(ValueError, match=r"boost\[0\] must be a mask of shape \[20\]"):
        LocalityAwareSampler(graph, [2], boost=[mask[:5]])
    with pytest.raises(ValueError, match="scale"):
        LocalityAwareSampler(graph, [2], scale=0.9)
    las = LocalityAwareSampler(graph, [2])
    with pytest.raises(ValueError, match="scale"):
        las.set_scale(-1)
    with pytest.raises(ValueError, match="scale"):
        las.scale = math.nan
    with pytest.raises(NotImplementedError):
        las.sample_dense(node_input([0]))
    owner = np.zeros(20, np.int64)
    with pytest.raises(ValueError, match="owner"):
        PrunedSampler(graph, [2], owner=owner[:5], part=0)
    with pytest.raises(ValueError, match="owner"):
        PrunedSampler(graph, [2], owner=np.zeros(20), part=0)
    with pytest.raises(ValueError, match="part"):
        PrunedSampler(graph, [2], owner=owner, part=-1)
    with pytest.raises(ValueError, match="theta"):
        PrunedSampler(graph, [2, 2], owner=owner, part=0, theta=[1])
    with pytest.raises(ValueError, match="theta"):
        PrunedSampler(graph, [2], owner=owner, part=0, theta=-4)
    with pytest.raises(ValueError, match="replicated"):
        PrunedSampler(graph, [2], owner=owner, part=0, replicated=np.array([25]))
    with pytest.raises(ValueError, match="prune_alpha"):
        PrunedSampler(graph, [2], owner=owner, part=0, prune_alpha=-1)
    with pytest.raises(ValueError, match="theta"):
        BiasedDenseSampler(graph, [2], theta=[-5])
    with pytest.raises(ValueError, match="remote"):
        BiasedDenseSampler(graph, [2], remote=np.zeros(4, bool))
    with pytest.raises(ValueError, match="size"):
        boost_sets(indptr, indices, np.array([1]), 2, -1)
    with pytest.raises(ValueError, match="layers"):
        boost_sets(indptr, indices, np.array([1]), 0, 3)
    with pytest.raises(ValueError, match="cached"):
        boost_sets(indptr, indices, np.array([30]), 2, 3)
    with pytest.raises(ValueError, match="lt and ut"):
        ScaleController(lt=0.3, ut=0.2)
    with pytest.raises(ValueError, match="maxs"):
        ScaleController(maxs=0.5)


# Boost sets and the scale controller --------------------------------------------------


def paper_graph(self_loops: bool) -> tuple[np.ndarray, np.ndarray]:
    edges = [(0, 1), (1, 2), (1, 3), (2, 3), (2, 4), (2, 5)]
    src = [a for a, b in edges] + [b for a, b in edges]
    dst = [b for a, b in edges] + [a for a, b in edges]
    if self_loops:
        src += list(range(6))
        dst += list(range(6))
    return csr_of(6, np.array(src), np.array(dst))


def test_paper_example_of_q2() -> None:
    indptr, indices = paper_graph(self_loops=False)
    cached = np.array([1, 2, 3, 4])
    counts = boost_path_counts(indptr, indices, cached, 2)
    np.testing.assert_array_equal(counts[0], [0, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(counts[1], [1, 3, 4, 3, 2, 1])  # the paper's v_2 (A + I)
    without = boost_path_counts(indptr, indices, cached, 2, self_loops=False)
    np.testing.assert_array_equal(without[1], [1, 2, 3, 2, 1, 1])
    looped = paper_graph(self_loops=True)
    np.testing.assert_array_equal(
        boost_path_counts(*looped, cached, 2, self_loops=False)[1], [1, 3, 4, 3, 2, 1]
    )
    q2, q1 = boost_sets(indptr, indices, cached, 2, 3)
    assert set(np.flatnonzero(q2)) == {1, 2, 3}  # node-2, 1, 3
    assert set(np.flatnonzero(q1)) == {1, 2, 3, 4}
    mask = np.zeros(6, bool)
    mask[cached] = True
    for got, want in zip(boost_sets(indptr, indices, mask, 2, 3), [{1, 2, 3}, {1, 2, 3, 4}]):
        assert set(np.flatnonzero(got)) == want


def test_boost_sets_against_the_reference() -> None:
    indptr, indices = random_csr(200, 900, seed=12)
    cached = np.random.default_rng(4).choice(200, 15, replace=False)
    for self_loops in (True, False):
        counts = boost_path_counts(indptr, indices, cached, 4, self_loops=self_loops)
        want = path_counts_reference(indptr, indices, cached, 4, self_loops)
        for got, ref in zip(counts, want):
            np.testing.assert_array_equal(got, ref)
        masks = boost_sets(indptr, indices, cached, 4, 10, self_loops=self_loops)
        ref_sets = boost_sets_reference(indptr, indices, cached, 4, 10, self_loops)
        assert len(masks) == 4
        for got_mask, ref_set in zip(masks, ref_sets):
            assert set(np.flatnonzero(got_mask).tolist()) == ref_set
    sampler = LocalityAwareSampler((indptr, indices), [5, 5, 5, 5], boost=masks, scale=2.0, seed=1)
    assert sampler.sample_from_nodes(node_input([0, 1, 2])).node.numel() >= 3


def test_scale_controller_follows_algorithm_2() -> None:
    ctl = ScaleController()
    assert ctl.s == 1.0 and not ctl.fixed
    assert [ctl.update(r) for r in (0.3, 0.3, 0.1)] == [2.0, 4.0, 3.0]
    assert not ctl.fixed
    assert ctl.update(0.17) == 3.0 and ctl.fixed
    assert ctl.update(0.9) == 3.0  # fixed for the rest of training
    ctl = ScaleController()
    assert [ctl.update(0.5) for _ in range(5)] == [2.0, 4.0, 8.0, 8.0, 8.0]
    assert ctl.fixed
    ctl = ScaleController()
    assert ctl.update(0.1) == 1.0 and ctl.fixed  # below lt at s = 1: keep plain sampling
    rng = np.random.default_rng(0)
    for _ in range(50):
        ratios = rng.uniform(0, 0.4, 8).tolist()
        ctl = ScaleController(lt=0.12, ut=0.25, maxs=16)
        got = []
        for i, r in enumerate(ratios):
            got.append((ctl.update(r), ctl.fixed))
            if i == 3:  # a checkpoint round trip mid-way
                state = ctl.state_dict()
                ctl = ScaleController()
                ctl.load_state_dict(state)
        assert got == scale_sequence(ratios, 0.12, 0.25, 16)


def test_reference_capped_probabilities_and_systematic_draw() -> None:
    pi = capped_inclusion_probabilities([1, 2, 3, 4], 2)
    np.testing.assert_allclose(pi, [0.2, 0.4, 0.6, 0.8])
    np.testing.assert_allclose(capped_inclusion_probabilities([1] * 5, 2), [0.4] * 5)
    np.testing.assert_allclose(capped_inclusion_probabilities([1, 1], 5), [1, 1])
    # two rounds of capping: 3 * 10 / 19 > 1, then 2 * 5 / 9 > 1, then 1 / 4 each
    np.testing.assert_allclose(
        capped_inclusion_probabilities([10, 5, 1, 1, 1, 1], 3), [1, 1, 0.25, 0.25, 0.25, 0.25]
    )
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = int(rng.integers(2, 30))
        k = int(rng.integers(1, d))
        weights = rng.choice([1.0, 2.0, 8.0, 50.0], d)
        pi = capped_inclusion_probabilities(weights, k)
        assert pi.sum() == pytest.approx(k) and np.all((pi > 0) & (pi <= 1))
        uncapped = pi < 1
        if uncapped.any():  # proportional to the weights below the cap
            ratio = pi[uncapped] / weights[uncapped]
            np.testing.assert_allclose(ratio, ratio[0])
            assert np.all(ratio[0] * weights[~uncapped] >= 1 - 1e-12)
        # the systematic draw over a grid of u: k distinct entries, entry j for a
        # share pi_j of the u (exactly, up to the grid's step: entry j is chosen on
        # at most two intervals of u of total length pi_j, whatever the grid)
        order = rng.permutation(d)
        grid = 1000
        freq = np.zeros(d)
        for u in (np.arange(grid) + 0.5) / grid:
            chosen = systematic_pps_reference(pi, order, float(u))
            assert len(chosen) == len(set(chosen)) == k
            freq[chosen] += 1
        np.testing.assert_allclose(freq / grid, pi, atol=2.5 / grid)
    assert systematic_pps_reference([0.5, 0.5, 1.0], [2, 0, 1], 0.25) == [0, 2]
    assert systematic_pps_reference([0.5, 0.5, 1.0], [2, 0, 1], 0.75) == [1, 2]
    assert systematic_pps_reference([0.5, 0.5, 1.0], [1, 2, 0], 0.25) == [1, 2]
