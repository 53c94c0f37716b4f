"""The ingested graph directory (docs/FORMAT.md)."""

import dagster as dg
from pydantic import Field

from assets.costs import cost_metadata, data_share, stage_budget
from assets.dataset import raw_dataset
from assets.partitions import DATASET_PARTITIONS, run_tags
from assets.upstream import upstream_metadata
from resources import DataRootResource, MemoryBudgetResource, MlflowResource


class IngestConfig(dg.Config):
    """How much memory ingestion may take (not in the stage key: every budget
    writes the same graph)."""

    memory_budget: str = Field(
        default="",
        description="Empty: the deployment's budget (the memory resource), bounded memory "
        "wherever that path takes the input, else in memory, reported against it; when set, "
        "it wins: auto (what the process may take), in bounded memory wherever that path takes "
        "the input (it is faster), else in memory; a size (4GiB, 512MiB): bounded-memory "
        "ingestion (text edge lists, integer or string ids; with a node table: Parquet, "
        "integer ids); none: in memory.",
    )


@dg.asset(
    deps=[raw_dataset],
    kinds={"polars", "parquet", "mlflow"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
)
def graph(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    storage: DataRootResource,
    mlflow: MlflowResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """The raw dataset ingested with Polars into a validated CSR graph directory,
    ``graphs/<name>-<stage key>``: the key covers the ingest settings and the
    raw input's sha256; the same settings on the same input reuse it. A new
    ingestion is an MLflow run with its phases, peak RSS and bytes; its peak
    RSS is reported against the memory budget (``memory`` resource, or the
    config's own)."""
    from gnncore.io import ingest_versioned

    raw = upstream_metadata(context, raw_dataset.key)
    name = str(raw["name"])
    storage.stage_dir("graphs", name)  # checks the name is a safe one
    budget, argument = _ingest_budget(context, config, memory, raw)
    tracker = mlflow.tracker()
    out = ingest_versioned(
        str(raw["path"]),
        storage.stage_root("graphs"),
        name,
        format=str(raw["format"]),
        directed=bool(raw["directed"]),
        name=name,
        nodes=str(raw["nodes"]) if raw.get("nodes") else None,
        standardize_features=bool(raw.get("standardize_features", False)),
        progress=lambda stage: context.log.info(f"ingest: {stage}"),
        memory_budget=argument,
        tracking=tracker,
        tags=run_tags(context),
    )
    report = out.report
    if out.reused:
        context.log.info(f"{out.path} already holds this graph (stage key {out.stage_key}): reused")
    else:
        context.log.info(f"ingested {report.num_canonical_edges:,} edges in {report.seconds:.1f}s")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out.path)),
            "stage_key": out.stage_key,
            "input_sha256": out.input_sha256,
            "manifest_sha256": out.manifest_sha256,
            "reused": out.reused,
            "name": name,
            "num_nodes": report.num_nodes,
            "num_edges": report.num_canonical_edges,
            "num_input_edges": report.num_input_edges,
            "self_loops_removed": report.self_loops_removed,
            "duplicates_removed": report.duplicates_removed,
            "num_features": report.num_features,
            "num_classes": report.num_classes,
            "seconds": dg.MetadataValue.float(report.seconds),
            "memory_budget": memory.setting(config.memory_budget),
            **cost_metadata(
                report.phases,
                peak_rss_bytes=report.peak_rss_bytes,
                memory_budget=budget,
                input_bytes=report.input_bytes,
                output_bytes=report.output_bytes,
                storage_read_bytes=report.storage_read_bytes,
                storage_written_bytes=report.storage_written_bytes,
            ),
            **(
                {"mlflow_run": dg.MetadataValue.url(tracker.run_url(out.run_id))}
                if out.run_id
                else {}
            ),
        }
    )


def _ingest_budget(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    memory: MemoryBudgetResource,
    raw: dict,
) -> tuple[int | None, int | str | None]:
    """The budget ingestion runs under (bytes, ``None`` for ``none``) and the
    ``memory_budget`` argument that gives it: ``auto`` stays ``auto``; a size
    set on the asset forces bounded memory (the setting, recorded in the MLflow
    run as written); the deployment's size does where the bounded path takes
    the input, its buffers sized from what the process does not hold already,
    else ingestion runs in memory and its peak is only reported against it."""
    from gnncore.io.bounded.budget import MIN_MEMORY_BUDGET
    from gnncore.io.dispatch import takes_memory_budget

    setting = memory.setting(config.memory_budget)
    budget = stage_budget(memory, config.memory_budget)
    if budget is None or setting == "auto" or config.memory_budget:
        return budget, None if budget is None else setting
    nodes = str(raw["nodes"]) if raw.get("nodes") else None
    standardize = bool(raw.get("standardize_features", False))
    if takes_memory_budget(str(raw["path"]), str(raw["format"]), nodes, standardize):
        # the process's budget: its buffers get what the process does not hold already
        share = data_share(budget, MIN_MEMORY_BUDGET, "bounded-memory ingestion")
        return budget, share.data_bytes
    context.log.info(
        f"ingest: {raw['format']} input is ingested in memory (the bounded path takes text "
        "edge lists, with a Parquet node table or none, without standardize_features); its "
        f"peak is reported against the budget of {budget:,} bytes"
    )
    return budget, "auto"
