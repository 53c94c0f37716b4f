"""Slow pure-Python references for the planning kernels.

Each mirrors a C++ kernel of ``gnncore._C`` (``access_reach``,
``access_spmv``, ``place_features``, ``degree_greedy_assign``) in the
plainest form, with the same rules and ties, so the tests can demand
identical results. Use them on graphs of a few hundred nodes only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _row(indptr: np.ndarray, indices: np.ndarray, t: int) -> list[int]:
    return [int(u) for u in indices[int(indptr[t]) : int(indptr[t + 1])]]


def access_reach_reference(
    indptr: np.ndarray, indices: np.ndarray, train: Sequence[int] | np.ndarray, layers: int
) -> np.ndarray:
    """``f[j]`` = distinct training nodes ``t`` with ``j`` within ``layers`` hops of
    ``t`` along rows (distance 0 included); repeated training ids count once."""
    n = len(indptr) - 1
    f = np.zeros(n, dtype=np.int64)
    for t in {int(x) for x in train}:
        reached = {t}
        frontier = {t}
        for _ in range(layers):
            frontier = {u for v in frontier for u in _row(indptr, indices, v)} - reached
            reached |= frontier
        for j in reached:
            f[j] += 1
    return f


def access_spmv_reference(
    indptr: np.ndarray, indices: np.ndarray, train: Sequence[int] | np.ndarray, layers: int
) -> np.ndarray:
    """``(A + I)^layers · 1_train`` by a dense matrix power, ``A[j, t]`` = the
    occurrences of ``j`` in row ``t``; repeated training ids count once."""
    n = len(indptr) - 1
    a = np.eye(n)
    for t in range(n):
        for u in _row(indptr, indices, t):
            a[u, t] += 1.0
    x = np.zeros(n)
    x[np.unique(np.asarray(train, dtype=np.int64))] = 1.0
    return np.linalg.matrix_power(a, layers) @ x


def place_features_reference(
    p: Sequence[float] | np.ndarray, devices: int, slots: int, alpha: float
) -> np.ndarray:
    """ALGORITHMS.md §4 Rule 2 (corrected Algorithm 1), line by line:
    ``int64[devices, min(slots, N)]``, row ``d`` the nodes device ``d`` caches."""
    pv = [float(x) for x in p]
    n = len(pv)
    size = min(slots, n)
    order_v = sorted(range(n), key=lambda v: (-pv[v], v))  # stable argsort, descending
    b = [order_v[:size] for _ in range(devices)]
    p_sum = [0.0] * devices
    nxt, lim = size, min(n, devices * size)

    def done() -> np.ndarray:
        return np.array(b, dtype=np.int64).reshape(devices, size)

    for r in range(size):
        oi = size - 1 - r
        old = order_v[oi]
        order = sorted(range(devices), key=lambda d: (p_sum[d], d))
        for k in range(devices - 1):  # the last device in `order` keeps `old`
            if nxt >= lim:
                return done()
            new = order_v[nxt]
            if pv[new] > alpha * pv[old]:
                b[order[k]][oi] = new
                p_sum[order[k]] += pv[new]
                nxt += 1
            else:
                return done()
    return done()


def degree_greedy_assign_reference(
    degree: Sequence[int] | np.ndarray,
    parts: int,
    group_size: int,
    skip: Sequence[int] | np.ndarray | None = None,
) -> np.ndarray:
    """HyDRA's greedy (ALGORITHMS.md §3): the unskipped nodes by degree descending
    (ties: smaller id) in groups of ``group_size``, each group to the part with
    the least degree sum (ties: smaller part); skipped nodes get -1."""
    deg = [int(d) for d in degree]
    n = len(deg)
    kept = [v for v in range(n) if skip is None or not skip[v]]
    kept.sort(key=lambda v: (-deg[v], v))
    owner = [-1] * n
    load = [0] * parts
    for start in range(0, len(kept), group_size):
        group = kept[start : start + group_size]
        part = min(range(parts), key=lambda j: (load[j], j))
        for v in group:
            owner[v] = part
        load[part] += sum(deg[v] for v in group)
    return np.array(owner, dtype=np.int64)
