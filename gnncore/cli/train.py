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
continues a killed run from its newest checkpoint. The training flags are
derived from the fields of :class:`~gnncore.train.NodeTrainConfig` and
:class:`~gnncore.train.LinkTrainConfig` (:mod:`gnncore.options`); unset
ones take the chosen task's (and model's) defaults. ``--mode auto`` (the
default) picks ``in_memory`` when the graph's training data and training's
working set fit what ``--memory-budget`` (the whole process's; default: the
memory this process may still take) leaves after the process's own memory, else
``hierbatching`` from ``--store`` (node) or ``partition_buffer`` (link, encoder
``none``), and says why (:mod:`gnncore.modes.choose`); the summary gets
``mode_requested``, ``mode_reason``, ``mode_training_bytes``,
``mode_working_bytes`` and ``mode_budget_bytes``.
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

from gnncore.cli.arg_types import positive_int, with_memory_figures
from gnncore.errors import GnnCoreError
from gnncore.progress import on_terminal


def _fanouts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ints like 15,10; got {text!r}"
        ) from None
    return values


def _fanouts_or_all(text: str) -> tuple[int, ...] | None:
    """``15,10``, or ``all`` for every neighbour (``None``)."""
    return None if text.strip().lower() in ("all", "none") else _fanouts(text)


def _task_options() -> dict[str, list[Any]]:
    """Task -> the :class:`~gnncore.options.OptionSpec` list of its config."""
    from gnncore.options import describe_options
    from gnncore.train import TASK_CONFIGS

    return {task: describe_options(config) for task, config in TASK_CONFIGS.items()}


def _default_text(spec: Any) -> str:
    if spec.info.per_model:
        return "per model"
    value = spec.default
    if isinstance(value, tuple):
        value = ",".join(str(v) for v in value) or "none"
    return str("all" if value is None and spec.kind == "ints" else value)


def _defaults_text(entries: list[tuple[str, Any]]) -> str:
    """``default: 5`` when every task agrees, else ``default node: 20; link: 5``."""
    texts = {task: _default_text(spec) for task, spec in entries}
    if len(set(texts.values())) == 1:
        return f"default: {next(iter(texts.values()))}"
    return "default " + "; ".join(f"{task}: {text}" for task, text in texts.items())


