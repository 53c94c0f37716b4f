"""Mode ``auto``: pick a run's training mode from its graph and the memory budget.

:func:`resolve_mode` turns ``config.mode`` into the mode a run trains in,
before anything is built, and says why (:class:`ModeChoice`):

* an explicit mode is kept as it is;
* ``auto`` resuming from a checkpoint keeps the checkpoint's mode (and, for
  node classification, the budget its mega-batches were sized from);
* otherwise :func:`choose_mode`: ``in_memory`` when the in-memory training data
  (:func:`training_bytes`) fits :data:`DATA_SHARE` of the budget, else the task's
  out-of-core mode: ``hierbatching`` for node classification (it reads a
  partitioned store; without one the choice is refused, naming the budget, the
  estimate and how to build the store), ``partition_buffer`` for link
  prediction with encoder ``none`` (learned embeddings on disk), ``mmap`` where
  the out-of-core mode does not apply (the reason says which option stops it).

The budget is the config's own ``memory_budget`` when set, else the caller's
(``budget_bytes``: Dagster's ``memory`` resource, ``gnncore train
--memory-budget``), else the memory this process may still take
(:func:`gnncore.memory.memory_available`, cgroup-aware).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gnncore.errors import ConfigError
from gnncore.memory import memory_available
from gnncore.sizes import format_size
from gnncore.store import GraphDir
from gnncore.train.core.checkpoint import CheckpointDir
from gnncore.train.core.config import RANK_MODE, rank_mode
from gnncore.train.link.config import LinkTrainConfig
from gnncore.train.node.config import NodeTrainConfig
from gnncore.usage import StageBudget

#: The share of the budget the in-memory training data may take; the rest is left
#: for the model, its optimizer state, the mini-batches being sampled and their
#: activations, and the interpreter and torch themselves.
DATA_SHARE = 0.75

#: The share of a caller's budget (a whole process's) the out-of-core mode's
#: mega-batches are sized from when the config sets no ``memory_budget``: their
#: bound counts feature and edge payload only, while loading one makes transient
#: copies and the interpreter, torch, the model and the batches take the rest.
#: Under a 1 GiB cgroup with 1.1 GiB of features, 3/4 of the room (6 of 32
#: partitions per mega-batch) was killed and 1/3 trained (docs/BENCHMARKS.md).
OUT_OF_CORE_SHARE = 1 / 3

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
        memory_budget: The ``memory_budget`` the resolved node config gets when
            it had none (sizes the out-of-core mode's mega-batches); ``""`` keeps
            the config's.
    """

    mode: str
    requested: str
    reason: str
    training_bytes: int
    budget_bytes: int | None
    memory_budget: str = ""

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
        ``mode_training_bytes`` and ``mode_budget_bytes`` (``"none"``)."""
        return {
            "mode_requested": self.requested,
            "mode_reason": self.reason,
            "mode_training_bytes": self.training_bytes,
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

    Not counted (the rest of the budget, :data:`DATA_SHARE`, is left for them):
    model weights besides the embedding table, the sampled mini-batches, and
    the evaluation's filter of known triples.
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


def _budget(
    config: NodeTrainConfig | LinkTrainConfig, budget_bytes: int | None
) -> tuple[int | None, int | None, str]:
    """``(data, given, source)``: the bytes the training data may take, the budget
    as given, and where it came from. The config's own ``memory_budget`` is the
    data's already; a caller's budget bounds the whole process, so what the
    process holds now and a margin come off it (:class:`gnncore.usage.StageBudget`);
    without either, the memory this process may still take."""
    own = config.memory_budget_bytes
    if own is not None:
        return own, own, f"memory_budget {config.memory_budget}"
    if budget_bytes is not None:
        stage = StageBudget.start(int(budget_bytes))
        source = (
            f"the memory budget's data share ({format_size(int(budget_bytes))} less "
            f"{format_size(stage.overhead)} this process holds and a "
            f"{format_size(stage.margin)} margin)"
        )
        return stage.data_bytes, int(budget_bytes), source
    available = memory_available()
    return available, available, "the memory available"


def choose_mode(
    graph: GraphDir,
    config: NodeTrainConfig | LinkTrainConfig,
    budget_bytes: int | None = None,
    store_available: bool = False,
    plans: bool = False,
) -> ModeChoice:
    """What mode ``auto`` trains ``config``'s task on ``graph`` in (see the module).

    Args:
        graph (GraphDir): The graph to train on.
        config (NodeTrainConfig or LinkTrainConfig): The run's options; its own
            ``memory_budget``, when set, wins over ``budget_bytes``.
        budget_bytes (int, optional): The caller's budget; ``None``: the memory
            this process may still take. (default: :obj:`None`)
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
    budget, given, source = _budget(config, budget_bytes)

    def chose(mode: str, reason: str, memory_budget: str = "") -> ModeChoice:
        return ModeChoice(mode, "auto", reason, estimate, given, memory_budget)

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
            return chose("mmap", f"{' and '.join(needs_mmap)} read memory-mapped features")
    sizes = _describe(parts)
    if budget is None:
        return chose("in_memory", f"no budget given and no memory figure readable; {sizes}")
    allowed = int(budget * DATA_SHARE)
    compared = f"{format_size(estimate)} ({sizes}) against {DATA_SHARE:.0%} of {source}, " + (
        f"{format_size(budget)}"
    )
    if estimate <= allowed:
        return chose("in_memory", f"the training data fits: {compared}")
    if isinstance(config, NodeTrainConfig):
        return _out_of_core_node(graph, config, compared, estimate, budget, given, store_available)
    return _out_of_core_link(config, compared, estimate, given)


