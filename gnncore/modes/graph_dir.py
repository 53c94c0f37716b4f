"""Train on a graph directory in one call, tracked (the CLI's and Dagster's entry)."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gnncore.modes.choose import ModeChoice, resolve_mode
from gnncore.modes.link import train_link_graph_dir
from gnncore.modes.node import train_node_graph_dir
from gnncore.modes.run import RunOptions, line_logger
from gnncore.store import GraphDir
from gnncore.train.core.session import Progress
from gnncore.train.fitting import EpochCallback
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.node.config import OUT_OF_CORE_MODES, ConfigError, NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult

if TYPE_CHECKING:
    from gnncore.tracking import RunTracker

_log = logging.getLogger(__name__)


def train_graph_dir(
    graph_dir: str | os.PathLike[str] | GraphDir,
    config: NodeTrainConfig | LinkTrainConfig | None = None,
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
    progress: Progress = True,
    run_name: str | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    keep_checkpoints: int = 2,
    on_epoch_end: EpochCallback | None = None,
    placement: str | os.PathLike[str] | None = None,
    replication: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    memory_budget: int | None = None,
    mode_choice: ModeChoice | None = None,
) -> NodeTrainResult | LinkTrainResult:
    r"""Train a node classifier (or, with a :class:`LinkTrainConfig`, a link
    predictor: :func:`~gnncore.train.train_link_predictor` on
    :func:`~gnncore.train.link_splits`) on a graph directory and (optionally)
    track it.

    Features and topology are read through
    :class:`~gnncore.store.GraphDirFeatureStore` and
    :class:`~gnncore.store.GraphDirGraphStore` (memory-mapped, never loaded
    whole). With ``tracking`` the run gets the parameters (config plus dataset
    name and counts), per-epoch ``train_loss`` / ``val_accuracy``, the final
    metrics, a ``curves.png`` artifact and the model; it ends ``FINISHED``, or
    ``FAILED`` when training raises (the exception propagates).

    With ``checkpoint_dir`` a checkpoint is written after every epoch; with
    ``resume`` training continues from the newest one (see
    :func:`~gnncore.train.train_node_classifier`). A resumed, tracked run is a
    new MLflow run tagged ``resumed_from_epoch`` and ``resumed_from_run_id``
    that re-logs the earlier epochs; the interrupted run, if its process died
    without closing it (``SIGKILL``, power loss), is marked ``FAILED`` then.

    Args:
        graph_dir (str or PathLike or GraphDir): A graph directory with
            features, labels, ``num_classes`` and train/val/test splits.
        config (NodeTrainConfig, optional): Hyper-parameters.
            (default: :obj:`NodeTrainConfig()`)
        tracking (RunTracker, optional): Where to log the run, e.g.
            :class:`gnncore.tracking.MlflowTracker`. (default: :obj:`None`)
        tags (Mapping, optional): Extra run tags (the Dagster asset passes
            ``dagster_run_id``). ``dataset``, ``task`` and ``model`` are
            always set. (default: :obj:`None`)
        progress (bool or callable, optional): Show tqdm bars (``True``), nothing
            (``False``), or call ``progress(line)`` once per epoch (e.g. a
            Dagster logger's ``info``). (default: :obj:`True`)
        run_name (str, optional): Run name; default ``"<dataset>-<model>"``.
            (default: :obj:`None`)
        checkpoint_dir (str or PathLike, optional): Per-epoch checkpoints go
            here, e.g. :func:`~gnncore.train.default_checkpoint_dir`. A fresh
            run removes older checkpoints in it once its own first checkpoint
            is written (one that fails before keeps them). (default: :obj:`None`)
        resume (bool, optional): Continue from the newest checkpoint in
            ``checkpoint_dir``, a fresh start when there is none; raises
            :class:`~gnncore.train.CheckpointError` (before any run is
            created) when it was written with other settings or data.
            (default: :obj:`False`)
        keep_checkpoints (int, optional): Newest checkpoints kept.
            (default: :obj:`2`)
        on_epoch_end (callable, optional): ``f(epoch, checkpoint_path)`` after
            each epoch. (default: :obj:`None`)
        placement (str or PathLike, optional): A placement plan of this graph
            (:func:`~gnncore.plan.plan_placement`; mode ``mmap``, which ``auto``
            then picks): features are served through
            :class:`~gnncore.plan.feature_store.PlacedFeatureStore` as the
            plan's device 0 (same batches and results as without), and the
            per-tier read counts are logged per epoch. Node task only.
            (default: :obj:`None`)
        replication (str or PathLike, optional): A replication plan of this
            graph, checked and recorded with the run (its path, stage key and
            memory increase); with ``config.hdr_part >= 0`` training samples
            as that partition of it, remote lists pruned (HyDRA).
            (default: :obj:`None`)
        store (str or PathLike, optional): A partitioned store of this graph
            (:func:`~gnncore.outofcore.write_partitioned_store`), read by
            the out-of-core modes ``config.mode="hierbatching"`` and
            ``"partition_buffer"`` (:mod:`gnncore.modes.node_data`); the
            run logs the mode, the budget and the bytes read per epoch.
            (default: :obj:`None`)
        memory_budget (int, optional): Bytes the whole process may take (the
            deployment's budget), from which mode ``auto`` takes what the
            process holds and a margin off before comparing the in-memory
            training data with the rest (``config.memory_budget``, the data's
            own budget, wins when set); ``None``: the memory this process may
            still take. (default: :obj:`None`)
        mode_choice (ModeChoice, optional): The mode already chosen for this
            graph and config by :func:`~gnncore.modes.choose.resolve_mode`
            (a caller that had to know it first, to read the right inputs);
            ``None`` resolves it here. (default: :obj:`None`)

    Mode ``auto`` (the default) is chosen first (:mod:`gnncore.modes.choose`),
    logged, recorded (``mode_requested``, ``mode_reason``, ...) and returned as
    the result's ``mode_choice``; an explicit mode is used as it is.

    Returns:
        NodeTrainResult or LinkTrainResult: with ``run_id`` set when tracked.
    """
    config = (config or NodeTrainConfig()).validate()
    graph = graph_dir if isinstance(graph_dir, GraphDir) else GraphDir.open(graph_dir)
    graph.check_structure()  # corrupt arrays: one error naming the file, before training
    run = RunOptions(
        tracking, tags, progress, run_name, checkpoint_dir, resume, keep_checkpoints, on_epoch_end
    )
    choice = _choose(graph, config, run, memory_budget, mode_choice, store, placement, replication)
    config = choice.apply(config)
    if choice.requested == "auto" and config.mode not in OUT_OF_CORE_MODES:
        store = None  # offered to auto, not needed by the mode it chose
    run = dataclasses.replace(run, params=choice.params())
    result: NodeTrainResult | LinkTrainResult
    if isinstance(config, LinkTrainConfig):
        result = train_link_graph_dir(graph, config, run)
    else:
        result = train_node_graph_dir(graph, config, run, placement, replication, store)
    result.mode_choice = choice.to_dict()
    return result


def _choose(
    graph: GraphDir,
    config: NodeTrainConfig | LinkTrainConfig,
    run: RunOptions,
    memory_budget: int | None,
    mode_choice: ModeChoice | None,
    store: str | os.PathLike[str] | None,
    placement: str | os.PathLike[str] | None,
    replication: str | os.PathLike[str] | None,
) -> ModeChoice:
    """The run's mode: ``mode_choice``, else
    :func:`~gnncore.modes.choose.resolve_mode`'s; logged (:mod:`logging`; for
    ``auto`` also the progress line)."""
    if isinstance(config, LinkTrainConfig) and (
        placement is not None or replication is not None or store is not None
    ):
        raise ConfigError(
            "placement and replication plans and partitioned stores apply to node training only"
        )
    choice = mode_choice or resolve_mode(
        graph,
        config,
        memory_budget,
        store_available=store is not None,
        plans=placement is not None or replication is not None,
        checkpoint_dir=run.checkpoint_dir,
        resume=run.resume,
    )
    _log.info("%s", choice.line())
    log = line_logger(run.progress)
    if log is not None and choice.requested == "auto":
        log(choice.line())
    return choice
