"""Structure-blind baselines: random and contiguous-range assignments.

Both are exactly balanced: every part holds ``floor(N/p)`` or ``ceil(N/p)``
nodes, so they meet any node cap ``ceil((1 + imbalance)·N/p)``.
"""

from __future__ import annotations

import numpy as np

from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.store import GraphDir


class RandomPartitioner(Partitioner):
    """A seeded random permutation dealt round-robin into ``p`` parts.

    Node ``perm[i]`` goes to part ``i mod p`` with
    ``perm = numpy.random.default_rng(seed).permutation(N)``, so the parts
    differ in size by at most one and the result depends only on the seed.
    """

    name = "random"

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        return random_assignment(graph.num_nodes, options.parts, options.seed)


class RangePartitioner(Partitioner):
    """Contiguous id ranges: node ``v`` goes to part ``floor(v·p/N)``.

    Part ``i`` holds ids ``[ceil(i·N/p), ceil((i+1)·N/p))``, ``floor(N/p)`` or
    ``ceil(N/p)`` of them. The cut depends entirely on how ids were numbered.
    """

    name = "range"

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        return range_assignment(graph.num_nodes, options.parts)


def random_assignment(num_nodes: int, parts: int, seed: int) -> np.ndarray:
    """``int64[num_nodes]``: a seeded permutation dealt into ``parts`` parts."""
    assignment = np.empty(num_nodes, dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(num_nodes)
    assignment[perm] = np.arange(num_nodes, dtype=np.int64) % parts
    return assignment


def range_assignment(num_nodes: int, parts: int) -> np.ndarray:
    """``int64[num_nodes]``: node ``v`` in part ``floor(v·parts/num_nodes)``."""
    if num_nodes == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(num_nodes, dtype=np.int64) * parts // num_nodes


__all__ = ["RandomPartitioner", "RangePartitioner", "random_assignment", "range_assignment"]
