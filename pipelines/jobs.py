"""Jobs over the gnn asset graph."""

import dagster as dg

train_job = dg.define_asset_job(
    name="train_job",
    selection=dg.AssetSelection.groups("gnn"),
    description="Ingest the dataset (the run's dataset partition), partition the graph, train "
    "the model, promote it and predict every node with the production model, end to end.",
)

partition_comparison_job = dg.define_asset_job(
    name="partition_comparison_job",
    selection=dg.AssetSelection.groups("partitioning"),
    description="Partition a dataset's graph (the run's dataset partition) with every "
    "method and compare them (partition_report; one MLflow run per method).",
)
