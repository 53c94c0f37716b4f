"""Train on a graph directory in one call, tracked (the CLI's and Dagster's entry)."""

from __future__ import annotations

import dataclasses
import logging
import os

from gnncore.modes.choose import ModeChoice, resolve_mode
from gnncore.modes.link import train_link_graph_dir
from gnncore.modes.node import train_node_graph_dir
from gnncore.modes.run import RunInputs, RunRecording, line_logger
from gnncore.store import GraphDir
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.link.loop import LinkTrainResult
from gnncore.train.node.config import OUT_OF_CORE_MODES, ConfigError, NodeTrainConfig
from gnncore.train.node.loop import NodeTrainResult

_log = logging.getLogger(__name__)


def train_graph_dir(
    graph_dir: str | os.PathLike[str] | GraphDir,
    config: NodeTrainConfig | LinkTrainConfig | None = None,
    inputs: RunInputs | None = None,
    recording: RunRecording | None = None,
    budget: int | None = None,
) -> NodeTrainResult | LinkTrainResult:
    r"""Train a node classifier (or, with a :class:`LinkTrainConfig`, a link
    predictor: a :class:`~gnncore.train.LinkTask` of
    :func:`~gnncore.train.link_splits`) on a graph directory and (optionally)
    track it.

    Features and topology are read through
    :class:`~gnncore.store.GraphDirFeatureStore` and
    :class:`~gnncore.store.GraphDirGraphStore` (memory-mapped, never loaded
    whole), then :func:`~gnncore.train.fit` trains the task.

    Args:
        graph_dir (str or PathLike or GraphDir): A graph directory with
            features, labels, ``num_classes`` and train/val/test splits.
        config (NodeTrainConfig or LinkTrainConfig, optional): Hyper-parameters.
            (default: :obj:`NodeTrainConfig()`)
        inputs (RunInputs, optional): Placement and replication plans and a
            partitioned store of this graph, and the mode already chosen.
            (default: none: the graph alone)
        recording (RunRecording, optional): MLflow tracking, tags, run name,
            progress, checkpoints, resume and the per-epoch callback.
            (default: not tracked, no checkpoints, tqdm bars)
        budget (int, optional): Bytes the whole process may take (the
            deployment's budget), from which mode ``auto`` takes what the
            process holds and a margin off before comparing the in-memory
            training data with the rest (``config.memory_budget``, the data's
            own budget, wins when set); ``None``: the memory this process may
            still take. Unused with ``inputs.mode_choice``. (default: :obj:`None`)

    Mode ``auto`` (the default) is chosen first (:mod:`gnncore.modes.choose`),
    logged, recorded (``mode_requested``, ``mode_reason``, ...) and returned as
    the result's ``mode_choice``; an explicit mode is used as it is.

    Returns:
        NodeTrainResult or LinkTrainResult: with ``run_id`` set when tracked.
    """
    config = (config or NodeTrainConfig()).validate()
    inputs = inputs or RunInputs()
    recording = recording or RunRecording()
    graph = graph_dir if isinstance(graph_dir, GraphDir) else GraphDir.open(graph_dir)
    graph.check_structure()  # corrupt arrays: one error naming the file, before training
    choice = _choose(graph, config, inputs, recording, budget)
    config = choice.apply(config)
    if choice.requested == "auto" and config.mode not in OUT_OF_CORE_MODES:
        inputs = dataclasses.replace(inputs, store=None)  # offered to auto, not needed
    params = {**choice.params(), **(recording.params or {})}
    recording = dataclasses.replace(recording, params=params)
    result: NodeTrainResult | LinkTrainResult
    if isinstance(config, LinkTrainConfig):
        result = train_link_graph_dir(graph, config, recording)
    else:
        result = train_node_graph_dir(graph, config, inputs, recording)
    result.mode_choice = choice.to_dict()
    return result


def _choose(
    graph: GraphDir,
    config: NodeTrainConfig | LinkTrainConfig,
    inputs: RunInputs,
    recording: RunRecording,
    budget: int | None,
) -> ModeChoice:
    """The run's mode: ``inputs.mode_choice``, else
    :func:`~gnncore.modes.choose.resolve_mode`'s; logged (:mod:`logging`; for
    ``auto`` also the progress line)."""
    if isinstance(config, LinkTrainConfig) and (inputs.plans or inputs.store is not None):
        raise ConfigError(
            "placement and replication plans and partitioned stores apply to node training only"
        )
    choice = inputs.mode_choice or resolve_mode(
        graph,
        config,
        budget,
        store_available=inputs.store is not None,
        plans=inputs.plans,
        checkpoint_dir=recording.checkpoint_dir,
        resume=recording.resume,
    )
    log = line_logger(recording.progress)
    if log is not None and choice.requested == "auto":
        log(choice.line())
    if not (callable(recording.progress) and choice.requested == "auto"):
        _log.info("%s", choice.line())  # a Dagster logger given as progress has it already
    return choice