def _out_of_core_node(
    graph: GraphDir,
    config: Any,
    compared: str,
    estimate: int,
    budget: int,
    given: int | None,
    store_available: bool,
) -> ModeChoice:
    """Node classification that does not fit: ``hierbatching``, or why not."""
    if config.num_workers > 0:
        reason = (
            f"the training data does not fit ({compared}), but hierbatching trains without "
            f"loader worker processes (num_workers={config.num_workers}): features "
            "memory-mapped instead"
        )
        return ModeChoice("mmap", "auto", reason, estimate, given)
    if not store_available:
        raise ConfigError(
            f"mode auto: the in-memory training data of {graph.manifest.name} is about "
            f"{compared}: it does not fit, so training goes out of core (hierbatching), "
            "which reads a partitioned store of the graph. Build one (Dagster: materialize "
            "partitioned_store; CLI: `gnncore store GRAPH_DIR PARTITION_DIR OUT_DIR`) and "
            "pass it (--store), raise the budget (memory_budget), or choose a mode "
            "(mode mmap reads the features memory-mapped, slower once they exceed memory)"
        )
    if budget <= 0:
        raise ConfigError(
            f"mode auto: the training data is about {compared}: the budget leaves nothing "
            "for the data, not even HierBatching's mega-batches; raise the budget"
        )
    # A budget of the caller's (the process's) leaves the model its share; the
    # config's own memory_budget is the graph data's already (as for explicit modes).
    sized = "" if config.memory_budget else str(int(budget * OUT_OF_CORE_SHARE))
    reason = f"the training data does not fit ({compared}): out of core from the partitioned store"
    return ModeChoice("hierbatching", "auto", reason, estimate, given, sized)


def _out_of_core_link(
    config: LinkTrainConfig, compared: str, estimate: int, budget: int | None
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
        return ModeChoice("mmap", "auto", reason, estimate, budget)
    reason = (
        f"the training data does not fit ({compared}): learned embeddings and their Adagrad "
        f"sums on disk, {config.buffer_capacity} of {config.buffer_partitions} partitions "
        "in memory"
    )
    return ModeChoice("partition_buffer", "auto", reason, estimate, budget)


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
        _, budget, _ = _budget(config, budget_bytes)
        return ModeChoice(config.mode, config.mode, "explicit mode", sum(parts.values()), budget)
    previous = _checkpoint_config(checkpoint_dir) if resume else None
    if previous is not None and previous.get("mode", "auto") != "auto":
        _, budget, _ = _budget(config, budget_bytes)
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
