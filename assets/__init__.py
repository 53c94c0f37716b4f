"""Thin Dagster assets over gnncore: config in, one library call, metadata out."""

from assets.checks import (
    METHOD_BALANCE_CHECKS,
    graph_integrity,
    model_quality,
    partition_balance,
    placement_plan_valid,
    replication_plan_valid,
)
from assets.dataset import raw_dataset
from assets.graph import graph
from assets.outofcore import partitioned_store
from assets.partition import METHOD_PARTITIONS, graph_partition, partition_report
from assets.plan import placement_plan, replication_plan
from assets.predict import predictions
from assets.ranks import rank_data
from assets.train import production_model, trained_model

PIPELINE_ASSETS = [
    raw_dataset,
    graph,
    graph_partition,
    replication_plan,
    placement_plan,
    partitioned_store,
    trained_model,
    production_model,
    predictions,
]
PIPELINE_CHECKS = [
    graph_integrity,
    partition_balance,
    replication_plan_valid,
    placement_plan_valid,
    model_quality,
]
ALL_ASSETS = [*PIPELINE_ASSETS, rank_data, *METHOD_PARTITIONS, partition_report]
ALL_CHECKS = [*PIPELINE_CHECKS, *METHOD_BALANCE_CHECKS]

__all__ = [
    "ALL_ASSETS",
    "ALL_CHECKS",
    "PIPELINE_ASSETS",
    "PIPELINE_CHECKS",
    "graph",
    "graph_integrity",
    "graph_partition",
    "model_quality",
    "partition_balance",
    "partition_report",
    "partitioned_store",
    "placement_plan",
    "predictions",
    "production_model",
    "rank_data",
    "raw_dataset",
    "replication_plan",
    "trained_model",
]
