"""The node partitioning of the graph (METIS now; GREM and others to come)."""


import dagster as dg
from pydantic import Field

from assets.graph import graph
from assets.upstream import latest_metadata
from resources import DataRootResource


class PartitionConfig(dg.Config):
    """How to partition the graph."""

    method: str = Field(default="metis", description="metis or metis-recursive")
    parts: int = Field(default=4, description="Number of partitions.")
    seed: int = Field(default=0, description="Random seed.")
    imbalance: float = Field(default=0.03, description="Allowed excess of the largest part "
                             "over N/parts.")


@dg.asset(deps=[graph], kinds={"metis"}, group_name="gnn")
def graph_partition(context: dg.AssetExecutionContext, config: PartitionConfig,
                    storage: DataRootResource) -> dg.MaterializeResult:
    """Min-edge-cut node partitioning of the graph, with cut and balance metrics."""
    from gnncore.partition import partition_graph
    from gnncore.plots import bar_chart_png, markdown_image

    upstream = latest_metadata(context, graph.key)
    name = f"{upstream['name']}-{config.method}-p{config.parts}"
    out = storage.stage_dir("partitions", name)
    report = partition_graph(str(upstream["path"]), out, method=config.method,
                             parts=config.parts, seed=config.seed, imbalance=config.imbalance)
    m = report.metrics
    chart = bar_chart_png(m.part_sizes, f"{name}: nodes per part", "part", "nodes",
                          reference=m.num_nodes / config.parts)
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(out)),
        "method": config.method,
        "parts": config.parts,
        "imbalance": config.imbalance,
        "edge_cut_fraction": dg.MetadataValue.float(m.edge_cut_fraction),
        "max_part_ratio": dg.MetadataValue.float(m.max_part_ratio),
        "seconds": dg.MetadataValue.float(report.seconds),
        "peak_rss_bytes": report.peak_rss_bytes,
        "parts_table": dg.MetadataValue.md(m.markdown_table()),
        "balance_chart": dg.MetadataValue.md(markdown_image(chart, "part sizes")),
    })
