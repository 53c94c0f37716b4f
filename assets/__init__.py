"""Thin Dagster assets over gnncore: config in, one library call, metadata out."""

from assets.checks import graph_integrity, partition_balance
from assets.dataset import raw_dataset
from assets.graph import graph
from assets.partition import graph_partition
from assets.train import trained_model

ALL_ASSETS = [raw_dataset, graph, graph_partition, trained_model]
ALL_CHECKS = [graph_integrity, partition_balance]

__all__ = ["ALL_ASSETS", "ALL_CHECKS", "graph", "graph_integrity", "graph_partition",
           "partition_balance", "raw_dataset", "trained_model"]
