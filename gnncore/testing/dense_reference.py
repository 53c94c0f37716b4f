"""Slow pure-Python reference of DENSE sampling (thesis §3.3, Alg. 1).

It mirrors ``_C.sample_dense`` / ``_C.sample_dense_pyg`` on small inputs. The
random choices come from a NumPy generator and so differ from the kernel's;
when every fanout is ``-1`` or at least the largest degree the two agree
exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DenseLayout = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
PygLayout = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]


def sample_dense_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    targets: np.ndarray,
    fanouts: Sequence[int],
    rng: np.random.Generator,
) -> DenseLayout:
    """DENSE sampling with the output of ``_C.sample_dense``.

    Hop ``h`` samples up to ``fanouts[h]`` (``-1``: all) entries of the row of
    every node of the delta ``Δ_h`` (``Δ_0``: the unique targets) without
    replacement, sorted by CSR position; ``Δ_{h+1}`` is the sampled neighbours
    not seen before, in first-seen order. Layout, as in Alg. 1:
    ``node_ids = [Δ_k, ..., Δ_1, targets]``, ``node_id_offsets`` the block
    starts, ``nbrs`` the neighbours of ``node_ids[node_id_offsets[1]:]`` with
    CSR offsets ``nbr_offsets``, ``repr`` their indices in ``node_ids`` and
    ``nbr_edges`` their CSR positions.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    num_nodes = len(indptr) - 1
    seen: set[int] = set()
    delta: list[int] = []
    for t in np.asarray(targets, dtype=np.int64).tolist():
        if not 0 <= t < num_nodes:
            raise IndexError(f"target {t} is outside [0, {num_nodes})")
        if t not in seen:
            seen.add(t)
            delta.append(t)
    # Alg. 1, literally: each hop prepends the new delta and its neighbours.
    node_ids: list[int] = list(delta)
    node_id_offsets: list[int] = [0]
    nbr_lists: list[list[tuple[int, int]]] = []  # per node of node_ids minus outermost
    for fanout in fanouts:
        if fanout < -1:
            raise ValueError(f"fanout {fanout} is negative; use -1 for all neighbours")
        delta_nbrs: list[list[tuple[int, int]]] = []
        new: list[int] = []
        for v in delta:
            lo, hi = int(indptr[v]), int(indptr[v + 1])
            deg = hi - lo
            if fanout == -1 or fanout >= deg:
                offsets = list(range(deg))
            else:
                offsets = sorted(rng.choice(deg, size=fanout, replace=False).tolist())
            block = [(int(indices[lo + o]), lo + o) for o in offsets]
            delta_nbrs.append(block)
            for u, _ in block:
                if u not in seen:
                    seen.add(u)
                    new.append(u)
        nbr_lists = delta_nbrs + nbr_lists
        node_id_offsets = [0] + [o + len(new) for o in node_id_offsets]
        node_ids = new + node_ids
        delta = new
    index_of = {u: i for i, u in enumerate(node_ids)}
    nbrs = [u for block in nbr_lists for u, _ in block]
    nbr_edges = [j for block in nbr_lists for _, j in block]
    nbr_offsets = np.zeros(len(nbr_lists) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in nbr_lists], out=nbr_offsets[1:])
    as64 = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
    return (
        as64(node_ids),
        as64(node_id_offsets),
        as64(nbrs),
        nbr_offsets,
        as64([index_of[u] for u in nbrs]),
        as64(nbr_edges),
    )


def dense_to_pyg_reference(layout: DenseLayout) -> PygLayout:
    """The PyG layout of a DENSE sample, as ``_C.dense_to_pyg`` returns it.

    ``node = [targets, Δ_1, ..., Δ_k]``; hop ``h`` emits, for each node of
    ``Δ_{h-1}`` in order, its neighbours as ``row`` (local id of the
    neighbour), ``col`` (local id of the node) and ``edge`` (CSR position).
    """
    node_ids, starts, nbrs, nbr_offsets, repr_, nbr_edges = (np.asarray(a) for a in layout)
    n, k = len(node_ids), len(starts) - 1
    ends = list(starts[1:]) + [n]
    blocks = [(int(starts[j]), int(ends[j])) for j in range(k, -1, -1)]  # targets first
    order = np.concatenate([np.arange(a, b) for a, b in blocks]).astype(np.int64)
    hop_of = np.empty(n, dtype=np.int64)
    hop_of[order] = np.arange(n)
    expanded_begin = int(starts[1]) if k > 0 else n
    row: list[int] = []
    col: list[int] = []
    edge: list[int] = []
    num_edges: list[int] = []
    for a, b in blocks[:k]:
        count = 0
        for d in range(a, b):
            p = d - expanded_begin
            for t in range(int(nbr_offsets[p]), int(nbr_offsets[p + 1])):
                row.append(int(hop_of[repr_[t]]))
                col.append(int(hop_of[d]))
                edge.append(int(nbr_edges[t]))
                count += 1
        num_edges.append(count)
    return (
        node_ids[order].astype(np.int64),
        np.asarray(row, dtype=np.int64),
        np.asarray(col, dtype=np.int64),
        np.asarray(edge, dtype=np.int64),
        [b - a for a, b in blocks],
        num_edges,
    )
