"""Jobs over the gnn asset graph."""

import dagster as dg

train_job = dg.define_asset_job(
    name="train_job",
    selection=dg.AssetSelection.groups("gnn"),
    description="Ingest the dataset, partition the graph, train the model, promote it and "
    "predict every node with the production model, end to end.",
)

partition_comparison_job = dg.define_asset_job(
    name="partition_comparison_job",
    selection=dg.AssetSelection.groups("partitioning"),
    description="Partition the latest graph with every method and compare them "
    "(partition_report; one MLflow run per method).",
)
