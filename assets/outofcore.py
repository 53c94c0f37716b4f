"""The partitioned store: ``graph_partition``'s graph laid out for out-of-core training.

``partitioned_store`` relabels the graph so each partition of
``graph_partition`` is one contiguous range, groups the edges into
destination-major buckets and keeps the static set (the highest in-degree
nodes) apart (:mod:`gnncore.outofcore.store`). It is written to a directory
named by its stage key (the same settings on the same graph and partition
reuse it); ``trained_model`` reads it in mode ``hierbatching``.
"""

import dagster as dg
from pydantic import Field

from assets.costs import cost_metadata, stage_budget
from assets.partition import graph_partition
from assets.partitions import DATASET_PARTITIONS
from assets.upstream import upstream_metadata
from gnncore.outofcore.store import STATIC_FRACTION_HELP
from resources import DataRootResource, MemoryBudgetResource


class StoreConfig(dg.Config):
    """How to lay out the partitioned store."""

    static_fraction: float = Field(
        default=0.01,
        description=STATIC_FRACTION_HELP + " At most what training under the deployment's memory "
        "budget holds: the static cache's bound takes an eighth of it at most (a smaller "
        "fraction is logged and in the metadata).",
    )
    memory_budget: str = Field(
        default="",
        description="The memory the store writer may take (empty: the deployment's, the memory "
        "resource; when set, it wins: auto, none or a size such as 1GiB): features and edges "
        "stream through buffers sized from it once the process's own memory is taken off; too "
        "small a budget is refused. Same bytes (not in the stage key).",
    )


@dg.asset(
    deps=[graph_partition],
    kinds={"python", "numpy"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
)
def partitioned_store(
    context: dg.AssetExecutionContext,
    config: StoreConfig,
    storage: DataRootResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """The graph of ``graph_partition`` relabelled partition by partition, its edges
    in destination-major buckets and its static set, for out-of-core training
    (``trained_model`` with mode ``hierbatching``); nodes per partition as a table."""
    from gnncore.outofcore.store import build_partitioned_store, store_dir
    from gnncore.outofcore.training import STATIC_SHARE, graph_static_fraction
    from gnncore.partition import PartitionDir
    from gnncore.progress import reporting
    from gnncore.store import GraphDir
    from gnncore.usage import PhaseTimer

    partition = upstream_metadata(context, graph_partition.key)
    graph_dir = GraphDir.open(str(partition["graph_path"]))
    part_dir = PartitionDir.open(str(partition["path"]), graph_dir)
    # The static set kept to what training under the deployment's budget can hold.
    fraction = graph_static_fraction(graph_dir, config.static_fraction, stage_budget(memory))
    if fraction < config.static_fraction:
        context.log.info(
            f"static fraction {fraction:g} instead of {config.static_fraction:g}: the static "
            f"cache takes at most {STATIC_SHARE:.1%} of the memory budget"
        )
    out = store_dir(storage.stage_root("stores"), graph_dir, part_dir, fraction)
    timer = PhaseTimer(lambda stage: context.log.info(f"store: {stage}"))
    with reporting(timer):
        report = build_partitioned_store(
            graph_dir.path, part_dir.path, out, fraction, reuse=True,
            memory_budget=stage_budget(memory, config.memory_budget),
        )  # fmt: skip
    timer.stop()
    store, usage, reused = report.store, report.usage, report.reused
    info, offsets = store.info, store.offsets
    rows = "\n".join(
        f"| {p} | {int(offsets[p + 1] - offsets[p])} | {hi - lo} |"
        for p in range(store.parts)
        for lo, hi in [store.in_edge_range(p)]
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(store.path)),
            "stage_key": str(info["stage_key"]),
            "reused": reused,
            "graph_path": dg.MetadataValue.path(str(graph_dir.path)),
            "partition_path": dg.MetadataValue.path(str(part_dir.path)),
            "parts": store.parts,
            "num_nodes": store.num_nodes,
            "num_static": store.num_static,
            "static_fraction": dg.MetadataValue.float(float(info["static_fraction"])),
            "static_fraction_wanted": dg.MetadataValue.float(config.static_fraction),
            "bytes": sum(int(entry["bytes"]) for entry in info["files"].values()),
            # The time writing the store took (when reused: the first materialization's).
            "seconds": dg.MetadataValue.float(float(info["seconds"])),
            "nodes_per_partition": dg.MetadataValue.md(
                "| partition | nodes | in-edges |\n|---|---|---|\n" + rows
            ),
            "memory_budget": memory.setting(config.memory_budget),
            # This materialization's cost (when reused: the check's).
            **cost_metadata(
                {} if reused else timer.seconds(),
                peak_rss_bytes=usage.peak_rss_bytes,
                memory_budget=report.memory_budget_bytes,
                fixed_bytes=report.fixed_bytes,
                disk_estimate_bytes=report.disk_estimate_bytes or None,
                storage_read_bytes=usage.storage_read_bytes,
                storage_written_bytes=usage.storage_written_bytes,
            ),
        }
    )
