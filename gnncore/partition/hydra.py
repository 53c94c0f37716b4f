"""HyDRA's degree-balanced greedy partitioner (Xia et al. 2024, Algorithm 1, lines 3-6).

Nodes in descending order of their degree in the symmetrised graph (ties:
smaller id) are cut into consecutive groups of ``group_size``; each group goes
to the partition whose degree sum is smallest so far (ties: smaller index).
It balances the sampling load (degree sums) rather than node counts and ignores
locality; HyDRA pairs it with high-degree replication
(:mod:`gnncore.plan.replication`), which can equally be applied on top of any
other partitioning.
"""

from __future__ import annotations

import numpy as np

from gnncore import _C
from gnncore.partition.base import Partitioner, PartitionOptions, symmetric_degree
from gnncore.store import GraphDir
from gnncore.typing import require_csrc

#: Nodes per greedy group when none is given.
DEFAULT_GROUP_SIZE = 64


class HydraPartitioner(Partitioner):
    """Degree-balanced greedy groups (C++ ``_C.degree_greedy_assign``).

    Args:
        group_size (int): Nodes per group (>= 1). (default: 64)
    """

    name = "hydra"

    def __init__(self, group_size: int = DEFAULT_GROUP_SIZE) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.group_size = int(group_size)

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        require_csrc()
        degree = symmetric_degree(graph)
        return np.asarray(
            _C.degree_greedy_assign(degree, options.parts, self.group_size), dtype=np.int64
        )


__all__ = ["DEFAULT_GROUP_SIZE", "HydraPartitioner"]
