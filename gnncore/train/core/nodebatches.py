"""Node batches of layer-wise inference: contiguous ranges of targets bounded in
nodes and in-edges (:func:`node_batches`), none straddling a part's bounds
(:func:`part_batches`, a partitioned store's order)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def node_batches(indptr: np.ndarray, batch_size: int, max_edges: int) -> Iterator[tuple[int, int]]:
    """Contiguous ``[a, b)`` covering every node: at most ``batch_size`` nodes and
    at most ``max_edges`` in-edges, except that a batch always holds one node."""
    if batch_size < 1 or max_edges < 1:
        raise ValueError(f"batch_size and max_edges must be >= 1, got {batch_size}, {max_edges}")
    indptr = np.asarray(indptr)
    n = len(indptr) - 1
    a = 0
    while a < n:
        by_nodes = min(a + batch_size, n)
        by_edges = int(np.searchsorted(indptr, indptr[a] + max_edges, side="right")) - 1
        b = max(a + 1, min(by_nodes, by_edges))
        yield a, b
        a = b


def count_batches(
    indptr: np.ndarray, batch_size: int, max_edges: int, bounds: np.ndarray | None = None
) -> int:
    """The number of batches :func:`part_batches` gives."""
    return sum(1 for _ in part_batches(indptr, bounds, batch_size, max_edges))


def part_batches(
    indptr: np.ndarray, bounds: np.ndarray | None, batch_size: int, max_edges: int
) -> Iterator[tuple[int, int]]:
    """:func:`node_batches`, none straddling a bound: with ``bounds`` (``p + 1``
    ascending node ids from 0 to ``N``, a partitioned store's partition offsets)
    each batch lies inside one part ``[bounds[k], bounds[k + 1])``."""
    if bounds is None:
        yield from node_batches(indptr, batch_size, max_edges)
        return
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        for a, b in node_batches(indptr[lo : hi + 1], batch_size, max_edges):
            yield lo + a, lo + b
