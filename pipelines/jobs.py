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

distributed_train_job = dg.define_asset_job(
    name="distributed_train_job",
    selection=dg.AssetSelection.groups("gnn"),
    description="train_job with the model trained on several ranks through Pipes: the graph "
    "partitioned into trained_model's nproc parts, one rank per partition, the per-rank data "
    "written by the training into rank_data's folder (or reused from it; docs/DISTRIBUTED.md). "
    "The launchpad starts with 2 ranks; set graph_partition's parts and trained_model's "
    "nproc to the same N.",
    config={
        "ops": {
            "graph_partition": {"config": {"parts": 2}},
            "trained_model": {"config": {"nproc": 2}},
        }
    },
)
