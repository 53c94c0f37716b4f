"""``gnncore train GRAPH_DIR --task node --model sage [...]``: train and log to MLflow.

The run goes to ``--mlflow-uri``, by default the SQLite store under the data
root (``--data-root``, else ``$GNNCORE_DATA_ROOT``, else ``./data``):
``<data_root>/mlflow/mlflow.db`` with artifacts in ``<data_root>/mlflow/artifacts``.
Unset options take the :class:`~gnncore.train.NodeTrainConfig` defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from gnncore.errors import GnnCoreError

TASKS = ("node", "link")


def _fanouts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints like 15,10; "
                                         f"got {text!r}") from None
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument("--task", choices=TASKS, default="node",
                        help="node classification (link prediction comes later)")
    parser.add_argument("--model", default="sage", help="architecture (default: sage)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--fanouts", type=_fanouts, default=None, metavar="F1,F2",
                        help="neighbours per hop while training, -1 = all (default: 15,10)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument("--weight-decay", type=float, default=None)
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--mlflow-uri", default=None, metavar="URI",
                        help="MLflow tracking URI (default: sqlite under the data root)")
    parser.add_argument("--experiment", default="gnncore", help="MLflow experiment name")
    parser.add_argument("--run-name", default=None, help="MLflow run name")
    parser.add_argument("--data-root", type=Path, default=None, metavar="DIR",
                        help="data root (default: $GNNCORE_DATA_ROOT or ./data)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def data_root(arg: Path | None) -> Path:
    """``--data-root``, else ``$GNNCORE_DATA_ROOT``, else ``./data`` (read at call time)."""
    if arg is not None:
        return arg
    return Path(os.environ.get("GNNCORE_DATA_ROOT") or "data")


def build_config(args: argparse.Namespace) -> Any:
    from gnncore.train import NodeTrainConfig

    overrides = {
        "model": args.model, "epochs": args.epochs, "seed": args.seed,
        "fanouts": args.fanouts, "batch_size": args.batch_size, "lr": args.lr,
        "hidden": args.hidden, "dropout": args.dropout, "weight_decay": args.weight_decay,
        "device": args.device, "num_workers": args.num_workers,
    }
    config = NodeTrainConfig()
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "fanouts" in overrides:  # one layer per hop unless told otherwise
        overrides["num_layers"] = len(overrides["fanouts"])
    return dataclasses.replace(config, **overrides).validate()


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.task == "link":
        raise GnnCoreError("--task link: link prediction arrives with the training issue; "
                           "use --task node")
    config = build_config(args)
    from gnncore.store import GraphDir
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
    from gnncore.train import train_graph_dir

    graph = GraphDir.open(args.graph_dir)  # fail on a bad directory before touching MLflow
    uri = args.mlflow_uri or default_tracking_uri(data_root(args.data_root))
    tracker = MlflowTracker(uri, args.experiment)
    result = train_graph_dir(graph, config, tracking=tracker, progress=not args.no_progress,
                             run_name=args.run_name)
    assert result.run_id is not None
    return {
        "task": args.task,
        "graph_dir": str(args.graph_dir),
        "dataset": graph.manifest.name,
        **result.summary(),
        "fanouts": list(config.fanouts),
        "batch_size": config.batch_size,
        "lr": config.lr,
        "hidden": config.hidden,
        "mlflow_run_id": result.run_id,
        "mlflow_tracking_uri": uri,
        "mlflow_experiment_id": tracker.experiment_id,
        "mlflow_run_url": tracker.run_url(result.run_id),
    }
