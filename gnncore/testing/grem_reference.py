"""A slow, literal pure-Python GREM bisection (ALGORITHMS.md §1) to check the C++ one.

It follows the pseudo-code line by line, with ``cnt_nbrs`` as printed in the
thesis (Alg. 5: scan every edge of the chunk for every node, reading the
*current* labels), so it is O(nodes × chunk) per chunk: small inputs only.
Given the same seed labels, chunk size and edge order it must return exactly
what ``gnncore._C.grem_bisect`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class ReferenceBisection:
    """Result of :func:`grem_bisect_reference`."""

    side: np.ndarray  # int8, aligned with members
    sizes: tuple[int, int]
    # int64 [k, 2] per side, in stream order, in the side's own ids (see grem_bisect)
    side_edges: tuple[np.ndarray, np.ndarray]
    num_chunks: int
    isolated: int
    reassigned: int
    moves: list[int]


class _Sides:
    """The two sides of a bisection as the reference builds them: each node's
    side (-1: none yet), the side sizes, capacities and target shares."""

    def __init__(
        self, members: Sequence[int], capacities: tuple[int, int], weights: tuple[int, int]
    ) -> None:
        self.part = {int(m): -1 for m in members}
        self.sizes = [0, 0]
        self.capacities = capacities
        self.weights = weights

    def room(self, s: int, old: int) -> bool:
        """Whether side ``s`` takes one more node (a node already in ``s`` is not
        counted twice)."""
        return self.sizes[s] - (1 if old == s else 0) < self.capacities[s]

    def less_full(self, old: int) -> int:
        """argmin(sizes), relative to the target shares, with room if one side has."""
        w = self.weights
        j = 0 if self.sizes[0] * w[1] <= self.sizes[1] * w[0] else 1
        if not self.room(j, old) and self.room(1 - j, old):
            j = 1 - j
        return j

    def choose(self, k0: float, k1: float, old: int) -> int:
        """The side with more neighbours (estimates ``k0``, ``k1``) while it has room."""
        if k0 < k1 and self.room(1, old):
            return 1
        if k1 < k0 and self.room(0, old):
            return 0
        return self.less_full(old)

    def move(self, node: int, new: int) -> None:
        old = self.part[node]
        self.part[node] = new
        self.sizes[new] += 1
        if old != -1:
            self.sizes[old] -= 1

    def neighbour_counts(self, n: int, chunk: list[tuple[int, int]]) -> list[int]:
        """Neighbours of ``n`` in ``chunk`` on each side (unplaced ones not counted)."""
        counts = [0, 0]
        for src, dst in chunk:
            if src == n or dst == n:
                nbr = src if dst == n else dst
                if self.part[nbr] != -1:
                    counts[self.part[nbr]] += 1
        return counts


def grem_bisect_reference(
    edges: np.ndarray,
    members: Sequence[int],
    chunk_rows: int,
    seed_nodes: Sequence[int],
    seed_sides: Sequence[int],
    capacities: tuple[int, int],
    weights: tuple[int, int] = (1, 1),
    refine: bool = True,
    passes: int = 0,
) -> ReferenceBisection:
    """One bisection: seed, GREM (or greedy) pass, isolated nodes, restreaming
    passes, split of the edges.

    Args:
        edges: ``[E, 2]`` node pairs in stream order.
        members: The sub-problem's nodes (isolated ones are placed in this order).
        chunk_rows: Edges per chunk.
        seed_nodes, seed_sides: Labels (0/1) of exactly the first chunk's nodes.
        capacities: ``P`` of each side.
        weights: Target shares ``w0 : w1`` (ties go to the side with the
            smaller ``size / weight``, then side 0).
        refine: GREM's averaging (``False``: a node keeps its first label).
        passes: Restreaming refinement passes (stop early when one moves nothing).
    """
    pairs = [(int(u), int(v)) for u, v in np.asarray(edges).reshape(-1, 2)]
    sides = _Sides(members, capacities, weights)
    chunks = [pairs[i : i + chunk_rows] for i in range(0, len(pairs), chunk_rows)]
    seeds = {int(n): int(s) for n, s in zip(seed_nodes, seed_sides)}
    reassigned = _grem_pass(sides, chunks, seeds, refine)
    isolated = 0
    for m in members:
        if sides.part[int(m)] == -1:
            sides.move(int(m), sides.less_full(-1))
            isolated += 1
    moves: list[int] = []
    for _ in range(passes):
        moves.append(_restream(sides, pairs, members))
        if moves[-1] == 0:
            break
    part = sides.part
    # each side's edges in that side's own ids: ranks among its members by id
    rank = {
        s: {x: i for i, x in enumerate(sorted(x for x in part if part[x] == s))} for s in (0, 1)
    }
    side_edges = tuple(
        np.asarray(
            [(rank[s][u], rank[s][v]) for u, v in pairs if part[u] == part[v] == s], dtype=np.int64
        ).reshape(-1, 2)
        for s in (0, 1)
    )
    return ReferenceBisection(
        side=np.asarray([part[int(m)] for m in members], dtype=np.int8),
        sizes=(sides.sizes[0], sides.sizes[1]),
        side_edges=side_edges,  # type: ignore[arg-type]
        num_chunks=len(chunks),
        isolated=isolated,
        reassigned=reassigned,
        moves=moves,
    )


def _grem_pass(
    sides: _Sides, chunks: list[list[tuple[int, int]]], seeds: dict[int, int], refine: bool
) -> int:
    """The seeded first chunk, then GREM (or greedy) over the others; returns
    how many placed nodes changed side."""
    est: dict[int, tuple[float, float]] = {}  # nbr_counts
    reassigned = 0
    for i, chunk in enumerate(chunks):
        c_nodes: list[int] = []
        for pair in chunk:
            for x in pair:
                if x not in c_nodes:
                    c_nodes.append(x)
        if i == 0:
            if sorted(seeds) != sorted(c_nodes):
                raise ValueError("the seed must label exactly the first chunk's nodes")
            for n in c_nodes:
                sides.move(n, seeds[n])
            for n in c_nodes:
                c0, c1 = sides.neighbour_counts(n, chunk)
                est[n] = (c0, c1)
            continue
        for n in c_nodes:
            old = sides.part[n]
            if old != -1 and not refine:
                continue
            n0, n1 = sides.neighbour_counts(n, chunk)
            k0, k1 = (
                (float(n0), float(n1))
                if old == -1
                else ((est[n][0] + n0) / 2, (est[n][1] + n1) / 2)
            )
            new = sides.choose(k0, k1, old)
            if old != -1 and new != old:
                reassigned += 1
            sides.move(n, new)
            est[n] = (k0, k1)
    return reassigned


def _restream(sides: _Sides, pairs: list[tuple[int, int]], members: Sequence[int]) -> int:
    """One restreaming refinement pass: nodes with positive gain move, best
    gain first, alternating sides by gain within the capacities; returns the moves."""
    part, sizes, weights = sides.part, sides.sizes, sides.weights
    count = {int(m): [0, 0] for m in members}
    for u, v in pairs:
        count[u][part[v]] += 1
        count[v][part[u]] += 1
    cand: list[list[tuple[int, int]]] = [[], []]
    for m in members:
        s = part[int(m)]
        gain = count[int(m)][1 - s] - count[int(m)][s]
        if gain > 0:
            cand[s].append((gain, int(m)))
    for c in cand:
        c.sort(key=lambda t: (-t[0], t[1]))
    nxt = [0, 0]
    moved = 0
    while True:
        has = [nxt[0] < len(cand[0]), nxt[1] < len(cand[1])]
        if not any(has):
            break
        if all(has):
            g0, g1 = cand[0][nxt[0]][0], cand[1][nxt[1]][0]
            if g0 != g1:
                s = 0 if g0 > g1 else 1
            else:  # equal gains: leave the fuller side
                s = 1 if sizes[1] * weights[0] > sizes[0] * weights[1] else 0
        else:
            s = 0 if has[0] else 1
        if not sides.room(1 - s, s):  # receiving side full: try the other direction
            s = 1 - s
            if not has[s] or not sides.room(1 - s, s):
                break
        node = cand[s][nxt[s]][1]
        nxt[s] += 1
        sides.move(node, 1 - s)
        moved += 1
    return moved


# Chunk renumbering and CSR: the numpy formulations the C++ helpers replace -------------


def first_appearance_reference(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in first-appearance order and the pairs over those local ids
    (a sort-based numpy version of ``gnncore.partition.grem.chunk.first_appearance``)."""
    flat = np.asarray(pairs, dtype=np.int64).reshape(-1)
    uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    return uniq[order], rank[inverse].reshape(-1, 2)


