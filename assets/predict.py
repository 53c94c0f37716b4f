"""Every node's prediction by the production model, as Parquet under the data root."""

import os

import dagster as dg

from assets.costs import budget_metadata, data_share, stage_budget
from assets.graph import graph
from assets.outofcore import partitioned_store
from assets.partitions import DATASET_PARTITIONS
from assets.train import production_model
from assets.upstream import upstream_metadata
from resources import ComputeResource, DataRootResource, MemoryBudgetResource, MlflowResource

PREVIEW_ROWS = 5


def lineage_store(context: dg.AssetExecutionContext, graph_path: str, task: str) -> str | None:
    """This lineage's ``partitioned_store`` when a node model predicts and the store
    was written from ``graph_path`` and is still there (predictions then run in
    its node order, part by part); else ``None`` (the graph's own order)."""
    if task != "node":
        return None
    try:
        store = upstream_metadata(context, partitioned_store.key)
    except dg.Failure:  # never materialized for this dataset
        return None
    path = str(store["path"])
    return path if str(store["graph_path"]) == graph_path and os.path.isdir(path) else None


@dg.asset(
    deps=[production_model, graph, partitioned_store],
    kinds={"pytorch", "parquet"},
    group_name="gnn",
    partitions_def=DATASET_PARTITIONS,
)
def predictions(
    context: dg.AssetExecutionContext,
    storage: DataRootResource,
    mlflow: MlflowResource,
    compute: ComputeResource,
    memory: MemoryBudgetResource,
) -> dg.MaterializeResult:
    """The ``production`` version's prediction for every node of the graph
    (class and class probabilities, or a link model's embedding), keyed by the
    original node ids, by layer-wise inference (``gnncore predict``). Written to
    ``<data root>/predictions/<graph dir>-<task>-v<version>``, with
    ``<graph dir>-<task>-latest`` beside it pointing at the newest;
    ``test_accuracy`` is measured on the written predictions. The layer
    outputs stay in memory when they fit in half the deployment's memory
    budget (the ``memory`` resource) leaves once the process's own memory at
    the start (the model loaded, torch and MLflow) and a margin are taken off,
    else go to disk in batches sized from it; the peak RSS is reported against
    the budget. With this lineage's ``partitioned_store`` (of this graph; a node
    model) the layers run in its node order, part by part, each part's rows read
    once (``gnncore predict --store``): the same rows and values."""
    from pathlib import Path

    from gnncore.predict import load_trained_model, predict_graph_dir
    from gnncore.predict.api import link_latest, preview_rows
    from gnncore.tracking.registry import PRODUCTION_ALIAS
    from gnncore.train.core.layerstore import MIN_MEMORY_BUDGET
    from gnncore.usage import peak_rss_bytes

    name = str(upstream_metadata(context, production_model.key)["registered_model"])
    graph_path = Path(str(upstream_metadata(context, graph.key)["path"]))
    uri = f"models:/{name}@{PRODUCTION_ALIAS}"
    model = load_trained_model(uri, mlflow.resolved_tracking_uri())
    out = storage.stage_dir("predictions", f"{graph_path.name}-{model.spec.task}-v{model.version}")
    budget = stage_budget(memory)
    share = data_share(budget, MIN_MEMORY_BUDGET, "layer-wise prediction")
    store = lineage_store(context, str(graph_path), model.spec.task)
    report = predict_graph_dir(
        graph_path,
        out,
        model,
        device=compute.resolve(),
        progress=False,
        memory_budget=share.data_bytes,
        store=store,
    )
    latest = link_latest(out, f"{graph_path.name}-{model.spec.task}-latest")
    summary = report.summary()
    accuracy = {
        f"{split}_accuracy": dg.MetadataValue.float(value)
        for split, value in report.accuracy.items()
    }
    trained = summary.get("training_test_accuracy")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out)),
            "latest_path": dg.MetadataValue.path(str(latest)),
            "rows": report.rows,
            "task": summary["task"],
            **accuracy,
            **(
                {"training_test_accuracy": dg.MetadataValue.float(trained)}
                if trained is not None
                else {}
            ),
            "registered_model": name,
            "model_version": str(model.version),
            "model_uri": uri,
            "mlflow_run_id": str(model.run_id),
            "mlflow_tracking_uri": mlflow.resolved_tracking_uri(),
            "graph_path": dg.MetadataValue.path(str(graph_path)),
            "order": str(summary["order"]),
            **({"store_path": dg.MetadataValue.path(store)} if store is not None else {}),
            "seconds": dg.MetadataValue.float(float(summary["seconds"])),
            **budget_metadata(memory.setting(), budget, peak_rss_bytes()),
            "overhead_bytes": share.overhead,
            **({"data_budget_bytes": share.data_bytes} if share.data_bytes is not None else {}),
            "preview": dg.MetadataValue.md(preview_rows(out, PREVIEW_ROWS)),
        }
    )
