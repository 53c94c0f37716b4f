"""Blocking asset checks: downstream stages rely on these invariants.

Each check is partitioned like its asset (one result per dataset, shown per
partition in the UI) and reads the materialization of its own partition.
"""

import warnings

import dagster as dg

from assets.graph import graph
from assets.partition import METHOD_PARTITIONS, graph_partition
from assets.partitions import DATASET_PARTITIONS
from assets.plan import placement_plan, replication_plan
from assets.train import trained_model
from assets.upstream import upstream_metadata, upstream_path
from resources import MlflowResource

# Partitioned checks are a preview feature of Dagster; they are what lets each dataset's
# checks pass or fail on their own, so the notice is not repeated on every import.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)


@dg.asset_check(
    asset=graph,
    blocking=True,
    partitions_def=DATASET_PARTITIONS,
    description="Manifest, checksums and contents "
    "(CSR bounds and order, labels, disjoint splits, finite features) are valid.",
)
def graph_integrity(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """The graph directory matches its manifest and its contents are valid."""
    from gnncore.errors import InputError
    from gnncore.store import GraphDir

    path = upstream_path(context, graph.key)
    try:
        GraphDir.open(path).validate(checksums=True)
    except InputError as exc:
        return dg.AssetCheckResult(passed=False, metadata={"error": str(exc), "path": str(path)})
    return dg.AssetCheckResult(passed=True, metadata={"path": str(path)})


def check_partition_balance(
    context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey
) -> dg.AssetCheckResult:
    """Every part of this dataset's partitioning by ``asset_key`` is within tolerance."""
    from gnncore.partition import PartitionDir
    from gnncore.partition.metrics import balance_violations, partition_metrics
    from gnncore.store import GraphDir

    meta = upstream_metadata(context, asset_key)
    graph_dir = GraphDir.open(upstream_path(context, graph.key))
    part = PartitionDir.open(str(meta["path"]), graph_dir)
    metrics = partition_metrics(graph_dir, part.assignment(), part.parts)
    problems = balance_violations(metrics, float(meta["imbalance"]))
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "max_part_ratio": metrics.max_part_ratio,
            "problems": "; ".join(problems) or "none",
        },
    )


def build_balance_check(
    asset: dg.AssetsDefinition, name: str = "partition_balance"
) -> dg.AssetChecksDefinition:
    """A blocking balance check on one partitioning asset."""

    @dg.asset_check(
        asset=asset,
        name=name,
        blocking=True,
        partitions_def=DATASET_PARTITIONS,
        description="No part exceeds ceil((1 + imbalance)·N/p) nodes and none is empty.",
    )
    def _balance(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return check_partition_balance(context, asset.key)

    return _balance


partition_balance = build_balance_check(graph_partition)
METHOD_BALANCE_CHECKS = [build_balance_check(a) for a in METHOD_PARTITIONS]


def _plan_result(problems: list[str], meta: dict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={"path": str(meta["path"]), "problems": "; ".join(problems) or "none"},
    )


@dg.asset_check(
    asset=replication_plan,
    blocking=True,
    partitions_def=DATASET_PARTITIONS,
    description="The plan covers the graph and the partition it claims (manifest sha256), "
    "its replicated ids are distinct nodes, round(rate·N) of them, and every owner is a "
    "partition (the partition's own label unless group_size re-assigned them).",
)
def replication_plan_valid(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """The latest replication plan is a valid plan of its graph."""
    from gnncore.partition import PartitionDir
    from gnncore.plan import ReplicationPlan
    from gnncore.plan.replication import replication_problems
    from gnncore.store import GraphDir

    meta = upstream_metadata(context, replication_plan.key)
    graph_dir = GraphDir.open(str(meta["graph_path"]))
    plan = ReplicationPlan.open(str(meta["path"]))
    partition = PartitionDir.open(str(meta["partition_path"]))
    return _plan_result(replication_problems(plan, graph_dir, partition), meta)


@dg.asset_check(
    asset=placement_plan,
    blocking=True,
    partitions_def=DATASET_PARTITIONS,
    description="The plan covers the graph it claims (manifest sha256), no device "
    "caches more than the budget its settings give on that graph or a node twice, the "
    "peer groups partition the devices, and each device's sorted lookup tables "
    "(cached_ids / cached_rows) point at its cached rows.",
)
def placement_plan_valid(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """The latest placement plan is a valid placement of its graph within budget."""
    from gnncore.plan import PlacementPlan
    from gnncore.plan.placement import placement_problems
    from gnncore.store import GraphDir

    meta = upstream_metadata(context, placement_plan.key)
    graph_dir = GraphDir.open(str(meta["graph_path"]))
    plan = PlacementPlan.open(str(meta["path"]))
    return _plan_result(placement_problems(plan, graph_dir), meta)


class QualityGateConfig(dg.Config):
    """How much worse than production a new model may be and still be promoted."""

    margin: float = 0.01


@dg.asset_check(
    asset=trained_model,
    blocking=True,
    partitions_def=DATASET_PARTITIONS,
    description="The new model's validation "
    "metric (accuracy; MRR for link prediction) is no worse than the production "
    "version's minus a margin; when it fails, production_model does not run and "
    "the version is not promoted.",
)
def model_quality(
    context: dg.AssetCheckExecutionContext, config: QualityGateConfig, mlflow: MlflowResource
) -> dg.AssetCheckResult:
    """Quality gate against the current production version."""
    from gnncore.tracking.registry import quality_gate

    meta = upstream_metadata(context, trained_model.key)
    registry = mlflow.registry(str(meta["validation_metric"]))
    production = registry.production(str(meta["registered_model"]))
    decision = quality_gate(
        float(meta["validation_score"]),
        None if production is None else production.metric,
        config.margin,
    )
    return dg.AssetCheckResult(
        passed=decision.passed,
        metadata={
            "reason": decision.reason,
            "metric": str(meta["validation_metric"]),
            "candidate_version": str(meta["model_version"]),
            "production_version": "none" if production is None else production.version,
            "margin": config.margin,
        },
    )
