"""The trained model (node classifier or link predictor), tracked in MLflow."""

from typing import Any

import dagster as dg

from assets.graph import graph
from assets.outofcore import partitioned_store
from assets.partitions import DATASET_PARTITIONS, run_tags
from assets.plan import placement_plan
from assets.train_config import TrainConfig
from assets.upstream import upstream_metadata
from resources import ComputeResource, DataRootResource, MlflowResource

#: task -> the MLflow run metric the quality gate compares (and the asset reports)
VALIDATION_METRIC = {"node": "best_val_accuracy", "link": "best_val_mrr"}


@dg.asset(
    # The graph, the plans of that graph and its partitioned store: node training in
    # mode mmap serves features through the placement (both plans are recorded with
    # the run); in the out-of-core modes (hierbatching, partition_buffer) it reads the
    # partitioned store.
    deps=[graph, placement_plan, partitioned_store],
    kinds={"pytorch", "mlflow"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
    pool="gpu",
    retry_policy=dg.RetryPolicy(max_retries=1),
)
def trained_model(
    context: dg.AssetExecutionContext,
    config: TrainConfig,
    storage: DataRootResource,
    mlflow: MlflowResource,
    compute: ComputeResource,
) -> dg.MaterializeResult:
    """A GNN trained with the C++ neighbour sampler; run, curves and model in MLflow.

    Checkpoints go to ``<data root>/checkpoints/<dataset>-<model>-<dagster run id>``
    after every epoch, so a retry of the same Dagster run resumes where the
    failed attempt stopped, while every new run trains from scratch."""
    from gnncore.plots import line_chart_png, markdown_image
    from gnncore.tracking.registry import registered_model_name
    from gnncore.train import LinkTrainResult, train_graph_dir

    upstream = upstream_metadata(context, graph.key)
    train_config = config.build(compute.resolve())
    plans = plans_for(context, config.task, train_config, str(upstream["path"]))
    store = store_for(context, config.task, train_config, str(upstream["path"]))
    tracker = mlflow.tracker()
    tags = run_tags(context)
    checkpoints = storage.stage_dir(
        "checkpoints", f"{upstream['name']}-{config.task}-{config.model}-{context.run.run_id}"
    )
    result = train_graph_dir(
        str(upstream["path"]),
        train_config,
        tracking=tracker,
        tags=tags,
        progress=context.log.info,
        checkpoint_dir=checkpoints,
        resume=context.retry_number > 0,
        placement=plans.get("placement"),
        replication=plans.get("replication"),
        store=store,
    )
    metric = VALIDATION_METRIC[config.task]
    version = mlflow.registry(metric).register(
        registered_model_name(config.task, str(upstream["name"])),
        str(result.model_uri),
        str(result.run_id),
    )
    if isinstance(result, LinkTrainResult):
        validation, scores = (
            result.best_val_mrr,
            {
                "test_mrr": dg.MetadataValue.float(result.test.mrr),
                "test_hits@10": dg.MetadataValue.float(result.test.hits[10]),
                "val_mrr": dg.MetadataValue.float(result.best_val_mrr),
            },
        )
        curves = line_chart_png(
            {"train loss": result.train_loss, "val MRR": result.val_mrr}, "training", "epoch"
        )
    else:
        validation, scores = (
            result.best_val_accuracy,
            {
                "test_accuracy": dg.MetadataValue.float(result.test_accuracy),
                "val_accuracy": dg.MetadataValue.float(result.best_val_accuracy),
                "test_macro_f1": dg.MetadataValue.float(result.test_macro_f1),
            },
        )
        curves = line_chart_png(
            {"train loss": result.train_loss, "val accuracy": result.val_accuracy},
            "training",
            "epoch",
        )
    return dg.MaterializeResult(
        metadata={
            "task": config.task,
            **({"mode": train_config.mode} if config.task == "node" else {}),
            **({"store": dg.MetadataValue.path(store)} if store else {}),
            **scores,
            "validation_metric": metric,
            "validation_score": dg.MetadataValue.float(validation),
            "best_epoch": result.best_epoch,
            "seconds": dg.MetadataValue.float(result.seconds),
            "device": result.device,
            "resumed_from_epoch": result.resumed_from_epoch,
            "checkpoint_dir": dg.MetadataValue.path(str(checkpoints)),
            "mlflow_run_id": str(result.run_id),
            "registered_model": version.name,
            "model_version": version.version,
            "mlflow_run": dg.MetadataValue.url(tracker.run_url(str(result.run_id))),
            "mlflow_tracking_uri": tracker.tracking_uri,
            "curves": dg.MetadataValue.md(markdown_image(curves, "loss and validation metric")),
            **{f"{kind}_plan": dg.MetadataValue.path(path) for kind, path in plans.items()},
        }
    )


def plans_for(
    context: dg.AssetExecutionContext, task: str, train_config: Any, graph_path: str
) -> dict[str, str]:
    """The plans node training serves features through and records: this
    lineage's ``{"placement": dir, "replication": dir}``, which must cover
    ``graph_path`` (else they are stale: materialize them for this graph).
    Link training uses no plan (``{}``); neither does node training in a mode
    other than ``mmap`` (plans serve memory-mapped features) nor with loader
    worker processes (the placed store serves features in the training process),
    which is logged."""
    if task != "node":
        return {}
    if train_config.mode != "mmap":
        context.log.info(
            f"mode {train_config.mode}: placement and replication plans serve mode mmap only; "
            "training without them"
        )
        return {}
    if train_config.num_workers > 0:
        context.log.warning(
            "num_workers > 0: features come from the plain store, not through placement_plan"
        )
        return {}
    placement = upstream_metadata(context, placement_plan.key)
    if str(placement["graph_path"]) != graph_path:
        raise dg.Failure(
            f"placement_plan covers {placement['graph_path']}, but the graph to train on is "
            f"{graph_path}: materialize replication_plan and placement_plan for this graph"
        )
    return {"placement": str(placement["path"]), "replication": str(placement["replication_path"])}


def store_for(
    context: dg.AssetExecutionContext, task: str, train_config: Any, graph_path: str
) -> str | None:
    """The partitioned store node training reads in the out-of-core modes
    (``hierbatching``, ``partition_buffer``): this lineage's ``partitioned_store``,
    which must cover ``graph_path`` (else it is stale: materialize it for this
    graph). ``None`` in other modes and for link training."""
    from gnncore.train.node.config import OUT_OF_CORE_MODES

    if task != "node" or train_config.mode not in OUT_OF_CORE_MODES:
        return None
    store = upstream_metadata(context, partitioned_store.key)
    if str(store["graph_path"]) != graph_path:
        raise dg.Failure(
            f"partitioned_store covers {store['graph_path']}, but the graph to train on is "
            f"{graph_path}: materialize graph_partition and partitioned_store for this graph"
        )
    return str(store["path"])


@dg.asset(
    deps=[trained_model], kinds={"mlflow"}, group_name="gnn", partitions_def=DATASET_PARTITIONS
)
def production_model(
    context: dg.AssetExecutionContext, mlflow: MlflowResource
) -> dg.MaterializeResult:
    """The registered version carrying the ``production`` alias: the new version,
    promoted only after the blocking ``model_quality`` check passed."""
    from gnncore.tracking.registry import ModelVersion

    meta = upstream_metadata(context, trained_model.key)
    registry = mlflow.registry(str(meta["validation_metric"]))
    version = ModelVersion(
        str(meta["registered_model"]),
        str(meta["model_version"]),
        str(meta["mlflow_run_id"]),
        float(meta["validation_score"]),
    )
    registry.promote(version)
    context.log.info(f"{version.name} version {version.version} is now production")
    return dg.MaterializeResult(
        metadata={
            "registered_model": version.name,
            "production_version": version.version,
            str(meta["validation_metric"]): float(meta["validation_score"]),
        }
    )
