"""Min-edge-cut partitioning: every method returns an ``int64[num_nodes]`` assignment."""

from gnncore.partition.base import Partitioner, PartitionOptions, symmetric_graph
from gnncore.partition.metrics import PartitionMetrics, partition_metrics
from gnncore.partition.run import (
    METHODS,
    MethodSettings,
    PartitionReport,
    make_partitioner,
    partition_graph,
)
from gnncore.partition.store import PartitionDir

__all__ = [
    "METHODS",
    "MethodSettings",
    "PartitionDir",
    "PartitionMetrics",
    "PartitionOptions",
    "PartitionReport",
    "Partitioner",
    "make_partitioner",
    "partition_graph",
    "partition_metrics",
    "symmetric_graph",
]
