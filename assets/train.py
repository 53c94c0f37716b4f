"""The trained node classifier, tracked in MLflow."""


from typing import Optional

import dagster as dg
from pydantic import Field

from assets.graph import graph
from assets.partition import graph_partition
from assets.upstream import latest_metadata
from resources import ComputeResource, DataRootResource, MlflowResource


class TrainConfig(dg.Config):
    """Hyper-parameters of the node-classification run (None: the model's default)."""

    model: str = Field(default="sage", description="GNN architecture: sage, gcn, gat, gin or "
                       "none (features only).")
    epochs: int = Field(default=10, description="Most training epochs.")
    fanouts: list[int] = Field(default=[15, 10], description="Neighbours sampled per hop.")
    batch_size: int = Field(default=512, description="Seed nodes per mini-batch.")
    hidden: Optional[int] = Field(default=None, description="Hidden channels.")
    lr: Optional[float] = Field(default=None, description="Adam learning rate.")
    patience: int = Field(default=20, description="Early-stopping patience in epochs "
                          "(0: off).")
    seed: int = Field(default=0, description="Random seed.")


@dg.asset(deps=[graph, graph_partition], kinds={"pytorch", "mlflow"}, group_name="gnn",
          pool="gpu", retry_policy=dg.RetryPolicy(max_retries=1))
def trained_model(context: dg.AssetExecutionContext, config: TrainConfig,
                  storage: DataRootResource, mlflow: MlflowResource,
                  compute: ComputeResource) -> dg.MaterializeResult:
    """A GNN trained with the C++ neighbour sampler; run, curves and model in MLflow.

    Checkpoints go to ``<data root>/checkpoints/<dataset>-<model>-<dagster run id>``
    after every epoch, so a retry of the same Dagster run resumes where the
    failed attempt stopped, while every new run trains from scratch."""
    from gnncore.plots import line_chart_png, markdown_image
    from gnncore.train import NodeTrainConfig, train_graph_dir

    upstream = latest_metadata(context, graph.key)
    partition = latest_metadata(context, graph_partition.key)
    optional = {k: v for k, v in (("hidden", config.hidden), ("lr", config.lr)) if v is not None}
    train_config = NodeTrainConfig(model=config.model, epochs=config.epochs,
                                   num_layers=len(config.fanouts), fanouts=tuple(config.fanouts),
                                   batch_size=config.batch_size, patience=config.patience,
                                   seed=config.seed, device=compute.resolve(), **optional)
    tracker = mlflow.tracker()
    tags = {"dagster_run_id": context.run.run_id, "dagster_asset": context.asset_key.to_user_string(),
            "partition_method": partition["method"], "partition_parts": partition["parts"]}
    checkpoints = storage.stage_dir("checkpoints", f"{upstream['name']}-{config.model}-"
                                    f"{context.run.run_id}")
    result = train_graph_dir(str(upstream["path"]), train_config, tracking=tracker, tags=tags,
                             progress=False, checkpoint_dir=checkpoints,
                             resume=context.retry_number > 0)
    from gnncore.tracking.registry import registered_model_name

    version = mlflow.registry().register(
        registered_model_name("node", str(upstream["name"])), str(result.model_uri),
        str(result.run_id))
    curves = line_chart_png({"train loss": result.train_loss,
                             "val accuracy": result.val_accuracy}, "training", "epoch")
    return dg.MaterializeResult(metadata={
        "test_accuracy": dg.MetadataValue.float(result.test_accuracy),
        "val_accuracy": dg.MetadataValue.float(result.best_val_accuracy),
        "best_epoch": result.best_epoch,
        "seconds": dg.MetadataValue.float(result.seconds),
        "device": result.device,
        "test_macro_f1": dg.MetadataValue.float(result.test_macro_f1),
        "resumed_from_epoch": result.resumed_from_epoch,
        "checkpoint_dir": dg.MetadataValue.path(str(checkpoints)),
        "mlflow_run_id": str(result.run_id),
        "registered_model": version.name,
        "model_version": version.version,
        "mlflow_run": dg.MetadataValue.url(tracker.run_url(str(result.run_id))),
        "mlflow_tracking_uri": tracker.tracking_uri,
        "curves": dg.MetadataValue.md(markdown_image(curves, "loss and accuracy")),
    })


@dg.asset(deps=[trained_model], kinds={"mlflow"}, group_name="gnn")
def production_model(context: dg.AssetExecutionContext,
                     mlflow: MlflowResource) -> dg.MaterializeResult:
    """The registered version carrying the ``production`` alias: the new version,
    promoted only after the blocking ``model_quality`` check passed."""
    from gnncore.tracking.registry import ModelVersion

    meta = latest_metadata(context, trained_model.key)
    registry = mlflow.registry()
    version = ModelVersion(str(meta["registered_model"]), str(meta["model_version"]),
                           str(meta["mlflow_run_id"]), float(meta["val_accuracy"]))
    registry.promote(version)
    context.log.info(f"{version.name} version {version.version} is now production")
    return dg.MaterializeResult(metadata={"registered_model": version.name,
                                          "production_version": version.version,
                                          "val_accuracy": float(meta["val_accuracy"])})
