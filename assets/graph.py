"""The ingested graph directory (docs/FORMAT.md)."""

import dagster as dg

from assets.dataset import raw_dataset
from assets.upstream import upstream_metadata
from resources import DataRootResource


@dg.asset(deps=[raw_dataset], kinds={"polars", "parquet"}, group_name="gnn")
def graph(context: dg.AssetExecutionContext, storage: DataRootResource) -> dg.MaterializeResult:
    """The raw dataset ingested with Polars into a validated CSR graph directory."""
    from gnncore.io import ingest

    raw = upstream_metadata(context, raw_dataset.key)
    out = storage.stage_dir("graphs", str(raw["name"]))
    report = ingest(
        str(raw["path"]),
        out,
        format=str(raw["format"]),
        directed=bool(raw["directed"]),
        name=str(raw["name"]),
    )
    context.log.info(f"ingested {report.num_canonical_edges:,} edges in {report.seconds:.1f}s")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out)),
            "name": str(raw["name"]),
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
