"""Slow pure-Python references for biased DENSE sampling (:mod:`gnncore.sampler.biased`).

They cover the deterministic parts of ``_C.sample_biased_pyg`` and the
planning helpers: the window a pruned row is read through given its offset,
the exact (capped) inclusion probabilities of locality-aware sampling and its
Horvitz--Thompson edge weights, the paper's ``q_new`` (Song & Jiang formula
(8), its ``M`` corrected), the systematic PPS draw given the order and ``u``
and a replay of the kernel's draw of one row from its generator
(:mod:`gnncore.testing.per_layer_reference`), the boost sets ``Q'_l``,
Algorithm 2 of the scale controller and the remote-read counts. Plus
chi-square p-values for the statistical tests (through
``torch.special.gammaincc``; no SciPy needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gnncore.testing.per_layer_reference import (
    KernelRng,
    sample_without_replacement_reference,
)


def window_positions(lo: int, deg: int, theta: int | None, start: int) -> list[int]:
    """CSR positions a row ``[lo, lo + deg)`` is read as: the whole row when ``theta``
    is ``None`` or ``deg <= theta``, else ``theta`` entries from offset ``start``,
    wrapping around."""
    if theta is None or deg <= theta:
        return list(range(lo, lo + deg))
    return [lo + (start + t) % deg for t in range(theta)]


def fits_some_window(offsets: Sequence[int], deg: int, theta: int) -> bool:
    """Whether row offsets ``offsets`` all lie in one wrapped window of ``theta``
    consecutive entries of a row of length ``deg``."""
    if deg <= theta:
        return True
    wanted = set(int(o) for o in offsets)
    return any(wanted <= {(start + t) % deg for t in range(theta)} for start in range(deg))


def capped_inclusion_probabilities(weights: Sequence[float] | np.ndarray, k: int) -> np.ndarray:
    """Inclusion probabilities ``π_j = min(1, k·w_j / W)`` of a fixed-size draw of
    ``k`` of ``len(weights)`` entries, capped iteratively.

    Entries whose ``π`` reaches 1 are taken with certainty; the ``k'`` slots left
    are spread over the others in proportion to their weights; repeated until
    no entry is newly capped, so ``Σ π = k`` (``k`` is clipped to ``[0, d]``).
    Entry by entry, one pass per cap: independent of the kernel's per-class loop.
    """
    w = np.asarray(weights, dtype=np.float64)
    d = len(w)
    k = max(0, min(int(k), d))
    if np.any(w <= 0):
        raise ValueError("weights must be positive")
    pi = np.zeros(d)
    certain = np.zeros(d, dtype=bool)
    while True:
        left = k - int(certain.sum())
        rest = ~certain
        total = float(w[rest].sum())
        if left == 0 or total == 0.0:
            pi[rest] = 0.0
            break
        pi[rest] = left * w[rest] / total
        newly = rest & (pi >= 1.0)
        if not newly.any():
            break
        certain |= newly
        pi[certain] = 1.0
    return pi


def las_edge_weights(boosted: Sequence[bool], fanout: int, scale: float) -> np.ndarray:
    """``c_j = q_j / π_j`` for every entry of a row (or window) of length ``d``.

    ``q_j = f/d`` is the plain sampler's inclusion probability, ``π`` the capped
    inclusion probabilities of the weights ``w_j = scale`` (boosted) or 1
    (:func:`capped_inclusion_probabilities`): the Horvitz--Thompson weights, so
    ``E[Σ_{j∈S} c_j x_j / f] = Σ_j x_j / d``. ``c = 1`` when the whole row is
    taken (``fanout < 0`` or ``fanout >= d``) or the weights are all equal
    (the plain draw). Without capping ``π_j`` is the paper's
    ``q_new_j = w_j q_j M`` (:func:`paper_q_new`).
    """
    d = len(boosted)
    if d == 0:
        return np.zeros(0)
    if fanout < 0 or fanout >= d:
        return np.ones(d)
    w = np.array([scale if b else 1.0 for b in boosted])
    if np.all(w == w[0]):
        return np.ones(d)
    return (fanout / d) / capped_inclusion_probabilities(w, fanout)


def paper_q_new(boosted: Sequence[bool], fanout: int, scale: float) -> np.ndarray:
    """Song & Jiang's ``q_new_j = w_j q_j M`` (formula (8), ``M = Σ q / Σ w q``
    the right way up, ``q_j = min(1, f/d)``): ``k w_j / W``, uncapped, so it
    may exceed 1."""
    d = len(boosted)
    q = min(1.0, fanout / d) if fanout >= 0 else 1.0
    w = np.array([scale if b else 1.0 for b in boosted])
    m = d * q / float((w * q).sum())
    return w * q * m


def systematic_pps_reference(
    pi: Sequence[float] | np.ndarray, order: Sequence[int] | np.ndarray, u: float
) -> list[int]:
    """The entries a systematic PPS draw (Madow) selects, given the inclusion
    probabilities ``pi`` (summing to an integer ``k``), the order ``order`` (a
    permutation of the entries) and ``u`` in ``[0, 1)``.

    Entries with ``π = 1`` are always selected; the others, in ``order``, lay
    their ``π`` end to end on ``[0, k')`` (the running sum rescaled to end at
    exactly ``k'``), and the entry whose interval ``[C_{j-1}, C_j)`` holds
    ``u + i`` is selected, ``i = 0, ..., k' - 1``. Each entry's interval is
    shorter than 1, so the ``k'`` entries are distinct and entry ``j`` is
    selected for a set of ``u`` of measure ``π_j``. Sorted result.
    """
    p = np.asarray(pi, dtype=np.float64)
    chosen = [int(j) for j in order if p[j] >= 1.0]
    rest = [int(j) for j in order if p[j] < 1.0]
    if rest:
        left = int(round(float(p[rest].sum())))
        cum = np.cumsum(p[rest])
        cum = cum * (left / cum[-1])
        cum[-1] = left
        for i in range(left):
            chosen.append(rest[int(np.searchsorted(cum, u + i, side="right"))])
    if len(set(chosen)) != len(chosen):
        raise AssertionError("an interval held two points: some π_j >= 1 left uncapped")
    return sorted(chosen)


def las_row_reference(
    rng: KernelRng, boosted: Sequence[bool], fanout: int, scale: float
) -> tuple[list[int], list[float]]:
    """Replays the kernel's draw from one row (or window) of ``d`` entries whose
    boost flags are ``boosted``: the sorted offsets drawn and their weights ``c``.

    ``rng`` is the node's generator (``node_rng(seed, hop, pos)``) after the
    window offset, if any, was drawn from it. The whole row (``fanout < 0`` or
    ``>= d``): every offset, ``c = 1``. Equal weights (``scale = 1``, no or only
    boosted entries): the DENSE kernel's uniform draw, ``c = 1``. Otherwise the
    entries not taken with certainty (in storage order) are shuffled by
    Fisher--Yates (``swap(e[j-1], e[below(j)])`` for ``j = m, ..., 2``), then
    ``u = (next() >> 11) / 2**53`` and :func:`systematic_pps_reference` with
    :func:`capped_inclusion_probabilities`; ``c_j = (f/d) / π_j``.
    """
    d = len(boosted)
    k = d if fanout < 0 else min(fanout, d)
    if k == d:
        return list(range(d)), [1.0] * d
    b = sum(bool(x) for x in boosted)
    if scale == 1.0 or b in (0, d):
        return sample_without_replacement_reference(rng, d, k), [1.0] * k
    pi = capped_inclusion_probabilities([scale if x else 1.0 for x in boosted], k)
    certain = [t for t in range(d) if pi[t] >= 1.0]
    order = [t for t in range(d) if pi[t] < 1.0]
    for j in range(len(order), 1, -1):
        r = rng.below(j)
        order[j - 1], order[r] = order[r], order[j - 1]
    u = (rng.next() >> 11) * 2.0**-53
    chosen = systematic_pps_reference(pi, certain + order, u)
    return chosen, [(k / d) / float(pi[t]) for t in chosen]


def path_counts_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    cached: Sequence[int],
    layers: int,
    self_loops: bool = True,
) -> list[list[int]]:
    """``v_1 .. v_layers`` with Python ints: ``v_{l+1}[i] = Σ_{j in row(i)} v_l[j]``
    (plus ``v_l[i]`` with ``self_loops``)."""
    n = len(indptr) - 1
    members = set(int(c) for c in cached)
    v = [1 if i in members else 0 for i in range(n)]
    out = [v]
    for _ in range(layers - 1):
        nxt = []
        for i in range(n):
            total = v[i] if self_loops else 0
            for p in range(int(indptr[i]), int(indptr[i + 1])):
                total += v[int(indices[p])]
            nxt.append(total)
        v = nxt
        out.append(v)
    return out


def boost_sets_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    cached: Sequence[int],
    layers: int,
    size: int,
    self_loops: bool = True,
) -> list[set[int]]:
    """``[Q'_layers, ..., Q'_1]`` as sets: ``Q'_1`` the cached nodes, ``Q'_l`` the
    ``size`` nodes with the largest positive ``v_l`` (ties: smaller id)."""
    counts = path_counts_reference(indptr, indices, cached, layers, self_loops)
    sets = [set(int(c) for c in cached)]
    for v in counts[1:]:
        ranked = sorted((node for node in range(len(v)) if v[node] > 0), key=lambda i: (-v[i], i))
        sets.append(set(ranked[:size]))
    return sets[::-1]


def scale_sequence(
    ratios: Sequence[float], lt: float = 0.15, ut: float = 0.2, maxs: float = 8.0
) -> list[tuple[float, bool]]:
    """Algorithm 2 transcribed: ``(s, fixed)`` after each ratio."""
    s, pre, fixed = 1.0, 1.0, False
    out = []
    for r in ratios:
        if fixed is False:
            if s >= maxs:
                fixed = True
            elif r > ut:
                pre = s
                s = s * 2
            elif r < lt and s != 1:
                s = (s + pre) / 2
            else:
                fixed = True
        out.append((s, fixed))
    return out


def remote_reads_reference(
    indptr: np.ndarray,
    node: np.ndarray,
    num_sampled_nodes: Sequence[int],
    remote: np.ndarray,
    thetas: Sequence[int | None],
) -> tuple[list[int], list[int]]:
    """Per hop, the remote lists a DENSE sample expanded and the ids read from them.

    Hop ``h`` expands block ``h`` of ``node`` (the seeds at hop 0); a remote
    node counts ``min(deg, θ_h)`` ids (``deg`` when ``θ_h`` is ``None``).
    """
    lists, ids = [], []
    start = 0
    for h, theta in enumerate(thetas):
        block = node[start : start + num_sampled_nodes[h]]
        start += num_sampled_nodes[h]
        hop_lists = hop_ids = 0
        for v in block.tolist():
            if remote[v]:
                deg = int(indptr[v + 1] - indptr[v])
                hop_lists += 1
                hop_ids += deg if theta is None else min(deg, theta)
        lists.append(hop_lists)
        ids.append(hop_ids)
    return lists, ids


def chi_square_pvalue(stat: float, df: int) -> float:
    """``P(X >= stat)`` for ``X ~ chi2(df)``."""
    if df <= 0:
        return 1.0
    a = torch.tensor(df / 2.0, dtype=torch.float64)
    x = torch.tensor(max(stat, 0.0) / 2.0, dtype=torch.float64)
    return float(torch.special.gammaincc(a, x))


def goodness_of_fit_pvalue(counts: np.ndarray, probabilities: np.ndarray, trials: int) -> float:
    """Pearson's test of inclusion ``counts`` against ``trials · probabilities``.

    Each trial includes several items (without replacement), so the counts are
    not multinomial; their variances ``n p (1 - p)`` are below the multinomial
    ``E`` of Pearson's statistic, which makes the test conservative.
    """
    expected = trials * np.asarray(probabilities, dtype=np.float64)
    keep = expected > 0
    if np.any(np.asarray(counts)[~keep] > 0):
        return 0.0
    stat = float((((np.asarray(counts)[keep] - expected[keep]) ** 2) / expected[keep]).sum())
    return chi_square_pvalue(stat, int(keep.sum()) - 1)


def two_sample_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square test that two vectors of inclusion counts come from the same
    per-item distribution (a 2 x d contingency table; conservative as above)."""
    table = np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)])
    table = table[:, table.sum(axis=0) > 0]
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    return chi_square_pvalue(stat, table.shape[1] - 1)
