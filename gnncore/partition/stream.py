"""Vertex-stream baselines: LDG and Fennel over the symmetric CSR (ALGORITHMS.md §2).

One pass over the nodes in a seeded random order (``_C.stream_order``: nodes
sorted by the splitmix64 key ``stream(seed, v)``, a uniform permutation). The
papers analyse random order, and the id order of an ingested graph follows the
input file, which would make the baseline depend on how the file was written.
Each arriving node goes to the part that maximises

- LDG (Stanton & Kliot 2012): ``|P_i ∩ N(v)| · (1 − |P_i|/C)``
- Fennel (Tsourakakis et al. 2014): ``|P_i ∩ N(v)| − α·γ·|P_i|^(γ−1)`` with
  ``γ = 1.5`` and ``α = m·p^(γ−1)/n^γ`` (``m`` undirected edges)

over the parts holding fewer than ``C = ceil((1 + imbalance)·N/p)`` nodes (a
hard cap, so the largest part never exceeds it); ties go to the least loaded
part, then the lowest part id. The kernels run in C++ with the GIL released.

    from gnncore.partition.stream import FennelPartitioner
    labels = FennelPartitioner().assign(graph, PartitionOptions(parts=8, seed=0))
"""

from __future__ import annotations

import abc

import numpy as np

from gnncore import _C
from gnncore.partition.base import Partitioner, PartitionOptions, SymmetricGraph, symmetric_graph
from gnncore.partition.metrics import max_part_size
from gnncore.store import GraphDir
from gnncore.typing import require_csrc


def fennel_alpha(num_nodes: int, num_edges: int, parts: int, gamma: float = 1.5) -> float:
    """Fennel's ``α = m·p^(γ−1)/n^γ`` (``m`` undirected edges, ``n`` nodes)."""
    if num_nodes == 0:
        return 0.0
    return float(num_edges) * float(parts) ** (gamma - 1.0) / float(num_nodes) ** gamma


class _VertexStreamPartitioner(Partitioner):
    """Shared driver: validate, build the symmetric CSR, call the kernel."""

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        capacity = max_part_size(graph.num_nodes, options.parts, options.imbalance)
        return self.assign_symmetric(symmetric_graph(graph), options.parts, capacity, options.seed)

    @abc.abstractmethod
    def assign_symmetric(
        self, graph: SymmetricGraph, parts: int, capacity: int, seed: int
    ) -> np.ndarray:
        """The ``int64[N]`` assignment of ``graph`` under the hard node cap
        ``capacity`` (``capacity · parts >= N``)."""


class LdgPartitioner(_VertexStreamPartitioner):
    """Linear Deterministic Greedy: ``argmax_i |P_i ∩ N(v)| · (1 − |P_i|/C)``."""

    name = "ldg"

    def assign_symmetric(
        self, graph: SymmetricGraph, parts: int, capacity: int, seed: int
    ) -> np.ndarray:
        require_csrc()
        return _C.ldg_partition(
            np.asarray(graph.indptr), np.asarray(graph.indices), parts, capacity, seed
        )


class FennelPartitioner(_VertexStreamPartitioner):
    """Fennel: ``argmax_i |P_i ∩ N(v)| − α·γ·|P_i|^(γ−1)``.

    Args:
        gamma (float): The exponent ``γ >= 1`` (default: 1.5).
        alpha (float, optional): The weight ``α``; ``None`` uses
            :func:`fennel_alpha` (default: ``None``).
    """

    name = "fennel"

    def __init__(self, gamma: float = 1.5, alpha: float | None = None) -> None:
        if not gamma >= 1.0:
            raise ValueError(f"gamma must be >= 1, got {gamma}")
        if alpha is not None and not alpha >= 0.0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.gamma = gamma
        self.alpha = alpha

    def assign_symmetric(
        self, graph: SymmetricGraph, parts: int, capacity: int, seed: int
    ) -> np.ndarray:
        require_csrc()
        alpha = self.alpha
        if alpha is None:
            alpha = fennel_alpha(graph.num_nodes, len(graph.indices) // 2, parts, self.gamma)
        options = _C.FennelOptions(
            parts=parts, capacity=capacity, alpha=alpha, gamma=self.gamma, seed=seed
        )
        return _C.fennel_partition(np.asarray(graph.indptr), np.asarray(graph.indices), options)


__all__ = ["FennelPartitioner", "LdgPartitioner", "fennel_alpha"]
