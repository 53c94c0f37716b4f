"""``gnncore predict GRAPH_DIR OUT_DIR [--model URI|DIR]``: every node's prediction as Parquet.

Writes ``OUT_DIR/predictions.parquet`` (one row per node, keyed by the original
node id: the predicted class and class probabilities, or a link model's
embedding) and ``OUT_DIR/manifest.json`` (rows, model, accuracy per split on
the predictions), by layer-wise inference over node batches
(:func:`gnncore.predict.predict_graph_dir`).

``--model`` is a ``models:/`` URI (``models:/NAME@production``,
``models:/NAME/3``, ``models:/<model id>``) resolved in the MLflow store
``--mlflow-uri`` (default: MLflow's ``$MLFLOW_TRACKING_URI``, else the SQLite
store under the data root), or a local model directory. Without it, the
``production`` version of the graph's registered model:
``gnncore-node-<dataset>``, else ``gnncore-link-<dataset>``.

``--memory-budget SIZE`` bounds the memory of the layers' outputs: when every
node's hidden rows do not fit in half of it, each layer goes to a file on disk
beside the output (deleted when done) and batches are sized from the budget;
the same predictions (within float tolerance). Default ``auto``: what the whole
process may take (the lower of its cgroup limit and the available memory plus
what it holds) less what it holds at the start and a margin; ``none``: in memory.

``--store DIR`` (a partitioned store of the graph, ``gnncore store``) runs a node
model's layers in the store's node order, part by part: each part's feature and
hidden rows are read once, sequentially, and only the sources of cut edges row
by row; the rows are written in the graph's order, with the same values.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gnncore.cli.arg_types import (
    add_memory_budget_option,
    add_overwrite_option,
    positive_int,
    with_memory_figures,
)
from gnncore.cli.train import data_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    add_overwrite_option(parser)
    parser.add_argument(
        "--model",
        default=None,
        metavar="URI|DIR",
        help="models:/NAME@ALIAS, models:/NAME/VERSION, models:/MODEL_ID or a local model "
        "directory (default: models:/gnncore-<task>-<dataset>@production)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=4096,
        metavar="N",
        help="target nodes per batch of each layer (default: 4096)",
    )
    add_memory_budget_option(
        parser,
        "memory of the layers' outputs and batches (e.g. 2GiB): beyond it each layer goes "
        "to a file on disk beside OUT_DIR, same predictions; auto: what the whole process "
        "may take (the lower of the cgroup limit and the available memory plus what it "
        "holds) less what it holds at the start and a 64 MiB margin; none: in memory",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="a partitioned store of the graph (gnncore store): a node model's layers run in "
        "its node order, part by part, each part's rows read once; same predictions, rows in "
        "the graph's order",
    )
    parser.add_argument(
        "--device", default="auto", metavar="D", help="auto, cpu, cuda or cuda:N (default: auto)"
    )
    parser.add_argument(
        "--mlflow-uri",
        default=None,
        metavar="URI",
        help="MLflow store of models:/ URIs (default: $MLFLOW_TRACKING_URI, else sqlite "
        "under the data root)",
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="data root (default: $GNNCORE_DATA_ROOT or ./data)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def default_model(graph_name: str, tracking_uri: str) -> str:
    """``models:/gnncore-node-<name>@production``, else the link one; raises
    :class:`~gnncore.predict.ModelNotFoundError` naming both when neither exists."""
    from mlflow import MlflowClient  # lazy: mlflow takes seconds to import
    from mlflow.exceptions import MlflowException

    from gnncore.predict import ModelNotFoundError  # lazy: torch, for a fast --help
    from gnncore.tracking.registry import PRODUCTION_ALIAS, registered_model_name  # lazy: mlflow

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    names = [registered_model_name(task, graph_name) for task in ("node", "link")]
    for name in names:
        try:
            client.get_model_version_by_alias(name, PRODUCTION_ALIAS)
        except MlflowException:
            continue
        return f"models:/{name}@{PRODUCTION_ALIAS}"
    raise ModelNotFoundError(
        f"no production version of {' or '.join(names)} in {tracking_uri}; pass --model"
    )


def tracking_uri(args: argparse.Namespace) -> str:
    """``--mlflow-uri``, else ``$MLFLOW_TRACKING_URI`` (MLflow's own convention),
    else the SQLite store under the data root."""
    from gnncore.tracking.mlflow import default_tracking_uri  # lazy: imports mlflow

    return (
        args.mlflow_uri
        or os.environ.get("MLFLOW_TRACKING_URI")
        or default_tracking_uri(data_root(args.data_root))
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gnncore.predict import predict_graph_dir  # lazy: torch, for a fast --help
    from gnncore.store import GraphDir  # lazy: polars

    graph = GraphDir.open(args.graph_dir)
    graph.check_structure()  # corrupt arrays: one line naming the file, before MLflow
    uri = args.mlflow_uri
    model = args.model
    if model is None or str(model).startswith("models:/"):
        uri = tracking_uri(args)
        if model is None:
            model = default_model(graph.manifest.name, uri)
    report = predict_graph_dir(
        graph,
        args.out_dir,
        model,
        tracking_uri=uri,
        batch_size=args.batch_size,
        device=args.device,
        progress=not args.no_progress,
        memory_budget=args.memory_budget,
        store=args.store,
    )
    summary = report.summary()
    return with_memory_figures({"out_dir": str(args.out_dir), **summary}, summary["memory_budget"])


def brief(summary: dict[str, Any]) -> dict[str, Any]:
    """What is printed: the headline figures (``--json`` keeps everything)."""
    keys = ("out_dir", "task", "rows", "test_accuracy", "training_test_accuracy", "seconds")
    model = summary.get("model", {})
    return {
        **{k: summary[k] for k in keys if k in summary},
        "model": model.get("uri"),
        "version": model.get("version"),
    }
