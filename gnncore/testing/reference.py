"""Slow pure-Python/NumPy references that the C++ kernels are checked against.

They favour being obviously correct over speed; use them on small inputs only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def sample_neighbors_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    fanouts: Sequence[int],
    rng: np.random.Generator,
    replace: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]:
    """Multi-hop uniform neighbour sampling with the output of ``_C.sample_neighbors``.

    Row ``v`` of the CSR lists the nodes whose messages flow into ``v``. ``node``
    starts with the unique seeds in order; hop ``h`` samples up to ``fanouts[h]``
    (``-1``: all) entries of the row of every node first added in hop ``h - 1``
    (hop 0: the seeds). Each sampled CSR position ``j`` of row ``v`` emits
    ``row`` = local id of ``indices[j]`` (new nodes appended in first-seen
    order), ``col`` = local id of ``v`` and ``edge`` = ``j``; the positions
    sampled for one target are emitted in increasing order, as the C++ kernel
    does. The random choices come from ``rng`` and so differ from the kernel's;
    when every fanout is ``-1`` or at least the largest degree the two agree
    exactly.

    Returns:
        ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``: four
        int64 arrays and two lists of ints.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    num_nodes = len(indptr) - 1
    node: list[int] = []
    local_of: dict[int, int] = {}
    for s in np.asarray(seeds, dtype=np.int64).tolist():
        if not 0 <= s < num_nodes:
            raise IndexError(f"seed {s} is outside [0, {num_nodes})")
        if s not in local_of:
            local_of[s] = len(node)
            node.append(s)
    row: list[int] = []
    col: list[int] = []
    edge: list[int] = []
    num_sampled_nodes = [len(node)]
    num_sampled_edges: list[int] = []
    begin = 0
    for fanout in fanouts:
        if fanout < -1:
            raise ValueError(f"fanout {fanout} is negative; use -1 for all neighbours")
        end = len(node)
        emitted = 0
        for target in range(begin, end):
            v = node[target]
            lo, hi = int(indptr[v]), int(indptr[v + 1])
            deg = hi - lo
            if deg == 0:
                continue
            if fanout == -1 or (not replace and fanout >= deg):
                offsets = list(range(deg))
            elif replace:
                offsets = sorted(rng.integers(0, deg, size=fanout).tolist())
            else:
                offsets = sorted(rng.choice(deg, size=fanout, replace=False).tolist())
            for off in offsets:
                j = lo + off
                u = int(indices[j])
                if u not in local_of:
                    local_of[u] = len(node)
                    node.append(u)
                row.append(local_of[u])
                col.append(target)
                edge.append(j)
                emitted += 1
        num_sampled_nodes.append(len(node) - end)
        num_sampled_edges.append(emitted)
        begin = end
    return (
        np.asarray(node, dtype=np.int64),
        np.asarray(row, dtype=np.int64),
        np.asarray(col, dtype=np.int64),
        np.asarray(edge, dtype=np.int64),
        num_sampled_nodes,
        num_sampled_edges,
    )