def add_option_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per training option of either task, derived from the config classes.

    Unset flags are absent from the namespace (``argparse.SUPPRESS``), so the
    chosen task's config takes its own default."""
    per_task = _task_options()
    seen: dict[str, list[tuple[str, Any]]] = {}
    for task, specs in per_task.items():
        for spec in specs:
            seen.setdefault(spec.name, []).append((task, spec))
    group = parser.add_argument_group("training options (defaults from the task's config)")
    for name, entries in seen.items():
        spec = entries[0][1]
        if any(
            (s.kind, s.choices, s.optional) != (spec.kind, spec.choices, spec.optional)
            for _, s in entries
        ):
            raise TypeError(f"option {name!r} has a different type in another task's config")
        tasks = [task for task, _ in entries]
        only = "" if len(tasks) == len(per_task) else f"{tasks[0].capitalize()} only: "
        helps = {task: s.info.help for task, s in entries}
        text = (
            spec.info.help
            if len(set(helps.values())) == 1
            else " ".join(f"{task.capitalize()}: {h}" for task, h in helps.items())
        )
        kwargs: dict[str, Any] = {
            "dest": name,
            "default": argparse.SUPPRESS,
            "help": f"{only}{text} ({_defaults_text(entries)})",
        }
        if spec.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif spec.kind == "choice":
            kwargs["choices"] = spec.choices
            if spec.info.bare is not None:
                kwargs.update(nargs="?", const=spec.info.bare)
        elif spec.kind == "ints":
            kwargs["type"] = _fanouts_or_all if spec.optional else _fanouts
            kwargs["metavar"] = "F1,F2" + (" | all" if spec.optional else "")
        else:
            kwargs["type"] = {"int": int, "float": float, "str": str}[spec.kind]
        group.add_argument(spec.flag, *spec.info.aliases, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph_dir", type=Path, metavar="GRAPH_DIR")
    parser.add_argument(
        "--task",
        choices=tuple(_task_options()),
        default="node",
        help="node classification or link prediction (default: node)",
    )
    add_option_arguments(parser)
    _add_run_arguments(parser)
    _add_data_arguments(parser)
    _add_distributed_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the run is checkpointed and tracked."""
    parser.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="per-epoch checkpoints (default: "
        "<data_root>/checkpoints/<dataset>-<model>-seed<seed>)",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=positive_int,
        default=2,
        metavar="K",
        help="newest checkpoints kept (default: 2)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest checkpoint (fresh start if none)",
    )
    parser.add_argument(
        "--mlflow-uri",
        default=None,
        metavar="URI",
        help="MLflow tracking URI (default: sqlite under the data root)",
    )
    parser.add_argument("--experiment", default="gnncore", help="MLflow experiment name")
    parser.add_argument("--run-name", default=None, help="MLflow run name")
    parser.add_argument(
        "--data-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="data root (default: $GNNCORE_DATA_ROOT or ./data)",
    )


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The plans and the partitioned store the run reads."""
    parser.add_argument(
        "--placement",
        type=Path,
        default=None,
        metavar="PLAN_DIR",
        help="serve features through this placement plan (gnncore plan placement); "
        "per-tier read counts go to MLflow (node task)",
    )
    parser.add_argument(
        "--replication",
        type=Path,
        default=None,
        metavar="PLAN_DIR",
        help="record this replication plan (gnncore plan replication) with the run; with "
        "--nproc: every rank also holds the plan's replicated nodes' features and labels, "
        "served locally instead of fetched from their owners",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="a partitioned store of the graph (gnncore store), read by --mode hierbatching "
        "and --mode partition_buffer, and by --mode auto when it chooses hierbatching",
    )


def _add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """``--nproc`` and what goes with it: the launch and the per-rank data."""
    parser.add_argument(
        "--nproc",
        type=positive_int,
        default=None,
        metavar="N",
        help="distributed node training: N ranks on this machine (gloo on CPU, NCCL with "
        "--device cuda), started by torch's elastic launcher (torchrun); N x --nnodes ranks "
        "in all, one per partition of --partition (docs/DISTRIBUTED.md)",
    )
    parser.add_argument(
        "--nnodes",
        type=positive_int,
        default=1,
        metavar="M",
        help="with --nproc: machines in the run, each running this command with its "
        "--node-rank (default: 1)",
    )
    parser.add_argument(
        "--node-rank",
        type=int,
        default=0,
        metavar="I",
        help="with --nproc: this machine's number, 0..M-1; machine 0 hosts the rendezvous, "
        "rank 0 and the MLflow run (default: 0)",
    )
    parser.add_argument(
        "--master-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="with --nproc: machine 0's address, where it listens and the others connect "
        "(default: 127.0.0.1, this machine only)",
    )
    parser.add_argument(
        "--master-port",
        type=positive_int,
        default=None,
        metavar="PORT",
        help="with --nproc: machine 0's rendezvous port (default: a free one; required with "
        "--nnodes > 1)",
    )
    parser.add_argument(
        "--join-token-file",
        default=None,
        metavar="FILE",
        help="with --nproc: the file (chmod 600) holding the secret every rank proves at "
        "rendezvous, the same on every machine (default: $GNNCORE_JOIN_TOKEN, "
        "$GNNCORE_JOIN_TOKEN_FILE, else generated; printed by machine 0 of --nnodes > 1)",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="K",
        help="with --nproc: after a rank fails, restart all ranks from the newest checkpoint "
        "up to K times (default: 0)",
    )
    parser.add_argument(
        "--backend",
        choices=("gloo", "nccl"),
        default=None,
        help="with --nproc: the process-group backend (default: nccl with a CUDA --device, "
        "else gloo); gloo with --device cuda shares the GPUs between the ranks, so several "
        "ranks can train on one GPU",
    )
    parser.add_argument(
        "--partition",
        type=Path,
        default=None,
        metavar="PARTITION_DIR",
        help="with --nproc: a partition of the graph (gnncore partition); its per-rank data "
        "is written beside it (PARTITION_DIR.ranks) or to --ranks-dir, and reused",
    )
    parser.add_argument(
        "--ranks-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --nproc: where the per-rank data goes (default: PARTITION_DIR.ranks; "
        "PARTITION_DIR.link-ranks with --task link)",
    )


def _distributed_args(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask for a distributed run (``--nproc``), checking the
    flags that go with it."""
    if args.nproc is None:
        launch_flags = (
            args.nnodes != 1
            or args.node_rank != 0
            or args.master_addr != "127.0.0.1"
            or args.master_port is not None
            or args.max_restarts != 0
            or args.join_token_file is not None
            or args.backend is not None
        )
        if args.partition is not None or args.ranks_dir is not None or launch_flags:
            raise GnnCoreError(
                "--partition, --ranks-dir, --nnodes, --node-rank, --master-addr, "
                "--master-port, --join-token-file, --max-restarts and --backend go with --nproc N"
            )
        return False
    if args.partition is None:
        raise GnnCoreError("--nproc needs --partition PARTITION_DIR (one partition per rank)")
    if args.store is not None or args.placement is not None:
        raise GnnCoreError("--nproc reads per-rank data: drop --store and --placement")
    return True


def data_root(arg: Path | None) -> Path:
    """``--data-root``, else ``$GNNCORE_DATA_ROOT``, else ``./data`` (read at call time)."""
    if arg is not None:
        return arg
    return Path(os.environ.get("GNNCORE_DATA_ROOT") or "data")


def config_options(args: argparse.Namespace) -> dict[str, Any]:
    """The training options given on the command line for ``args.task`` (by
    field name). An option of the other task is an error naming its flag."""
    per_task = _task_options()
    mine = {spec.name for spec in per_task[args.task]}
    other = [
        spec.flag
        for task, specs in per_task.items()
        if task != args.task
        for spec in specs
        if spec.name not in mine and hasattr(args, spec.name)
    ]
    if other:
        raise GnnCoreError(f"{', '.join(dict.fromkeys(other))}: not used by --task {args.task}")
    return {name: getattr(args, name) for name in mine if hasattr(args, name)}


def build_config(args: argparse.Namespace) -> Any:
    """The task's validated training configuration: the options given on the
    command line, the config's defaults for the rest."""
    from gnncore.train import TASK_CONFIGS

    return TASK_CONFIGS[args.task](**config_options(args)).validate()


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


def run(
    args: argparse.Namespace, on_epoch_end: Callable[[int, Path | None], None] | None = None
) -> dict[str, Any]:
    """Train as ``args`` say; ``on_epoch_end(epoch, checkpoint_path)`` is passed
    to :func:`gnncore.modes.train_graph_dir` (for tests and embedding)."""
    config = build_config(args)
    from gnncore.modes import RunInputs, RunRecording, open_store, resolve_mode, train_graph_dir
    from gnncore.modes.choose import distributed_config
    from gnncore.store import GraphDir
    from gnncore.tracking.mlflow import MlflowTracker, default_tracking_uri
    from gnncore.train import default_checkpoint_dir
    from gnncore.train.node.config import OUT_OF_CORE_MODES

    graph = GraphDir.open(args.graph_dir)  # fail on a bad directory before touching MLflow
    graph.check_structure()  # and on corrupt arrays, naming the file and row
    distributed = _distributed_args(args)
    root = data_root(args.data_root)
    run_kind = config.model if args.task == "node" else f"link-{config.model}-{config.decoder}"
    if args.nproc is not None:
        world = args.nproc * args.nnodes
        run_kind = f"{run_kind}-nproc{world}"  # not resumable by a one-process run
    checkpoint_dir = args.checkpoint_dir or default_checkpoint_dir(
        root, graph.manifest.name, run_kind, config.seed
    )
    choice = None
    if distributed:
        config = distributed_config(config)  # ranks read rank data: auto is mmap
    else:  # mode auto: chosen (or refused) before MLflow is touched
        choice = resolve_mode(
            graph,
            config,
            store_available=args.store is not None,
            plans=args.placement is not None or args.replication is not None,
            checkpoint_dir=checkpoint_dir,
            resume=args.resume,
        )
        config = choice.apply(config)
    if args.task == "node" and config.mode in OUT_OF_CORE_MODES:
        open_store(graph, config, args.store)  # and on a bad store or budget
    uri = args.mlflow_uri or default_tracking_uri(root)
    # Machines other than 0 (--node-rank > 0) open no MLflow run: machine 0 tracks it.
    tracker = MlflowTracker(uri, args.experiment) if not args.node_rank else None
    result: Any
    with _sigterm_as_interrupt():
        if distributed:
            from gnncore.distributed.training import (
                DistributedConfig,
                Launch,
                train_distributed,
                train_distributed_link,
            )

            launch = Launch(
                nnodes=args.nnodes,
                node_rank=args.node_rank,
                master_addr=args.master_addr,
                master_port=args.master_port,
                max_restarts=args.max_restarts,
                join_token_file=args.join_token_file,
            )
            train = train_distributed if args.task == "node" else train_distributed_link
            options = DistributedConfig(
                nproc=args.nproc,
                ranks_dir=args.ranks_dir,
                replication=args.replication,
                checkpoint_dir=checkpoint_dir,
                resume=args.resume,
                keep_checkpoints=args.keep_checkpoints,
                progress=not args.no_progress and on_terminal(),
                backend=args.backend,
                launch=launch,
            )
            result = train(
                graph.path,
                args.partition,
                config,
                options,
                tracking=tracker,
                run_name=args.run_name,
            )
        else:
            inputs = RunInputs(args.placement, args.replication, args.store, mode_choice=choice)
            recording = RunRecording(
                tracking=tracker,
                progress=not args.no_progress and on_terminal(),
                run_name=args.run_name,
                checkpoint_dir=checkpoint_dir,
                resume=args.resume,
                keep_checkpoints=args.keep_checkpoints,
                on_epoch_end=on_epoch_end,
            )
            result = train_graph_dir(graph, config, inputs, recording)
    if distributed and args.node_rank > 0:  # rank 0 and the MLflow run are on machine 0
        return {
            "task": args.task,
            "graph_dir": str(args.graph_dir),
            "dataset": graph.manifest.name,
            **config.to_dict(),
            **result.summary(),
        }
    assert result.run_id is not None and tracker is not None
    # the whole process's budget: the one mode auto compared with, else the option's
    budget = choice.budget_bytes if choice is not None else config.memory_budget_bytes
    summary = {
        "task": args.task,
        "graph_dir": str(args.graph_dir),
        "dataset": graph.manifest.name,
        **config.to_dict(),
        **({} if choice is None else choice.params()),
        **result.summary(),
        "mlflow_run_id": result.run_id,
        "mlflow_tracking_uri": uri,
        "mlflow_experiment_id": tracker.experiment_id,
        "mlflow_run_url": tracker.run_url(result.run_id),
    }
    return with_memory_figures(summary, budget)