def chunk_nodes_local_reference(pairs: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in increasing id order and the pairs over those local ids."""
    flat = np.asarray(pairs, dtype=np.int64).reshape(-1)
    nodes = np.unique(flat)
    assert not len(nodes) or (nodes[0] >= 0 and nodes[-1] < num_nodes)
    return nodes, np.searchsorted(nodes, flat).reshape(-1, 2)


def chunk_csr_reference(local_pairs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric CSR of local pairs over ``n`` ids, each row sorted by neighbour id."""
    local = np.asarray(local_pairs, dtype=np.int64).reshape(-1, 2)
    src = np.concatenate([local[:, 0], local[:, 1]])
    dst = np.concatenate([local[:, 1], local[:, 0]])
    order = np.lexsort((dst, src))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[order]


def tree_roots_reference(adjacency: Sequence[Sequence[int]], max_weight: int) -> list[int]:
    """Literal tree peeling (what ``gnncore._C.grem_tree_roots`` computes): nodes of
    degree 1, queued in id order and then as they reach degree 1, join their one
    remaining neighbour while the two trees hold at most ``max_weight`` nodes;
    returns each node's root (itself for the nodes left)."""
    n = len(adjacency)
    alive = [True] * n
    degree = [len(a) for a in adjacency]
    weight = [1] * n
    parent = list(range(n))
    queue = [x for x in range(n) if degree[x] == 1]
    head = 0
    while head < len(queue):
        x = queue[head]
        head += 1
        if not alive[x] or degree[x] != 1:
            continue
        y = next(z for z in adjacency[x] if alive[z])
        if weight[x] + weight[y] > max_weight:
            continue
        weight[y] += weight[x]
        alive[x] = False
        parent[x] = y
        degree[y] -= 1
        if degree[y] == 1:
            queue.append(y)

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    return [root(x) for x in range(n)]


def majority_rounds_reference(local: np.ndarray, side: np.ndarray, rounds: int) -> np.ndarray:
    """Synchronous majority labelling (what ``gnncore._C.grem_majority_rounds``
    does in place), vectorised: each round, every unlabelled node takes the side
    more of its labelled neighbours hold (ties stay -1); stops when a round
    labels nothing. Returns the new sides."""
    sides = np.array(side, dtype=np.int64)
    n = len(sides)
    local = np.asarray(local, dtype=np.int64).reshape(-1, 2)
    open_edges = local[(sides[local[:, 0]] < 0) | (sides[local[:, 1]] < 0)]
    for _ in range(rounds):
        if not len(open_edges):
            break
        votes = np.zeros(2 * n, dtype=np.int64)
        for x, y in ((0, 1), (1, 0)):
            sx, sy = sides[open_edges[:, x]], sides[open_edges[:, y]]
            m = (sx < 0) & (sy >= 0)
            votes += np.bincount(open_edges[m, x] * 2 + sy[m], minlength=2 * n)
        pair_votes = votes.reshape(n, 2)
        decide = (sides < 0) & (pair_votes[:, 0] != pair_votes[:, 1])
        if not decide.any():
            break
        sides[decide] = (pair_votes[decide, 1] > pair_votes[decide, 0]).astype(np.int64)
        open_edges = open_edges[(sides[open_edges[:, 0]] < 0) | (sides[open_edges[:, 1]] < 0)]
    return sides
