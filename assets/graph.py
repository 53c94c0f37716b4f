"""The ingested graph directory (docs/FORMAT.md)."""

import dagster as dg

from assets.dataset import raw_dataset
from assets.partitions import DATASET_PARTITIONS
from assets.upstream import upstream_metadata
from resources import DataRootResource


@dg.asset(
    deps=[raw_dataset],
    kinds={"polars", "parquet"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
)
def graph(context: dg.AssetExecutionContext, storage: DataRootResource) -> dg.MaterializeResult:
    """The raw dataset ingested with Polars into a validated CSR graph directory,
    ``graphs/<name>-<stage key>``: the key covers the ingest settings and the
    raw input's sha256; the same settings on the same input reuse it."""
    from gnncore.io import ingest_versioned

    raw = upstream_metadata(context, raw_dataset.key)
    name = str(raw["name"])
    storage.stage_dir("graphs", name)  # checks the name is a safe one
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
        }
    )
