r"""Negative sampling for link prediction, and the set of known edges.

Training draws negative endpoints per mini-batch, either uniformly over all
nodes or in proportion to a node weight (degree-weighted negatives, as in
PyTorch-BigGraph and Marius: popular nodes are the hard negatives). Draws come
from a NumPy generator seeded per batch, so a run is reproducible and a
resumed run continues the same stream.

:class:`KnownEdges` holds the true ``(head, relation, tail)`` triples of a
graph as sorted 64-bit keys. It answers, vectorised, "is this candidate a true
edge?" and "which tails are true for these
``(head, relation)`` queries?" (the filtered ranking protocol of link
prediction evaluation, Bordes et al. 2013, including sampled evaluation
negatives).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from gnncore.sampler.names import NEGATIVE_MODES as NEGATIVE_MODES
from gnncore.sampler.names import NegativeMode as NegativeMode


class NegativeDraw:
    r"""Draws negative node ids, uniformly or proportionally to ``weights``.

    Args:
        num_nodes (int): Ids are drawn from ``[0, num_nodes)``.
        weights (array, optional): Non-negative ``[num_nodes]`` weights (e.g.
            degrees); ``None`` draws uniformly. (default: :obj:`None`)
    """

    def __init__(self, num_nodes: int, weights: np.ndarray | torch.Tensor | None = None) -> None:
        if num_nodes < 1:
            raise ValueError(f"num_nodes={num_nodes}: need at least one node to draw from")
        self.num_nodes = int(num_nodes)
        self._cdf: np.ndarray | None = None
        if weights is not None:
            w = np.asarray(
                weights.detach().cpu() if isinstance(weights, torch.Tensor) else weights,
                dtype=np.float64,
            ).reshape(-1)
            if len(w) != num_nodes:
                raise ValueError(f"weights has {len(w)} entries for {num_nodes} nodes")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError("weights must be finite and non-negative")
            total = w.sum()
            if total <= 0:
                raise ValueError("weights sum to zero: no node can be drawn")
            cdf = np.cumsum(w)
            self._cdf = cdf / cdf[-1]

    @property
    def uniform(self) -> bool:
        return self._cdf is None

    def __call__(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` int64 node ids (with replacement)."""
        if self._cdf is None:
            return rng.integers(0, self.num_nodes, size=count, dtype=np.int64)
        ids = np.searchsorted(self._cdf, rng.random(count), side="right")
        return np.minimum(ids, self.num_nodes - 1).astype(np.int64, copy=False)


def degree_weights(
    num_nodes: int, src: np.ndarray, dst: np.ndarray, power: float = 1.0
) -> np.ndarray:
    """Node weights ``(in + out degree) ** power`` over the given edges; nodes
    without edges get weight 0 (they are never drawn)."""
    degree = np.bincount(
        np.concatenate([np.asarray(src), np.asarray(dst)]).astype(np.int64), minlength=num_nodes
    ).astype(np.float64)
    return degree**power if power != 1.0 else degree


@dataclass(frozen=True)
class KnownEdges:
    r"""True ``(head, relation, tail)`` triples, sorted by ``(head, relation)``.

    Build it with :meth:`from_triples`. ``num_relations`` is the number of
    relation ids in use (after adding reciprocal relations, if any).
    """

    keys: np.ndarray  # int64 [T], head * num_relations + relation, sorted
    tails: np.ndarray  # int64 [T], tail of each key, sorted within a key
    num_nodes: int
    num_relations: int

    @classmethod
    def from_triples(cls, triples: np.ndarray, num_nodes: int, num_relations: int) -> KnownEdges:
        """From an int64 ``[T, 3]`` array of ``(head, relation, tail)``; repeats
        are removed."""
        t = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        if len(t) and (t[:, [0, 2]].min() < 0 or t[:, [0, 2]].max() >= num_nodes):
            raise ValueError(f"triples name nodes outside [0, {num_nodes})")
        if len(t) and (t[:, 1].min() < 0 or t[:, 1].max() >= num_relations):
            raise ValueError(f"triples name relations outside [0, {num_relations})")
        keys = t[:, 0] * num_relations + t[:, 1]
        order = np.lexsort((t[:, 2], keys))
        keys, tails = keys[order], t[order, 2]
        if len(keys) > 1:
            keep = np.ones(len(keys), dtype=bool)
            keep[1:] = (keys[1:] != keys[:-1]) | (tails[1:] != tails[:-1])
            keys, tails = keys[keep], tails[keep]
        return cls(keys, tails, int(num_nodes), int(num_relations))

    def __len__(self) -> int:
        return len(self.keys)

    def contains(self, heads: np.ndarray, relations: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """Boolean mask (broadcast shape): which ``(heads, relations, tails)`` are known."""
        heads, relations, tails = np.broadcast_arrays(
            np.asarray(heads, dtype=np.int64),
            np.asarray(relations, dtype=np.int64),
            np.asarray(tails, dtype=np.int64),
        )
        unique_keys, triple_keys = self._composite
        query_keys = (heads * self.num_relations + relations).reshape(-1)
        rank = np.searchsorted(unique_keys, query_keys)
        found = rank < len(unique_keys)
        found[found] = unique_keys[rank[found]] == query_keys[found]
        query = rank * self.num_nodes + tails.reshape(-1)
        pos = np.searchsorted(triple_keys, query[found])
        hit = pos < len(triple_keys)
        hit[hit] = triple_keys[pos[hit]] == query[found][hit]
        found[found] = hit
        return found.reshape(heads.shape)

    @cached_property
    def _composite(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct ``(head, relation)`` keys and, per triple, ``rank of its key
        * num_nodes + tail`` (sorted; below ``len(triples) * num_nodes``, so it
        fits in int64 however many nodes and relations there are)."""
        unique_keys, rank = np.unique(self.keys, return_inverse=True)
        return unique_keys, rank.astype(np.int64) * self.num_nodes + self.tails

    def true_tails(self, heads: np.ndarray, relations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(query_index, tail)`` pairs: every known tail of each query
        ``(heads[i], relations[i])``, ``query_index`` ascending."""
        query = np.asarray(heads, dtype=np.int64) * self.num_relations + np.asarray(
            relations, dtype=np.int64
        )
        lo = np.searchsorted(self.keys, query, side="left")
        hi = np.searchsorted(self.keys, query, side="right")
        counts = hi - lo
        rows = np.repeat(np.arange(len(query), dtype=np.int64), counts)
        # positions lo[i] .. hi[i]-1 for every query, without a Python loop
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        positions = starts + np.arange(int(counts.sum()), dtype=np.int64)
        return rows, self.tails[positions]
