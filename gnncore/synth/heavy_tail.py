"""Heavy-tailed graphs without planted communities: Chung-Lu and bipartite Zipf.

Two models beside the planted partition of :mod:`gnncore.synth.model`
(``SynthSpec.model``), for what real graphs look like when nobody planted
communities in them: a few hubs with a large share of the edges and a long
tail of nodes of degree one or two.

``powerlaw`` (Chung-Lu)
    Node of rank ``i`` (0-based) has weight ``w_i = (i + 1) ** (-1 / (gamma - 1))``
    with ``gamma = power_law_exponent``: a Zipf law of the ranks, so the
    degrees follow ``P(d) ~ d ** -gamma``. Each of the ``M`` edges draws both
    ends independently in proportion to ``w``, so node ``i`` has expected
    degree ``avg_degree * w_i / mean(w)``. The largest weights are not capped:
    the hubs get repeated pairs and a few self-loops, which ingestion drops
    and counts, as it does for real edge lists.

``bipartite``
    The first ``round(left_fraction * num_nodes)`` node ids are the left side,
    the rest the right side (two node types, each a contiguous id range).
    Each edge draws its left end by a Zipf law of exponent
    ``power_law_exponent`` over the left side and its right end by one of
    exponent ``right_exponent`` (default: the same) over the right side, so
    no edge joins two nodes of one side.

Ranks are dealt to node ids by a seeded permutation (inside each side for
``bipartite``), so hubs sit anywhere in the id range. Edge ``e`` depends only
on ``(seed, e)``: edges are drawn in fixed blocks of :data:`EDGE_BLOCK`, block
``b`` from the NumPy stream ``(seed, tag, b)``, and re-cut into the requested
chunks, so the stream is the same for every chunk size. Memory: the
cumulative weights and the rank-to-node maps (16 bytes a node) plus one block
and one chunk.

Labels are uniform random classes (stream ``(seed, labels tag)``), independent
of the structure; features are class-conditional as in the planted model.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

HEAVY_TAILED_MODELS = ("powerlaw", "bipartite")
"""The models this module draws (``SynthSpec.model``)."""
EDGE_BLOCK = 1 << 20
"""Edges drawn per NumPy stream: the unit that makes the stream chunk-free."""

_TAG_ORDER = 11
_TAG_EDGES = 12
_TAG_LABELS = 13


def _rng(seed: int, *tags: int) -> np.random.Generator:
    return np.random.default_rng([seed, *tags])


def zipf_cdf(count: int, exponent: float) -> np.ndarray:
    """Cumulative Zipf weights ``(i + 1) ** (-1 / (exponent - 1))``, ending at 1.

    Args:
        count: Nodes on the side (at least 1).
        exponent: Degree exponent ``gamma`` (above 1).

    Returns:
        float64[count], non-decreasing, last value exactly 1.
    """
    cdf = np.arange(1, count + 1, dtype=np.float64)
    cdf **= -1.0 / (exponent - 1.0)
    np.cumsum(cdf, out=cdf)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf


class _Side:
    """One side's draw: a uniform number to a rank by the CDF, the rank to a node id."""

    def __init__(self, seed: int, tag: int, first: int, count: int, exponent: float) -> None:
        self.cdf = zipf_cdf(count, exponent)
        self.node = _rng(seed, _TAG_ORDER, tag).permutation(count).astype(np.int64)
        self.node += first

    def draw(self, uniform: np.ndarray) -> np.ndarray:
        rank = np.searchsorted(self.cdf, uniform, side="right")
        np.minimum(rank, len(self.cdf) - 1, out=rank)  # uniform < 1, but be safe
        return self.node[rank]


def side_sizes(num_nodes: int, left_fraction: float) -> tuple[int, int]:
    """``(left, right)`` node counts of a bipartite graph, each at least 1."""
    left = min(max(int(round(left_fraction * num_nodes)), 1), num_nodes - 1)
    return left, num_nodes - left


def iter_heavy_tailed_edges(
    model: str,
    num_nodes: int,
    num_edges: int,
    seed: int,
    exponent: float,
    right_exponent: float,
    left_fraction: float,
    chunk_edges: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield the ``num_edges`` edges of ``model`` as ``(src int64, dst int64)`` chunks.

    Every chunk but the last has ``chunk_edges`` edges; the concatenation does
    not depend on ``chunk_edges`` (module docstring).
    """
    if model == "powerlaw":
        both = _Side(seed, 0, 0, num_nodes, exponent)
        ends = (both, both)
    elif model == "bipartite":
        left, right = side_sizes(num_nodes, left_fraction)
        ends = (_Side(seed, 1, 0, left, exponent), _Side(seed, 2, left, right, right_exponent))
    else:
        raise ValueError(f"unknown heavy-tailed model {model!r}; expected {HEAVY_TAILED_MODELS}")
    cached: tuple[int, np.ndarray, np.ndarray] | None = None

    def block(index: int) -> tuple[np.ndarray, np.ndarray]:
        nonlocal cached
        if cached is None or cached[0] != index:
            size = min(EDGE_BLOCK, num_edges - index * EDGE_BLOCK)
            uniform = _rng(seed, _TAG_EDGES, index).random((2, size))
            cached = (index, ends[0].draw(uniform[0]), ends[1].draw(uniform[1]))
        return cached[1], cached[2]

    for first in range(0, num_edges, chunk_edges):
        stop = min(first + chunk_edges, num_edges)
        src_parts, dst_parts = [], []
        for index in range(first // EDGE_BLOCK, (stop - 1) // EDGE_BLOCK + 1):
            s, d = block(index)
            lo = max(first - index * EDGE_BLOCK, 0)
            hi = min(stop - index * EDGE_BLOCK, len(s))
            src_parts.append(s[lo:hi])
            dst_parts.append(d[lo:hi])
        yield np.concatenate(src_parts), np.concatenate(dst_parts)


def random_labels(num_nodes: int, num_classes: int, seed: int) -> np.ndarray:
    """Uniform random classes, int64[num_nodes] in ``[0, num_classes)``."""
    return _rng(seed, _TAG_LABELS).integers(0, num_classes, size=num_nodes, dtype=np.int64)
