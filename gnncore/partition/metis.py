"""METIS through pymetis, on the symmetric CSR (k-way or recursive bisection)."""

from __future__ import annotations

import numpy as np
import pymetis

from gnncore.partition.base import Partitioner, PartitionOptions, symmetric_graph
from gnncore.store import GraphDir


class MetisPartitioner(Partitioner):
    """Multilevel METIS.

    Args:
        recursive (bool): Recursive bisection (as in the GREM thesis) instead
            of k-way (default: ``False``).
    """

    name = "metis"

    def __init__(self, recursive: bool = False) -> None:
        self.recursive = recursive

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        if options.parts == 1:
            return np.zeros(graph.num_nodes, dtype=np.int64)
        sym = symmetric_graph(graph)
        metis_options = pymetis.Options()
        metis_options.seed = options.seed
        metis_options.ufactor = int(round(options.imbalance * 1000))
        adjacency = pymetis.CSRAdjacency(sym.indptr, sym.indices)
        result = pymetis.part_graph(
            options.parts, adjacency, recursive=self.recursive, options=metis_options
        )
        return np.asarray(result.vertex_part, dtype=np.int64)
