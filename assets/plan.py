"""The two planning stages between the partition and training.

``replication_plan`` (HDR, HyDRA) replicates the highest-degree nodes'
neighbour lists on top of ``graph_partition``; ``placement_plan`` (Song &
Jiang) decides which nodes' features each device caches. Each is one library
call and one MLflow run, written to a directory named by its stage key (the
same settings on the same inputs reuse it); ``trained_model`` serves features
through the placement and records both plans. Each refuses, before any work,
when the deployment's memory budget (the ``memory`` resource) is below its
estimate (:mod:`gnncore.plan.memory`), and reports its peak RSS against it.
"""

from typing import Any

import dagster as dg

from assets.costs import budget_metadata, stage_budget
from assets.options import options_config
from assets.partition import graph_partition
from assets.partitions import DATASET_PARTITIONS, run_tags
from assets.upstream import upstream_metadata
from gnncore.plan import PlacementSettings, ReplicationSettings
from resources import DataRootResource, MemoryBudgetResource, MlflowResource

ReplicationConfig = options_config(ReplicationSettings, "ReplicationConfig")
PlacementConfig = options_config(PlacementSettings, "PlacementConfig")


def _common_metadata(
    report: Any, tracker: Any, graph_path: str, setting: str, budget: int | None
) -> dict[str, Any]:
    from gnncore.usage import peak_rss_bytes

    return {
        **budget_metadata(setting, budget, peak_rss_bytes()),
        "path": dg.MetadataValue.path(report.path),
        "stage_key": report.stage_key,
        "reused": report.reused,
        "graph_path": dg.MetadataValue.path(graph_path),
        "seconds": dg.MetadataValue.float(float(report.metrics["seconds"])),
        # The planner's own estimate of its peak memory (its first progress line).
        "memory_estimate_bytes": dg.MetadataValue.int(
            int(report.metrics.get("memory_estimate_bytes", 0))
        ),
        **(
            {"mlflow_run": dg.MetadataValue.url(tracker.run_url(report.run_id))}
            if report.run_id
            else {}
        ),
    }


@dg.asset(
    deps=[graph_partition], kinds={"python"}, group_name="gnn", partitions_def=DATASET_PARTITIONS
)
def replication_plan(
    context: dg.AssetExecutionContext,
    config: ReplicationConfig,  # type: ignore[valid-type]
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """HDR: the top ``rate`` nodes by degree, whose neighbour lists every partition of
    ``graph_partition`` stores; memory increase per rate as a chart."""
    from gnncore.partition import PartitionDir
    from gnncore.plan import plan_replication
    from gnncore.plan.replication import memory_chart, replication_dir
    from gnncore.plots import markdown_image
    from gnncore.store import GraphDir

    partition = upstream_metadata(context, graph_partition.key)
    settings = ReplicationSettings(**config.model_dump())  # type: ignore[attr-defined]
    graph_dir = GraphDir.open(str(partition["graph_path"]))
    part_dir = PartitionDir.open(str(partition["path"]), graph_dir)
    out = replication_dir(storage.stage_root("plans"), graph_dir, part_dir, settings)
    tracker = mlflow.tracker()
    budget = stage_budget(memory)
    report = plan_replication(
        graph_dir.path,
        part_dir.path,
        out,
        settings,
        reuse=True,
        progress=context.log.info,
        tracking=tracker,
        tags=run_tags(context),
        memory_budget=budget,
    )
    m = report.metrics
    rows = "\n".join(f"| {i} | {ids} |" for i, ids in enumerate(m["stored_ids"]))
    return dg.MaterializeResult(
        metadata={
            **_common_metadata(report, tracker, str(graph_dir.path), memory.setting(), budget),
            "partition_path": dg.MetadataValue.path(str(part_dir.path)),
            "rate": settings.rate,
            "replicated_nodes": int(m["replicated_nodes"]),
            "memory_increase": dg.MetadataValue.float(float(m["memory_increase"])),
            "stored_ids": dg.MetadataValue.md(
                "| partition | neighbour ids stored |\n|---|---|\n" + rows
            ),
            "memory_chart": dg.MetadataValue.md(
                markdown_image(memory_chart(m), "memory increase against p_r")
            ),
        }
    )


@dg.asset(
    deps=[replication_plan], kinds={"python"}, group_name="gnn", partitions_def=DATASET_PARTITIONS
)
def placement_plan(
    context: dg.AssetExecutionContext,
    config: PlacementConfig,  # type: ignore[valid-type]
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """Which nodes' features each device caches (Song & Jiang), for the graph the
    replication plan covers; predicted read shares per device as a chart."""
    from gnncore.plan import plan_placement
    from gnncore.plan.placement import placement_dir, shares_chart
    from gnncore.plots import markdown_image
    from gnncore.store import GraphDir

    upstream = upstream_metadata(context, replication_plan.key)
    settings = PlacementSettings(**config.model_dump())  # type: ignore[attr-defined]
    settings.validate()
    graph_dir = GraphDir.open(str(upstream["graph_path"]))
    out = placement_dir(storage.stage_root("plans"), graph_dir, settings)
    tracker = mlflow.tracker()
    budget = stage_budget(memory)
    report = plan_placement(
        graph_dir.path,
        out,
        settings,
        reuse=True,
        progress=context.log.info,
        tracking=tracker,
        tags=run_tags(context),
        memory_budget=budget,
    )
    m = report.metrics
    rows = "\n".join(
        f"| {d} | {s['local']:.3f} | {s['peer']:.3f} | {s['host']:.3f} | {c:.3f} |"
        for d, (s, c) in enumerate(zip(m["predicted_shares"], m["predicted_cost"], strict=True))
    )
    return dg.MaterializeResult(
        metadata={
            **_common_metadata(report, tracker, str(graph_dir.path), memory.setting(), budget),
            "replication_path": dg.MetadataValue.path(str(upstream["path"])),
            "devices": settings.devices,
            "cache_nodes": int(m["cache_nodes"]),
            "alpha": float(m["alpha"]),
            "estimator": settings.estimator,
            "predicted_cost_max": dg.MetadataValue.float(float(m["predicted_cost_max"])),
            "read_shares": dg.MetadataValue.md(
                "| device | local | peer | host | predicted cost |\n|---|---|---|---|---|\n" + rows
            ),
            "read_share_chart": dg.MetadataValue.md(
                markdown_image(shares_chart(m), "predicted read shares")
            ),
        }
    )
