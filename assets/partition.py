"""Node partitionings of the graph: the one training uses, and one asset per method.

``graph_partition`` is the partitioning the training stage consumes (method
chosen by config). ``partition_<method>`` assets (group ``partitioning``) run
every registered method on the same graph, and ``partition_report`` compares
them. Every partitioning is also an MLflow run, so methods compare side by side
in the MLflow UI.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from assets.costs import cost_metadata, stage_budget
from assets.graph import graph
from assets.partitions import DATASET_PARTITIONS, run_tags
from assets.upstream import upstream_metadata
from resources import DataRootResource, MemoryBudgetResource, MlflowResource

COMPARED_METHODS = (
    "metis",
    "metis-recursive",
    "grem",
    "greedy",
    "ldg",
    "fennel",
    "random",
    "range",
    "bytegnn",
    "kaminpar",
)
# ``hydra`` balances degree sums, not node counts: its parts fail the node-balance
# check by design, so it is compared in the replication benchmarks instead.


class PartitionConfig(dg.Config):
    """How to partition the graph."""

    method: str = Field(
        default="metis",
        description="Partitioning method (graph_partition only; the per-method assets fix it).",
    )
    parts: int = Field(default=4, description="Number of partitions.")
    seed: int = Field(default=0, description="Random seed.")
    imbalance: float = Field(
        default=0.03, description="Allowed excess of the largest part over N/parts."
    )
    chunk: float = Field(default=0.1, description="grem/greedy: chunk size, fraction of edges.")
    passes: int = Field(default=3, description="grem: restreaming refinement passes.")
    seed_method: str | None = Field(
        default=None,
        description="grem: first-chunk seeding (metis, random, ldg, clusters; "
        "default: clusters with passes > 0, metis for passes 0).",
    )
    hops: int = Field(default=2, description="bytegnn: block radius.")
    clusters: int | None = Field(
        default=None,
        description="grem seed clusters: target cluster size prefix nodes / "
        "clusters (default: max(16 parts, min(256, prefix nodes / 1000))).",
    )
    group_size: int = Field(
        default=64, description="hydra: nodes per degree-balanced greedy group."
    )
    workers: int = Field(
        default=0,
        description="grem/greedy: bisections run at once in "
        "worker processes (more is faster and holds that many chunks in "
        "memory; 0: one per CPU from 2**26 edges up, as 3/4 of the "
        "memory holds them, else 1).",
    )
    memory_budget: str = Field(
        default="",
        description="The stage's memory budget (auto, none or a size such as 1GiB; empty: the "
        "deployment's, the memory resource; when set, it wins): the post-processing's buffers "
        "beyond its O(|V|) arrays take a quarter of it, 1MiB to 1GiB (auto: a quarter of what "
        "the process may take, from 128MiB; none: 128MiB). Changes no output (not in the stage "
        "key); the method's own memory is set by its options (grem: chunk).",
    )
    threads: int = Field(
        default=1,
        description="kaminpar: threads (1 is deterministic for a seed; 0: every CPU).",
    )


def partition_asset_name(method: str) -> str:
    return "partition_" + method.replace("-", "_")


def materialize_partition(
    context: Any,
    config: PartitionConfig,
    method: str,
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """Partition the graph of this lineage (:mod:`assets.upstream`) with ``method``
    into a directory named by the stage key (settings and graph version): one
    MLflow run, metadata out (``input_sha256``: the graph manifest's sha256 the
    key covers). The same settings on the same graph reuse the directory
    (``reused`` is true)."""
    from gnncore.partition import MethodSettings, partition_graph
    from gnncore.partition.run import (
        part_size_chart,
        partition_stage_key,
        postprocess_budget,
        postprocess_share,
    )
    from gnncore.plots import markdown_image
    from gnncore.store import GraphDir
    from gnncore.store.manifest import MANIFEST_FILE, sha256_of
    from gnncore.store.versioning import versioned_name

    upstream = upstream_metadata(context, graph.key)
    graph_dir = GraphDir.open(str(upstream["path"]))
    settings = MethodSettings(
        chunk=config.chunk,
        passes=config.passes,
        seed_method=config.seed_method,
        hops=config.hops,
        clusters=config.clusters,
        workers=config.workers,
        group_size=config.group_size,
        threads=config.threads,
    )
    key = partition_stage_key(
        graph_dir, method, config.parts, config.seed, config.imbalance, settings
    )
    prefix = f"{upstream['name']}-{method}-p{config.parts}"
    out = storage.stage_dir("partitions", versioned_name(prefix, key))
    setting = memory.setting(config.memory_budget)
    budget = stage_budget(memory, config.memory_budget)
    buffers = postprocess_budget("auto" if setting == "auto" else None)
    if budget is not None and setting != "auto":
        buffers = postprocess_share(budget)
    tracker = mlflow.tracker()
    report = partition_graph(
        graph_dir.path,
        out,
        method=method,
        parts=config.parts,
        seed=config.seed,
        imbalance=config.imbalance,
        tracking=tracker,
        settings=settings,
        reuse=True,
        tags=run_tags(context),
        progress=context.log.info,
        memory_budget=buffers,
        reported_budget=(setting, budget),
    )
    m = report.metrics
    context.log.info(
        f"{method} p={config.parts}: cut {m.edge_cut_fraction:.4f}, "
        f"max part {m.max_part_ratio:.4f}, {report.seconds:.2f}s"
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out)),
            "stage_key": key,
            "reused": report.reused,
            "graph_path": dg.MetadataValue.path(str(graph_dir.path)),
            "input_sha256": sha256_of(graph_dir.path / MANIFEST_FILE),
            "method": method,
            "parts": config.parts,
            "imbalance": config.imbalance,
            **report.params,
            "edge_cut_fraction": dg.MetadataValue.float(m.edge_cut_fraction),
            "max_part_ratio": dg.MetadataValue.float(m.max_part_ratio),
            "seconds": dg.MetadataValue.float(report.seconds),
            "memory_budget": setting,
            "postprocess_budget_bytes": buffers,
            **cost_metadata(
                report.phases,
                peak_rss_bytes=report.command_peak_rss_bytes or report.peak_rss_bytes,
                memory_budget=budget,
                method_peak_rss_bytes=report.peak_rss_bytes,
                command_peak_rss_bytes=report.command_peak_rss_bytes,
                output_bytes=report.output_bytes,
                storage_read_bytes=report.storage_read_bytes,
                storage_written_bytes=report.storage_written_bytes,
            ),
            **(
                {"mlflow_run": dg.MetadataValue.url(tracker.run_url(report.run_id))}
                if report.run_id
                else {}
            ),
            "parts_table": dg.MetadataValue.md(m.markdown_table()),
            "balance_chart": dg.MetadataValue.md(
                markdown_image(part_size_chart(report), "part sizes")
            ),
        }
    )


@dg.asset(deps=[graph], kinds={"python"}, group_name="gnn", partitions_def=DATASET_PARTITIONS)
def graph_partition(
    context: dg.AssetExecutionContext,
    config: PartitionConfig,
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """The min-edge-cut partitioning training uses (method from config)."""
    return materialize_partition(context, config, config.method, storage, mlflow, memory)


def build_method_partition_asset(method: str) -> dg.AssetsDefinition:
    """``partition_<method>``: the graph partitioned by one fixed method."""

    @dg.asset(
        name=partition_asset_name(method),
        deps=[graph],
        kinds={"python"},
        group_name="partitioning",
        partitions_def=DATASET_PARTITIONS,
        description=f"The graph partitioned with {method} (for comparison).",
    )
    def _partition(
        context: dg.AssetExecutionContext,
        config: PartitionConfig,
        storage: DataRootResource,
        mlflow: MlflowResource,
        memory: MemoryBudgetResource,
    ) -> dg.MaterializeResult:
        return materialize_partition(context, config, method, storage, mlflow, memory)

    return _partition


METHOD_PARTITIONS = [build_method_partition_asset(m) for m in COMPARED_METHODS]


@dg.asset(
    deps=METHOD_PARTITIONS,
    kinds={"python"},
    group_name="partitioning",
    partitions_def=DATASET_PARTITIONS,
)
def partition_report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Every method side by side: cut, balance, seconds and peak RSS, table and chart."""
    from gnncore.partition import PartitionDir
    from gnncore.partition.comparison import comparison_chart, markdown_table, report_row
    from gnncore.plots import markdown_image

    rows = [
        report_row(PartitionDir.open(str(upstream_metadata(context, a.key)["path"])))
        for a in METHOD_PARTITIONS
    ]
    return dg.MaterializeResult(
        metadata={
            "table": dg.MetadataValue.md(markdown_table(rows)),
            "chart": dg.MetadataValue.md(markdown_image(comparison_chart(rows), "comparison")),
            "best_cut_method": min(rows, key=lambda r: r["edge_cut_fraction"])["method"],
        }
    )
