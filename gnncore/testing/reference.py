"""Slow pure-Python/NumPy references that the C++ kernels are checked against.

They favour being obviously correct over speed; use them on small inputs only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def seed_nodes_reference(
    seeds: Sequence[int] | np.ndarray, num_nodes: int
) -> tuple[list[int], dict[int, int]]:
    """The first nodes of a sample: the distinct ``seeds`` in first-seen order
    and each one's local id; a seed outside ``[0, num_nodes)`` raises ``IndexError``."""
    node: list[int] = []
    local_of: dict[int, int] = {}
    for s in np.asarray(seeds, dtype=np.int64).tolist():
        if not 0 <= s < num_nodes:
            raise IndexError(f"seed {s} is outside [0, {num_nodes})")
        if s not in local_of:
            local_of[s] = len(node)
            node.append(s)
    return node, local_of


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

    def draw(hop: int, pos: int, degree: int, fanout: int) -> list[int]:
        if degree == 0:
            return []
        if fanout == -1 or (not replace and fanout >= degree):
            return list(range(degree))
        if replace:
            return sorted(rng.integers(0, degree, size=fanout).tolist())
        return sorted(rng.choice(degree, size=fanout, replace=False).tolist())

    return sample_hops_reference(indptr, indices, seeds, fanouts, draw)


#: ``draw(hop, position, degree, fanout) -> offsets``: the row offsets sampled
#: for the node at ``position`` of the block a hop expands.
RowDraw = Callable[[int, int, int, int], list[int]]


def sample_hops_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: Sequence[int] | np.ndarray,
    fanouts: Sequence[int],
    draw: RowDraw,
    resample: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]:
    """The hop loop of the sampler references, rows drawn by ``draw``.

    Hop ``h`` expands the nodes first reached at hop ``h - 1`` (the seeds at
    hop 0), or with ``resample`` every node known so far; each drawn offset of
    row ``v`` emits ``row`` = local id of its neighbour (new nodes appended in
    first-seen order), ``col`` = local id of ``v``, ``edge`` = CSR position.
    Returns ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    node, local_of = seed_nodes_reference(seeds, len(indptr) - 1)
    row: list[int] = []
    col: list[int] = []
    edge: list[int] = []
    num_sampled_nodes = [len(node)]
    num_sampled_edges: list[int] = []
    begin = 0
    for hop, fanout in enumerate(fanouts):
        if fanout < -1:
            raise ValueError(f"fanout {fanout} is negative; use -1 for all neighbours")
        frontier = len(node)
        first = 0 if resample else begin
        emitted = 0
        for target in range(first, frontier):
            v = node[target]
            lo, hi = int(indptr[v]), int(indptr[v + 1])
            for off in draw(hop, target - first, hi - lo, fanout):
                j = lo + off
                u = int(indices[j])
                if u not in local_of:
                    local_of[u] = len(node)
                    node.append(u)
                row.append(local_of[u])
                col.append(target)
                edge.append(j)
                emitted += 1
        num_sampled_nodes.append(len(node) - frontier)
        num_sampled_edges.append(emitted)
        begin = frontier
    as64 = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
    return (as64(node), as64(row), as64(col), as64(edge), num_sampled_nodes, num_sampled_edges)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _stream(key: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Output ``counter`` of the splitmix64 stream that starts at ``key``."""
    with np.errstate(over="ignore"):
        return _mix64(
            np.asarray(key, dtype=np.uint64)
            + (np.asarray(counter, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
        )


def synth_feature_rows_reference(
    centroids: np.ndarray,
    labels: np.ndarray,
    rows: np.ndarray,
    seed: int,
    noise: float,
) -> np.ndarray:
    """The feature rows ``rows`` that ``_C.fill_features`` writes, in NumPy.

    Row ``r`` is ``centroids[labels[r]] + noise * z`` where the standard
    normals ``z`` come from Box-Muller on splitmix64 counters keyed by
    ``(seed, r)``: features ``2p`` and ``2p + 1`` use counters ``2p`` and
    ``2p + 1`` of the stream keyed by ``stream(mix64(mix64(seed) + 2), r)``.
    """
    centroids = np.asarray(centroids, dtype=np.float32)
    num_features = centroids.shape[1]
    rows = np.asarray(rows, dtype=np.int64)
    with np.errstate(over="ignore"):
        key = _mix64(_mix64(np.asarray(np.uint64(seed % 2**64))) + np.uint64(2))
    row_key = _stream(key, rows.astype(np.uint64))[:, None]
    pairs = np.arange(0, num_features, 2, dtype=np.uint64)[None, :]
    a = _stream(row_key, pairs)
    b = _stream(row_key, pairs + np.uint64(1))
    u1 = ((a >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
    u2 = (b >> np.uint64(11)).astype(np.float64) * 2.0**-53
    radius = np.sqrt(-2.0 * np.log(u1))
    z = np.empty((len(rows), 2 * pairs.shape[1]), dtype=np.float64)
    z[:, 0::2] = (noise * radius) * np.cos(6.283185307179586 * u2)
    z[:, 1::2] = (noise * radius) * np.sin(6.283185307179586 * u2)
    mu = centroids[np.asarray(labels, dtype=np.int64)[rows]].astype(np.float64)
    return (mu + z[:, :num_features]).astype(np.float32)
