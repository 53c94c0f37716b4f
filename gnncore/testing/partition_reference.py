"""Slow pure-Python references for the partitioning kernels.

Each mirrors a C++ kernel's documented rules (visiting order, scores, ties)
in the plainest form, so the tests can demand identical labels. Use them on
graphs of a few hundred nodes only.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from gnncore.store import create_graph_dir

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def stream_order_reference(num_nodes: int, seed: int) -> list[int]:
    """Nodes sorted by the splitmix64 key ``mix64(seed + (v + 1)·golden)``."""
    key = seed & _MASK
    return sorted(range(num_nodes), key=lambda v: _mix64((key + (v + 1) * _GOLDEN) & _MASK))


def _neighbours(indptr: np.ndarray, indices: np.ndarray, v: int) -> list[int]:
    return [int(u) for u in indices[int(indptr[v]) : int(indptr[v + 1])]]


def _stream(
    indptr: np.ndarray,
    indices: np.ndarray,
    parts: int,
    capacity: int,
    seed: int,
    score: Callable[[int, int], float],
) -> np.ndarray:
    n = len(indptr) - 1
    part = [-1] * n
    size = [0] * parts
    for v in stream_order_reference(n, seed):
        k = [0] * parts
        for u in _neighbours(indptr, indices, v):
            if part[u] >= 0:
                k[part[u]] += 1
        open_parts = [i for i in range(parts) if size[i] < capacity]
        # max score, then least loaded, then lowest id
        best = min(open_parts, key=lambda i: (-score(k[i], size[i]), size[i], i))
        part[v] = best
        size[best] += 1
    return np.array(part, dtype=np.int64)


def ldg_reference(
    indptr: np.ndarray, indices: np.ndarray, parts: int, capacity: int, seed: int
) -> np.ndarray:
    """LDG: ``argmax_i k_i·(1 − |P_i|/C)`` (ranked exactly as ``k_i·(C − |P_i|)``)."""
    return _stream(indptr, indices, parts, capacity, seed, lambda k, size: k * (capacity - size))


def fennel_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    parts: int,
    capacity: int,
    alpha: float,
    gamma: float,
    seed: int,
) -> np.ndarray:
    """Fennel: ``argmax_i k_i − α·γ·|P_i|^(γ−1)`` in double precision."""
    return _stream(
        indptr,
        indices,
        parts,
        capacity,
        seed,
        lambda k, size: float(k) - alpha * gamma * float(size) ** (gamma - 1.0),
    )


def bytegnn_blocks_reference(
    indptr: np.ndarray, indices: np.ndarray, centres: Sequence[int], hops: int
) -> tuple[np.ndarray, np.ndarray]:
    """One BFS per centre; a node within ``hops`` of some centre joins the
    block of its nearest centre (the smallest id on a tie) and its level is
    that distance; other nodes are singletons (block = own id, level -1)."""
    n = len(indptr) - 1
    best: list[tuple[int, int] | None] = [None] * n  # (distance, centre)
    for c in sorted(int(x) for x in centres):
        dist = {c: 0}
        queue = deque([c])
        while queue:
            u = queue.popleft()
            if dist[u] == hops:
                continue
            for w in _neighbours(indptr, indices, u):
                if w not in dist:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        for w, d in dist.items():
            current = best[w]
            if current is None or (d, c) < current:
                best[w] = (d, c)
    block = np.array([v if b is None else b[1] for v, b in enumerate(best)], dtype=np.int64)
    level = np.array([-1 if b is None else b[0] for b in best], dtype=np.int64)
    return block, level


def bytegnn_assign_reference(
    indptr: np.ndarray,
    indices: np.ndarray,
    block: np.ndarray,
    level: np.ndarray,
    split_of: np.ndarray,
    parts: int,
    capacity: int,
    weights: Sequence[float],
) -> np.ndarray:
    """Algorithm 2 as documented in ``csrc/partition/bytegnn.h``."""
    n = len(indptr) - 1
    members: dict[int, list[int]] = {}
    for v in range(n):
        members.setdefault(int(block[v]), []).append(v)
    total = [int(np.sum(split_of == x)) for x in range(3)]
    expected = [t / parts for t in total]

    def block_key(b: int) -> tuple[int, int, int]:
        counts = [sum(1 for v in members[b] if split_of[v] == x) for x in range(3)]
        return (-max(counts), -len(members[b]), b)

    part = [-1] * n
    size = [0] * parts
    split = [[0, 0, 0] for _ in range(parts)]

    def bs(j: int) -> float:
        b = 1.0
        for x in range(3):
            b = b - (weights[x] * (split[j][x] / expected[x]) if expected[x] > 0 else 0.0)
        return b

    for b in sorted(members, key=block_key):
        nodes = sorted(members[b], key=lambda v: (int(level[v]), v))
        ce = [0] * parts
        for v in nodes:
            for u in _neighbours(indptr, indices, v):
                if part[u] >= 0:
                    ce[part[u]] += 1
        fits = [j for j in range(parts) if size[j] + len(nodes) <= capacity]
        candidates = fits or [j for j in range(parts) if size[j] < capacity]
        score = {j: (ce[j] / size[j]) * bs(j) for j in candidates if size[j] > 0}
        guard = len(score) < len(candidates) or all(s == 0.0 for s in score.values())
        if guard:
            ranked = sorted(candidates, key=lambda j: (size[j], j))
        else:
            ranked = sorted(candidates, key=lambda j: (-score[j], size[j], j))
        c = 0
        for v in nodes:
            while not fits and size[ranked[c]] >= capacity:
                c += 1
            j = ranked[c]
            part[v] = j
            size[j] += 1
            if split_of[v] >= 0:
                split[j][int(split_of[v])] += 1
    return np.array(part, dtype=np.int64)


def halo_reference(
    indptr: np.ndarray, indices: np.ndarray, assignment: np.ndarray, parts: int
) -> list[np.ndarray]:
    """Per part, the sorted nodes outside it that have a neighbour inside it."""
    halos: list[set[int]] = [set() for _ in range(parts)]
    for v in range(len(indptr) - 1):
        for u in _neighbours(indptr, indices, v):
            if assignment[u] != assignment[v]:
                halos[int(assignment[v])].add(u)
    return [np.array(sorted(h), dtype=np.int64) for h in halos]


def relabel_reference(assignment: np.ndarray, parts: int) -> tuple[list[int], list[int]]:
    """``(old_of_new, offsets)``: part 0's nodes in id order, then part 1's, …"""
    old_of_new: list[int] = []
    offsets = [0]
    for i in range(parts):
        old_of_new += [v for v in range(len(assignment)) if assignment[v] == i]
        offsets.append(len(old_of_new))
    return old_of_new, offsets


def write_random_graph(
    out: str | os.PathLike[str],
    num_nodes: int,
    num_edges: int,
    seed: int,
    labelled: float = 0.3,
    isolated: int = 3,
) -> Path:
    """A random undirected graph directory for the partitioning tests.

    Edges join uniform pairs, a third of them inside ten id-blocks so the
    graph has structure; the last ``isolated`` nodes have no edges; a
    ``labelled`` fraction of the nodes is split 50/25/25 into train/val/test
    (no splits when ``labelled`` is 0). Returns the path.
    """
    rng = np.random.default_rng(seed)
    span = num_nodes - isolated
    src = rng.integers(0, span, num_edges)
    near = rng.random(num_edges) < 1 / 3
    width = max(span // 10, 2)
    dst = np.where(
        near,
        np.minimum(src // width * width + rng.integers(0, width, num_edges), span - 1),
        rng.integers(0, span, num_edges),
    )
    keep = src != dst
    u, v = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    key = np.unique(u * num_nodes + v)
    with create_graph_dir(out, name="random") as w:
        w.write_topology(num_nodes, key // num_nodes, key % num_nodes, directed=False)
        if labelled > 0:
            chosen = rng.permutation(num_nodes)[: max(int(labelled * num_nodes), 3)]
            a, b = len(chosen) // 2, len(chosen) * 3 // 4
            w.save_splits(np.sort(chosen[:a]), np.sort(chosen[a:b]), np.sort(chosen[b:]))
    return Path(out)
