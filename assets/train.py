"""The trained node classifier, tracked in MLflow."""


import dagster as dg
from pydantic import Field

from assets.graph import graph
from assets.partition import graph_partition
from assets.upstream import latest_metadata
from resources import ComputeResource, MlflowResource


class TrainConfig(dg.Config):
    """Hyper-parameters of the node-classification run."""

    model: str = Field(default="sage", description="GNN architecture (sage).")
    epochs: int = Field(default=10, description="Training epochs.")
    fanouts: list[int] = Field(default=[15, 10], description="Neighbours sampled per hop.")
    batch_size: int = Field(default=512, description="Seed nodes per mini-batch.")
    hidden: int = Field(default=128, description="Hidden channels.")
    lr: float = Field(default=0.005, description="Adam learning rate.")
    seed: int = Field(default=0, description="Random seed.")


@dg.asset(deps=[graph, graph_partition], kinds={"pytorch", "mlflow"}, group_name="gnn",
          pool="gpu", retry_policy=dg.RetryPolicy(max_retries=1))
def trained_model(context: dg.AssetExecutionContext, config: TrainConfig,
                  mlflow: MlflowResource, compute: ComputeResource) -> dg.MaterializeResult:
    """GraphSAGE trained with the C++ neighbour sampler; run, curves and model in MLflow."""
    from gnncore.plots import line_chart_png, markdown_image
    from gnncore.train import NodeTrainConfig, train_graph_dir

    upstream = latest_metadata(context, graph.key)
    partition = latest_metadata(context, graph_partition.key)
    train_config = NodeTrainConfig(model=config.model, epochs=config.epochs,
                                   num_layers=len(config.fanouts), fanouts=tuple(config.fanouts),
                                   batch_size=config.batch_size, hidden=config.hidden,
                                   lr=config.lr, seed=config.seed, device=compute.resolve())
    tracker = mlflow.tracker()
    tags = {"dagster_run_id": context.run.run_id, "dagster_asset": context.asset_key.to_user_string(),
            "partition_method": partition["method"], "partition_parts": partition["parts"]}
    result = train_graph_dir(str(upstream["path"]), train_config, tracking=tracker, tags=tags,
                             progress=False)
    curves = line_chart_png({"train loss": result.train_loss,
                             "val accuracy": result.val_accuracy}, "training", "epoch")
    return dg.MaterializeResult(metadata={
        "test_accuracy": dg.MetadataValue.float(result.test_accuracy),
        "val_accuracy": dg.MetadataValue.float(result.best_val_accuracy),
        "best_epoch": result.best_epoch,
        "seconds": dg.MetadataValue.float(result.seconds),
        "device": result.device,
        "mlflow_run_id": str(result.run_id),
        "mlflow_run": dg.MetadataValue.url(tracker.run_url(str(result.run_id))),
        "mlflow_tracking_uri": tracker.tracking_uri,
        "curves": dg.MetadataValue.md(markdown_image(curves, "loss and accuracy")),
    })
