"""Slow pure-Python references for biased DENSE sampling (:mod:`gnncore.sampler.biased`).

They cover the deterministic parts of ``_C.sample_biased_pyg`` and the
planning helpers: the window a pruned row is read through given its offset,
the edge weights of locality-aware sampling (Song & Jiang formula (8), its
``M`` corrected), the exact inclusion probabilities of weighted sampling
without replacement (Efraimidis--Spirakis = successive sampling), the boost
sets ``Q'_l``, Algorithm 2 of the scale controller and the remote-read
counts. Plus chi-square p-values for the statistical tests (through
``torch.special.gammaincc``; no SciPy needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


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


def las_edge_weights(boosted: Sequence[bool], fanout: int, scale: float) -> np.ndarray:
    """``c_j = q_j / q_new_j`` for every entry of a row (or window) of length ``d``.

    Literally formula (8) with ``M`` the right way up: ``q_j = min(1, f/d)``,
    ``w_j = scale`` if boosted else 1, ``M = Σ q / Σ w q``, ``q_new = w q M``.
    When the whole row is taken (``fanout < 0`` or ``fanout >= d``) every entry
    is included with probability 1 and ``c = 1``.
    """
    d = len(boosted)
    if d == 0:
        return np.zeros(0)
    if fanout < 0 or fanout >= d:
        return np.ones(d)
    q = [min(1.0, fanout / d)] * d
    w = [scale if b else 1.0 for b in boosted]
    m = sum(q) / sum(wj * qj for wj, qj in zip(w, q))
    return np.array([qj / (wj * qj * m) for wj, qj in zip(w, q)])


def es_inclusion_probabilities(weights: Sequence[float], k: int) -> np.ndarray:
    """Exact inclusion probabilities of drawing ``k`` of ``len(weights)`` items
    without replacement, each draw proportional to the remaining weights
    (what Efraimidis--Spirakis keys sample). Exponential: ``len(weights) <= 16``."""
    w = [float(x) for x in weights]
    d = len(w)
    if d > 16:
        raise ValueError("es_inclusion_probabilities is exponential; use <= 16 items")
    k = min(k, d)
    layer: dict[int, float] = {0: 1.0}
    for _ in range(k):
        nxt: dict[int, float] = {}
        for mask, p in layer.items():
            left = sum(w[j] for j in range(d) if not mask >> j & 1)
            for j in range(d):
                if not mask >> j & 1:
                    key = mask | 1 << j
                    nxt[key] = nxt.get(key, 0.0) + p * w[j] / left
        layer = nxt
    out = np.zeros(d)
    for mask, p in layer.items():
        for j in range(d):
            if mask >> j & 1:
                out[j] += p
    return out


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
