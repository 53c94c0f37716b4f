"""Mode ``auto``: pick a run's training mode from its graph and the memory budget.

:func:`resolve_mode` turns ``config.mode`` into the mode a run trains in,
before anything is built, and says why (:class:`ModeChoice`):

* an explicit mode is kept as it is;
* ``auto`` resuming from a checkpoint keeps the checkpoint's mode (and, for
  node classification, the budget its mega-batches were sized from);
* otherwise :func:`choose_mode`: ``in_memory`` when the in-memory training data
  (:func:`training_bytes`) and training's working set (:func:`working_set`: the
  model and its optimizer state, the sampled batches in flight, exact
  evaluation's batch and, when they stay in memory, its hidden layers) fit what
  the budget leaves after the process's fixed overhead, else the task's
  out-of-core mode: ``hierbatching`` for node classification (it reads a
  partitioned store; without one the choice is refused, naming the budget, the
  estimate and how to build the store), ``partition_buffer`` for link
  prediction with encoder ``none`` (learned embeddings on disk), ``mmap`` where
  the out-of-core mode does not apply (the reason says which option stops it).

The budget bounds the whole process: the config's own ``memory_budget`` (``gnncore
train --memory-budget``) when set, else the caller's (``budget_bytes``: Dagster's
``memory`` resource); what the process holds when the choice is made (the
interpreter, torch, MLflow: :class:`gnncore.usage.StageBudget`) and a margin come
off it first. Without either, the memory this process may still take
(:func:`gnncore.memory.memory_available`, cgroup-aware) less the margin. The
resolved config carries the whole-process budget in ``memory_budget``, so
HierBatching's mega-batches and exact evaluation's hidden layers are sized from
it (:mod:`gnncore.outofcore.training`, :mod:`gnncore.train.node.exact`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gnncore.errors import ConfigError
from gnncore.memory import memory_available
from gnncore.sizes import format_size
from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.core.config import RANK_MODE, rank_mode
from gnncore.train.core.workingset import WorkingSet, link_working_set, node_working_set
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.node.config import NodeTrainConfig
from gnncore.usage import STAGE_MARGIN, StageBudget, current_rss_bytes

#: The mode ``auto`` resolves to in a distributed run (ranks read their rank data):
#: the distributed entry's own rule (:func:`gnncore.train.core.config.rank_mode`).
DISTRIBUTED_MODE = RANK_MODE

_log = logging.getLogger(__name__)

Config = TypeVar("Config", bound=NodeTrainConfig | LinkTrainConfig)


@dataclass(frozen=True)
class ModeChoice:
    """The mode a run trains in, and why.

    Attributes:
        mode: The resolved mode (never ``auto``).
        requested: ``config.mode`` as given (``auto`` or an explicit mode).
        reason: One sentence: why this mode.
        training_bytes: The estimate of what the in-memory mode holds
            (:func:`training_bytes`).
        budget_bytes: The budget it was compared with (``None``: none known).
        memory_budget: The ``memory_budget`` the resolved config gets when it had
            none: the whole-process budget (sizes HierBatching's mega-batches and
            exact evaluation's hidden layers); ``""`` keeps the config's.
        working_bytes: The estimate of training's working set besides the data
            (:func:`working_set`; without the evaluation's hidden layers when
            they would spill to disk); 0 for a choice that did not compare.
        overhead_bytes: What the process held when the choice was made (the
            fixed overhead taken off a whole-process budget); 0 when unknown.
    """

    mode: str
    requested: str
    reason: str
    training_bytes: int
    budget_bytes: int | None
    memory_budget: str = ""
    working_bytes: int = 0
    overhead_bytes: int = 0

    def apply(self, config: Config) -> Config:
        """``config`` in the resolved mode (validated)."""
        changes: dict[str, Any] = {"mode": self.mode}
        if self.memory_budget and not config.memory_budget:
            changes["memory_budget"] = self.memory_budget
        resolved: Config = dataclasses.replace(config, **changes)
        resolved.validate()
        return resolved

    def params(self) -> dict[str, Any]:
        """Run parameters beside ``mode``: ``mode_requested``, ``mode_reason``,
        ``mode_training_bytes``, ``mode_working_bytes``, ``mode_overhead_bytes``
        and ``mode_budget_bytes`` (``"none"``)."""
        return {
            "mode_requested": self.requested,
            "mode_reason": self.reason,
            "mode_training_bytes": self.training_bytes,
            "mode_working_bytes": self.working_bytes,
            "mode_overhead_bytes": self.overhead_bytes,
            "mode_budget_bytes": "none" if self.budget_bytes is None else self.budget_bytes,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for results, JSON and Dagster metadata)."""
        return dataclasses.asdict(self)

    def line(self) -> str:
        """The log line: ``mode auto -> in_memory: <reason>``."""
        return f"mode {self.requested} -> {self.mode}: {self.reason}"


def training_bytes(graph: GraphDir, config: NodeTrainConfig | LinkTrainConfig) -> dict[str, int]:
    """Bytes the ``in_memory`` mode holds for ``graph`` and ``config``'s task,
    by part (sum them for the estimate); read from array shapes, nothing loaded.

    Node classification: ``features`` ``N·F·s`` (``s``: the stored item size, 4
    for float32), ``topology`` ``8·(N + 1) + 8·E`` (the CSR as int64),
    ``labels`` ``8·N`` and ``splits`` ``8·(|train| + |val| + |test|)``.

    Link prediction: ``features`` ``N·F·s`` when the graph has features (the
    in-memory mode reads them); ``embeddings`` ``8·N·dim`` when the model learns
    an embedding table (encoder ``none``, or a graph without features): the
    float32 table and its Adagrad sums; ``triples`` ``24·T`` (int64 head,
    relation, tail of every split); ``topology`` ``8·(N + 1) + 16·T`` for a GNN
    encoder (the message-passing CSR, both directions).

    Training's working set besides the data (model, batches, evaluation) is
    :func:`working_set`; the evaluation's filter of known triples is not counted.
    """
    m = graph.manifest
    n = int(m.num_nodes)
    features = graph.features()
    feature_bytes = 0 if features is None else int(features.size) * features.dtype.itemsize
    if isinstance(config, NodeTrainConfig):
        return {
            "features": feature_bytes,
            "topology": 8 * (n + 1) + 8 * int(np.asarray(graph.indices).size),
            "labels": 8 * n,
            "splits": 8
            * sum(
                len(graph.array(f"{name}_idx"))
                for name in ("train", "val", "test")
                if graph.has(f"{name}_idx")
            ),
        }
    if all(graph.has(f"{s}_triples") for s in ("train", "valid", "test")):
        triples = sum(len(graph.array(f"{s}_triples")) for s in ("train", "valid", "test"))
    else:
        triples = len(graph.array("edges_shuffled")) if graph.has("edges_shuffled") else 0
    learns_embeddings = config.model == "none" or features is None
    return {
        "features": feature_bytes,
        "embeddings": 8 * n * int(config.dim) if learns_embeddings else 0,
        "triples": 24 * int(triples),
        "topology": 0 if config.model == "none" else 8 * (n + 1) + 16 * int(triples),
    }


def working_set(graph: GraphDir, config: NodeTrainConfig | LinkTrainConfig) -> WorkingSet:
    """Training's working set besides the data for ``graph`` and ``config``'s task
    (:mod:`gnncore.train.core.workingset`), from the graph's sizes."""
    m = graph.manifest
    edges = int(np.asarray(graph.indices).size)
    if isinstance(config, NodeTrainConfig):
        return node_working_set(m.num_nodes, edges, m.num_features, m.num_classes, config)
    return link_working_set(m.num_nodes, edges, m.num_features, config)


@dataclass(frozen=True)
class _Budget:
    """A budget as :func:`choose_mode` compares with it: ``room`` for the data and
    the working set (``None``: none known), the budget ``given`` (recorded),
    ``total`` the whole process's (handed on to the resolved config; ``""`` for
    the memory available), the ``overhead`` taken off, and where it came from."""

    room: int | None
    given: int | None
    total: str
    overhead: int
    source: str


def _budget(config: NodeTrainConfig | LinkTrainConfig, budget_bytes: int | None) -> _Budget:
    """The budget of the choice: the config's own ``memory_budget`` when set, else
    the caller's, each bounding the whole process, so what the process holds now
    and a margin come off it (:class:`gnncore.usage.StageBudget`); without either,
    the memory this process may still take less the margin."""
    own = config.memory_budget_bytes
    given = own if own is not None else budget_bytes
    if given is not None:
        stage = StageBudget.start(int(given))
        name = f"memory_budget {config.memory_budget}" if own is not None else "the memory budget"
        source = (
            f"{name} ({format_size(int(given))}) less {format_size(stage.overhead)} this "
            f"process holds and a {format_size(stage.margin)} margin"
        )
        return _Budget(stage.data_bytes, int(given), str(int(given)), stage.overhead, source)
    available = memory_available()
    if available is None:
        return _Budget(None, None, "", 0, "no memory figure readable")
    room = max(available - STAGE_MARGIN, 0)
    source = (
        f"the memory available ({format_size(available)}) less a {format_size(STAGE_MARGIN)} margin"
    )
    return _Budget(room, available, "", current_rss_bytes(), source)


def choose_mode(
    graph: GraphDir,
    config: NodeTrainConfig | LinkTrainConfig,
    budget_bytes: int | None = None,
    store_available: bool = False,
    plans: bool = False,
) -> ModeChoice:
    """What mode ``auto`` trains ``config``'s task on ``graph`` in (see the module).

    ``in_memory`` when the data (:func:`training_bytes`) plus the working set
    (:func:`working_set`) fit the room the budget leaves: first with exact
    evaluation's hidden layers in memory, else with them spilled to disk (then
    they are not counted, and the evaluation spills them).

    Args:
        graph (GraphDir): The graph to train on.
        config (NodeTrainConfig or LinkTrainConfig): The run's options; its own
            ``memory_budget``, when set, wins over ``budget_bytes``.
        budget_bytes (int, optional): The caller's budget for the whole process;
            ``None``: the memory this process may still take. (default: :obj:`None`)
        store_available (bool, optional): A partitioned store of ``graph`` will
            be passed (node ``hierbatching`` reads one). (default: :obj:`False`)
        plans (bool, optional): Placement or replication plans will be passed
            (they serve memory-mapped features: mode ``mmap``).
            (default: :obj:`False`)

    Raises:
        ConfigError: Node classification that does not fit the budget and has no
            partitioned store to train out of core from; the message names the
            budget, the estimate and how to build the store.
    """
    parts = training_bytes(graph, config)
    estimate = sum(parts.values())
    work = working_set(graph, config)
    budget = _budget(config, budget_bytes)
    room = budget.room
    in_memory_layers = room is None or estimate + work.total(True) <= room
    working = work.total(in_memory_layers)

    def chose(mode: str, reason: str, memory_budget: str = "") -> ModeChoice:
        # Only node training reads the whole-process budget from its config.
        node = isinstance(config, NodeTrainConfig)
        handed = memory_budget if node else ""
        return ModeChoice(
            mode, "auto", reason, estimate, budget.given, handed, working, budget.overhead
        )

    if isinstance(config, NodeTrainConfig):
        needs_mmap = [
            text
            for text, on in (
                ("placement or replication plans", plans),
                ("locality_aware", config.locality_aware),
                ("hdr_part", config.hdr_part >= 0),
            )
            if on
        ]
        if needs_mmap:
            return chose(
                "mmap", f"{' and '.join(needs_mmap)} read memory-mapped features", budget.total
            )
    sizes = _describe(parts)
    if room is None:
        return chose("in_memory", f"no budget given and no memory figure readable; {sizes}")
    layers = "" if in_memory_layers or not work.eval_layers else ", evaluation layers on disk"
    compared = (
        f"{format_size(estimate)} ({sizes}) + working set {format_size(working)} "
        f"({_describe(work.parts(in_memory_layers))}{layers}) against {format_size(room)}: "
        f"{budget.source}"
    )
    if estimate + working <= room:
        return chose("in_memory", f"the training data fits: {compared}", budget.total)
    if isinstance(config, NodeTrainConfig):
        return _out_of_core_node(graph, config, compared, budget, store_available, chose)
    return _out_of_core_link(config, compared, chose)


def _out_of_core_node(
    graph: GraphDir,
    config: NodeTrainConfig,
    compared: str,
    budget: _Budget,
    store_available: bool,
    chose: Callable[..., ModeChoice],
) -> ModeChoice:
    """Node classification that does not fit: ``hierbatching``, or why not."""
    if config.num_workers > 0:
        reason = (
            f"the training data does not fit ({compared}), but hierbatching trains without "
            f"loader worker processes (num_workers={config.num_workers}): features "
            "memory-mapped instead"
        )
        return chose("mmap", reason, budget.total)
    if not store_available:
        raise ConfigError(
            f"mode auto: the in-memory training data of {graph.manifest.name} is about "
            f"{compared}: it does not fit, so training goes out of core (hierbatching), "
            "which reads a partitioned store of the graph. Build one (Dagster: materialize "
            "partitioned_store; CLI: `gnncore store GRAPH_DIR PARTITION_DIR OUT_DIR`) and "
            "pass it (--store), raise the budget (memory_budget), or choose a mode "
            "(mode mmap reads the features memory-mapped, slower once they exceed memory)"
        )
    if not budget.room and config.mega_batch_parts == 0:
        raise ConfigError(
            f"mode auto: the training data is about {compared}: the budget leaves nothing "
            "for the data, not even HierBatching's mega-batches; raise the budget"
        )
    # The mega-batches are sized from the whole-process budget, less what the
    # process holds when they are built and the working set (outofcore.training).
    total = budget.total or str(int(budget.given or 0) + budget.overhead)
    reason = f"the training data does not fit ({compared}): out of core from the partitioned store"
    return chose("hierbatching", reason, total)


def _out_of_core_link(
    config: LinkTrainConfig, compared: str, chose: Callable[..., ModeChoice]
) -> ModeChoice:
    """Link prediction that does not fit: ``partition_buffer``, or why not."""
    blockers = [
        text
        for text, on in (
            (f"encoder {config.model!r} (it needs encoder 'none')", config.model != "none"),
            (
                f"negative_sampling {config.negative_sampling!r} (it draws uniformly)",
                config.negative_sampling != "uniform",
            ),
            (f"num_workers={config.num_workers} (it needs 0)", config.num_workers > 0),
        )
        if on
    ]
    if blockers:
        reason = (
            f"the training data does not fit ({compared}), but the partition buffer does not "
            f"apply to {', '.join(blockers)}: features memory-mapped, embeddings in memory"
        )
        return chose("mmap", reason)
    reason = (
        f"the training data does not fit ({compared}): learned embeddings and their Adagrad "
        f"sums on disk, {config.buffer_capacity} of {config.buffer_partitions} partitions "
        "in memory"
    )
    return chose("partition_buffer", reason)


def _describe(parts: dict[str, int]) -> str:
    """``features 40.0 MiB + topology 1.2 MiB + ...`` (parts that are not empty)."""
    return " + ".join(f"{name} {format_size(size)}" for name, size in parts.items() if size)


def resolve_mode(
    graph: GraphDir,
    config: NodeTrainConfig | LinkTrainConfig,
    budget_bytes: int | None = None,
    *,
    store_available: bool = False,
    plans: bool = False,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> ModeChoice:
    """The mode a run of ``config`` on ``graph`` trains in, before anything is built:
    an explicit ``config.mode`` as it is; ``auto`` resuming (``resume``) from a
    checkpoint in ``checkpoint_dir`` the checkpoint's mode; else
    :func:`choose_mode` (its arguments). Apply it with :meth:`ModeChoice.apply`.

    Raises:
        ConfigError: As :func:`choose_mode`.
    """
    if config.mode != "auto":
        parts = training_bytes(graph, config)
        budget = _budget(config, budget_bytes).given
        return ModeChoice(config.mode, config.mode, "explicit mode", sum(parts.values()), budget)
    previous = _checkpoint_config(checkpoint_dir) if resume else None
    if previous is not None and previous.get("mode", "auto") != "auto":
        budget = _budget(config, budget_bytes).given
        mode = str(previous["mode"])
        sized = (
            str(previous.get("memory_budget") or "") if isinstance(config, NodeTrainConfig) else ""
        )
        return ModeChoice(
            mode,
            "auto",
            f"resumed: the checkpoint being resumed trained in mode {mode}",
            sum(training_bytes(graph, config).values()),
            budget,
            sized,
        )
    return choose_mode(graph, config, budget_bytes, store_available, plans)


def _checkpoint_config(checkpoint_dir: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The config of the newest checkpoint in ``checkpoint_dir`` (``None``: none)."""
    if checkpoint_dir is None:
        return None
    latest = CheckpointDir(checkpoint_dir).latest()
    return None if latest is None else dict(latest.state["config"])


def distributed_config(config: Config) -> Config:
    """``config`` for a distributed run: ``auto`` resolves to :data:`DISTRIBUTED_MODE`
    (every rank reads its own rank data; the modes that read the whole graph do
    not apply), an explicit mode stays."""
    if config.mode != "auto":
        return config
    _log.info("mode auto -> %s: distributed ranks read their rank data", DISTRIBUTED_MODE)
    resolved: Config = rank_mode(config)
    return resolved
