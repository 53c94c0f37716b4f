"""``gnncore train GRAPH_DIR --task {node,link} --model sage [...]``: train and log to MLflow.

``--task node`` trains a node classifier (:class:`~gnncore.train.NodeTrainConfig`);
``--task link`` a link predictor (:class:`~gnncore.train.LinkTrainConfig`) on
the graph's own triples (knowledge graphs) or a split of its edges, scored by
filtered MRR and Hits@k; ``--model none`` then learns node embeddings scored
by the decoder alone (plain DistMult).

The run goes to ``--mlflow-uri``, by default the SQLite store under the data
root (``--data-root``, else ``$GNNCORE_DATA_ROOT``, else ``./data``):
``<data_root>/mlflow/mlflow.db`` with artifacts in ``<data_root>/mlflow/artifacts``.
A checkpoint is written after every epoch to ``--checkpoint-dir``, by default
``<data_root>/checkpoints/<dataset>-<model>-seed<seed>``; ``--resume``
continues a killed run from its newest checkpoint. Unset options take the
:class:`~gnncore.train.NodeTrainConfig` defaults of the chosen model.
``SIGTERM`` (a cancelled Dagster run, ``kill``) ends the MLflow run ``KILLED``.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gnncore.cli.arg_types import positive_int
from gnncore.errors import GnnCoreError

TASKS = ("node", "link")
MODEL_CHOICES = ("sage", "gcn", "gat", "gin", "none")
AMP_CHOICES = ("bf16", "fp16")
DECODER_CHOICES = ("distmult", "dot")
#: Options that only one task reads.
NODE_ONLY = ("hidden", "weight_decay", "normalize_features")
LINK_ONLY = ("decoder", "dim", "negatives", "negative_sampling", "eval_negatives")


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
                        help="node classification or link prediction (default: node)")
    parser.add_argument("--model", choices=MODEL_CHOICES, default="sage",
                        help="architecture; 'none' is an MLP on the features alone (node) "
                             "or learned embeddings with the decoder alone (link) "
                             "(default: sage)")
    parser.add_argument("--sampler", choices=("dense", "per-layer"), default=None,
                        help="neighbour sampling: dense (each node's neighbours once per "
                             "batch, default) or per-layer (every layer re-samples)")
    parser.add_argument("--decoder", choices=DECODER_CHOICES, default=None,
                        help="link scoring: distmult (default) or dot")
    parser.add_argument("--dim", type=positive_int, default=None,
                        help="link: embedding and representation width (default: 200)")
    parser.add_argument("--negatives", type=positive_int, default=None, metavar="K",
                        help="link: negatives per mini-batch, shared by its positives "
                             "(default: 1000)")
    parser.add_argument("--negative-sampling", choices=("uniform", "degree"), default=None,
                        help="link: negative distribution (default: uniform)")
    parser.add_argument("--eval-negatives", type=int, default=None, metavar="K",
                        help="link: rank against K sampled (filtered) negatives instead of "
                             "all entities (default: 0 = all)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="most epochs (default: per model)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--fanouts", type=_fanouts, default=None, metavar="F1,F2",
                        help="neighbours per hop while training, -1 = all (default: 15,10)")
    parser.add_argument("--eval-fanouts", type=_fanouts, default=None, metavar="F1,F2",
                        help="neighbours per hop for validation and test (default: all)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--heads", type=int, default=None,
                        help="GAT attention heads (default: 8)")
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument("--weight-decay", type=float, default=None)
    parser.add_argument("--patience", type=int, default=None,
                        help="early stopping: epochs without a better validation "
                             "accuracy, 0 = off (default: 20)")
    parser.add_argument("--normalize-features", action="store_true", default=None,
                        help="divide each feature row by its sum (bag-of-words features)")
    parser.add_argument("--amp", nargs="?", const="bf16", choices=AMP_CHOICES, default=None,
                        help="mixed precision on CUDA: bf16 (the default of a bare --amp) "
                             "or fp16 with gradient scaling; ignored on a CPU")
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--prefetch-workers", type=int, default=None, metavar="N",
                        help="threads preparing batches ahead of compute (default 1; 0: none)")
    parser.add_argument("--prefetch-depth", type=int, default=None, metavar="D",
                        help="most batches prepared ahead (default 4)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None, metavar="DIR",
                        help="per-epoch checkpoints (default: "
                             "<data_root>/checkpoints/<dataset>-<model>-seed<seed>)")
    parser.add_argument("--keep-checkpoints", type=positive_int, default=2, metavar="K",
                        help="newest checkpoints kept (default: 2)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint (fresh start if none)")
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
    """The task's training configuration from ``args`` (unset options: defaults)."""
    unused = NODE_ONLY if args.task == "link" else LINK_ONLY
    given = [f"--{name.replace('_', '-')}" for name in unused
             if getattr(args, name, None) is not None]
    if given:
        raise GnnCoreError(f"{', '.join(given)}: not used by --task {args.task}")
    if args.task == "link":
        return build_link_config(args)
    from gnncore.train import NodeTrainConfig

    overrides = {
        "model": args.model, "epochs": args.epochs, "seed": args.seed,
        "fanouts": args.fanouts, "eval_fanouts": args.eval_fanouts,
        "batch_size": args.batch_size, "lr": args.lr, "hidden": args.hidden,
        "heads": args.heads, "dropout": args.dropout, "weight_decay": args.weight_decay,
        "patience": args.patience, "normalize_features": args.normalize_features,
        "amp": args.amp, "device": args.device, "num_workers": args.num_workers,
        "prefetch_workers": args.prefetch_workers, "prefetch_depth": args.prefetch_depth,
        "sampler": args.sampler,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "fanouts" in overrides:  # one layer per hop unless told otherwise
        overrides["num_layers"] = len(overrides["fanouts"])
    return NodeTrainConfig(**overrides).validate()


def build_link_config(args: argparse.Namespace) -> Any:
    from gnncore.train import LinkTrainConfig

    overrides = {
        "model": args.model, "decoder": args.decoder, "dim": args.dim, "epochs": args.epochs,
        "seed": args.seed, "fanouts": args.fanouts, "eval_fanouts": args.eval_fanouts,
        "batch_size": args.batch_size, "lr": args.lr, "heads": args.heads,
        "dropout": args.dropout, "patience": args.patience, "amp": args.amp,
        "device": args.device, "num_workers": args.num_workers,
        "num_negatives": args.negatives, "negative_sampling": args.negative_sampling,
        "eval_negatives": args.eval_negatives, "prefetch_workers": args.prefetch_workers,
        "prefetch_depth": args.prefetch_depth, "sampler": args.sampler,
    }
    return LinkTrainConfig(**{k: v for k, v in overrides.items() if v is not None}).validate()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Turn ``SIGTERM`` into ``KeyboardInterrupt`` for the block, so the tracked
    run ends ``KILLED`` instead of staying ``RUNNING`` (main thread only)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace,
        on_epoch_end: Callable[[int, Path | None], None] | None = None) -> dict[str, Any]:
    """Train as ``args`` say; ``on_epoch_end(epoch, checkpoint_path)`` is passed
    to :func:`gnncore.train.train_graph_dir` (for tests and embedding)."""
    config = build_config(args)
    from gnncore.store import GraphDir
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
    from gnncore.train import default_checkpoint_dir, train_graph_dir

    graph = GraphDir.open(args.graph_dir)  # fail on a bad directory before touching MLflow
    root = data_root(args.data_root)
    run_kind = config.model if args.task == "node" else f"link-{config.model}-{config.decoder}"
    checkpoint_dir = args.checkpoint_dir or default_checkpoint_dir(
        root, graph.manifest.name, run_kind, config.seed)
    uri = args.mlflow_uri or default_tracking_uri(root)
    tracker = MlflowTracker(uri, args.experiment)
    with _sigterm_as_interrupt():
        result = train_graph_dir(graph, config, tracking=tracker, progress=not args.no_progress,
                                 run_name=args.run_name, checkpoint_dir=checkpoint_dir,
                                 resume=args.resume, keep_checkpoints=args.keep_checkpoints,
                                 on_epoch_end=on_epoch_end)
    assert result.run_id is not None
    settings = ("fanouts", "batch_size", "lr", "heads", "dropout", "patience", "amp",
                "sampler") + (
        ("decoder", "dim", "num_negatives", "negative_sampling", "eval_negatives")
        if args.task == "link" else ("hidden", "weight_decay"))
    return {
        "task": args.task,
        "graph_dir": str(args.graph_dir),
        "dataset": graph.manifest.name,
        **result.summary(),
        **{name: list(value) if isinstance(value := getattr(config, name), tuple) else value
           for name in settings},
        "mlflow_run_id": result.run_id,
        "mlflow_tracking_uri": uri,
        "mlflow_experiment_id": tracker.experiment_id,
        "mlflow_run_url": tracker.run_url(result.run_id),
    }
