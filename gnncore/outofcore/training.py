"""Training sources of the out-of-core modes, built from a training config.

:func:`hierbatching_batches` turns a :class:`~gnncore.train.NodeTrainConfig`
with ``mode="hierbatching"`` into the training source and the evaluation
batches a :class:`~gnncore.train.NodeTask` trains on
(:func:`~gnncore.train.fitting.fit`'s ``source``, the task's ``eval_batches``).

:func:`sized_mega_batches` sizes the mega-batches from ``config.memory_budget``, the
budget of the whole process: what the process holds when the source is built
(its RSS: the interpreter, torch, MLflow, their mapped libraries, which a
memory cgroup charges too; :class:`gnncore.usage.StageBudget`), a margin,
and training's working set (the model, the batches in flight, an evaluation
batch: :func:`gnncore.train.core.workingset.node_working_set`, its neighbourhoods
kept to the sources a mega-batch holds, the per-node arrays) come off it; the
static cache (at its real size: on a heavy-tailed graph its in-lists are far
above ``r_s`` of the edges) and two mega-batches' payload bound over
:data:`LOAD_SHARE` take the rest (:func:`mega_batch_payload`). Where the
mini-batches prepared ahead (``prefetch_depth``) leave no room for one
partition, fewer are prepared ahead (:func:`sized_mega_batches`).
A budget that leaves no room for one partition even then is refused before
training, naming the minimum.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gnncore.memory import memory_available
from gnncore.outofcore.hierbatching import EvalBatches, HierBatchSource
from gnncore.outofcore.megabatch import data_bytes, mega_batch_parts, payload_bytes
from gnncore.outofcore.store import PartitionedStore
from gnncore.sampler import build_sampler
from gnncore.sizes import format_size
from gnncore.store import GraphDir
from gnncore.train.core.device import resolve_device
from gnncore.train.core.workingset import node_working_set
from gnncore.train.node.config import NodeTrainConfig
from gnncore.usage import MemoryBudgetError, StageBudget

#: The share of the room (the budget less the process's overhead, the margin and
#: the working set) the two mega-batches' payload bound may take: loading one
#: makes transient copies (the read buffers, ``G_cache``'s sort and concatenation)
#: and the allocator does not hand freed pages back at once. Calibrated on a
#: 2M-node, 1.9 GiB-feature store of 64 partitions (docs/BENCHMARKS.md, "Training
#: within a whole-process budget"): at 0.5, 2 partitions under a 1 GiB cgroup
#: finished once and were OOM-killed once (anonymous memory grew 600 MiB past the
#: sizing for 431 MiB estimated); at 0.4 that budget takes 1 partition, which
#: trains to the end.
LOAD_SHARE = 0.4

_log = logging.getLogger(__name__)


#: The share of a memory budget HierBatching's static cache may take (its
#: features, in-lists and ids, :func:`static_cache_bytes`):
#: :func:`budget_static_fraction` keeps a store's static set to it, so the rest
#: of the budget holds the process, the working set and one partition at least.
STATIC_SHARE = 1 / 8

#: Bytes per static node besides its feature row and in-list: its id and its
#: ``indptr`` entry (int64 each).
STATIC_NODE_BYTES = 16


def budget_static_fraction(
    wanted: float, in_degree: np.ndarray, row_bytes: int, budget: int | None
) -> float:
    """The static fraction of a store trained under a memory ``budget`` (bytes,
    ``None``: unbounded) of a graph with in-degrees ``in_degree`` and
    ``row_bytes`` of features per node: ``wanted``, or less where the static
    cache of the ``round(fraction·N)`` nodes of highest in-degree (their feature
    rows, in-lists of int64 ids and :data:`STATIC_NODE_BYTES`) would take more
    than :data:`STATIC_SHARE` of the budget. On a heavy-tailed graph the
    in-lists dominate: the showcase's 0.36% highest-degree nodes hold 13.7%
    of its edges. The fraction is rounded down to 6 digits, so the same budget
    names the same store."""
    count = len(in_degree)
    if budget is None or count == 0:
        return wanted
    wanted_count = int(round(wanted * count))
    top = -np.sort(-np.asarray(in_degree, dtype=np.int64))[:wanted_count]
    sizes = np.cumsum(8 * top + row_bytes + STATIC_NODE_BYTES)
    fits = int(np.searchsorted(sizes, STATIC_SHARE * budget, side="right"))
    if fits >= wanted_count:
        return wanted
    # The largest 6-digit fraction whose round(fraction·N) nodes fit.
    fraction = math.floor(fits / count * 1e6) / 1e6
    while fraction > 0 and int(round(fraction * count)) > fits:
        fraction = round(fraction - 1e-6, 6)
    return fraction


def graph_static_fraction(graph: GraphDir, wanted: float, budget: int | None) -> float:
    """:func:`budget_static_fraction` of the store of ``graph`` (its in-degrees
    and feature rows), known before the store is written."""
    features = graph.features()
    row_bytes = 0 if features is None else int(features.shape[1]) * features.dtype.itemsize
    in_degree = np.diff(np.asarray(graph.indptr, dtype=np.int64))
    return budget_static_fraction(wanted, in_degree, row_bytes, budget)


#: The static cache's files (:class:`~gnncore.outofcore.megabatch.StaticCache`).
STATIC_FILES = ("static_nodes", "static_features", "static_indptr", "static_indices")


def static_cache_bytes(store: PartitionedStore) -> int:
    """Bytes of ``store``'s static cache in memory (its files' payloads)."""
    return sum(payload_bytes(store, name) for name in STATIC_FILES)


def static_internal_edges(store: PartitionedStore, chunk: int = 1 << 22) -> int:
    """Entries of the static set's in-lists whose source is static too: the
    edges among static nodes a mega-batch can hold beside its partitions
    (read ``chunk`` entries at a time)."""
    if store.num_static == 0 or not store.has("static_indices"):
        return 0
    nodes = np.asarray(store.array("static_nodes"), dtype=np.int64)
    indices = store.array("static_indices")
    count = 0
    for lo in range(0, len(indices), chunk):
        part = np.asarray(indices[lo : lo + chunk], dtype=np.int64)
        at = np.minimum(np.searchsorted(nodes, part), len(nodes) - 1)
        count += int(np.count_nonzero(nodes[at] == part))
    return count


def mega_batch_payload(store: PartitionedStore, n_d: int, internal_edges: int) -> int:
    """The mega-batches' bound with ``n_d`` partitions each: the static cache
    (:func:`static_cache_bytes`, held once) and, over :data:`LOAD_SHARE`, two
    mega-batches (the one in use and the one loading) of ``n_d / N_p`` of the
    data, the in-edges from their partitions into the static neighbours (the
    static set's share of the edges, taken of their out-edges), the static
    neighbours' feature rows and the ``internal_edges`` among static nodes
    (:func:`static_internal_edges`)."""
    data, edge_bytes = data_bytes(store), payload_bytes(store, "edges")
    static_entries = payload_bytes(store, "static_indices") // 8
    edges = max(edge_bytes // 16, 1)
    r_d = n_d / max(store.parts, 1)
    mega = r_d * (data + edge_bytes * min(1.0, static_entries / edges))
    mega += payload_bytes(store, "static_features") + 16 * internal_edges
    return static_cache_bytes(store) + int(2 * mega / LOAD_SHARE)


def _sampler_factory(
    config: NodeTrainConfig, fanouts: tuple[int, ...], seed_offset: int
) -> Callable[[tuple[np.ndarray, np.ndarray], int], Any]:
    # The MLP reads no edges: sample the seeds only.
    hops = (0,) * config.num_layers if config.model == "none" else fanouts

    def make(graph: tuple[np.ndarray, np.ndarray], seed: int) -> Any:
        return build_sampler(config.sampler, graph, hops, seed=(seed + seed_offset) % 2**62)

    return make


def direct_reads(store: PartitionedStore, budget_bytes: int | None) -> bool:
    """Whether training reads ``store`` past the page cache (``O_DIRECT``): when a
    memory budget is set (the cache would take memory the budget does not
    allow, and under a limit that counts it the kernel would reclaim while
    training runs), or when the store's data exceeds half the memory available
    (the cache could not keep it from one epoch to the next anyway). A store
    that fits stays cached, and later epochs read it from memory."""
    if budget_bytes:
        return True
    available = memory_available()
    return available is None or data_bytes(store) > available // 2


def reach(store: PartitionedStore, n_d: int) -> float:
    """The share of a node's in-edges whose source a mega-batch of ``n_d``
    partitions holds: the edges inside a partition (the diagonal buckets), and
    of the others the share ``(n_d - 1) / (N_p - 1)`` a random group brings
    in, plus the static set's share of the nodes (at most 1)."""
    sizes = np.diff(np.asarray(store.array("bucket_offsets"), dtype=np.int64))
    total = int(sizes.sum())
    if total == 0 or store.parts <= 1:
        return 1.0
    inside = int(np.trace(sizes.reshape(store.parts, store.parts))) / total
    others = (1 - inside) * (n_d - 1) / (store.parts - 1)
    return min(1.0, inside + others + store.num_static / max(store.num_nodes, 1))


def working_bytes(
    store: PartitionedStore,
    config: NodeTrainConfig,
    n_d: int,
    neighbour_degree: float | None = None,
) -> int:
    """Training's working set beside the mega-batches with ``n_d`` partitions
    per mega-batch: the model, the batches in flight and, with
    ``eval_fanouts``, the evaluation's (sampled inside the mega-batches,
    prepared one ahead at most), the sampled neighbourhoods kept to the
    sources the mega-batch holds (:func:`reach`) and at most its nodes (static
    set included); ``neighbour_degree``: the graph's ``sum(d^2) / sum(d)``
    (:func:`~gnncore.train.core.workingset.neighbour_degree`), which sizes
    every-neighbour hops past the first. Every run adds the per-node arrays it
    holds (:data:`RESIDENT_NODE_BYTES`), exact evaluation its row lists
    (:func:`exact_rows_bytes`); exact evaluation itself runs when no
    mega-batch is in memory (:func:`apart_bytes`)."""
    info = store.info
    held = store.num_static + n_d * store.num_nodes // max(store.parts, 1)
    num_edges = int(info.get("num_edges", 0))
    edges = num_edges * held // max(store.num_nodes, 1)
    width, classes = int(info.get("num_features", 0)), int(info.get("num_classes", 1))
    work = node_working_set(
        min(held, store.num_nodes),
        edges,
        width,
        classes,
        config,
        reach(store, n_d),
        neighbour_degree,
        eval_in_flight=1 + (1 if config.prefetch_workers > 0 else 0),
    )
    resident = RESIDENT_NODE_BYTES * store.num_nodes
    if config.eval_fanouts is None:  # layer-wise, between epochs: apart_bytes
        work = dataclasses.replace(work, evaluation=0)
        rows = exact_rows_bytes(store.num_nodes, config.num_layers)
        return work.total(False) + rows + resident
    return work.total(False) + resident


def apart_bytes(store: PartitionedStore, config: NodeTrainConfig) -> int:
    """What training holds while no mega-batch is in memory: its setup
    (:func:`setup_bytes`) and, with exact evaluation, the layer-wise pass over
    the whole graph between epochs (its layers on disk) beside the static
    cache, the per-node arrays, the model and the joint pass's rows. The
    training iterator frees its last mega-batch before validation runs."""
    setup = setup_bytes(store, config)
    if config.eval_fanouts is not None:
        return setup
    info = store.info
    whole = node_working_set(
        store.num_nodes,
        int(info.get("num_edges", 0)),
        int(info.get("num_features", 0)),
        int(info.get("num_classes", 1)),
        config,
    )
    rows = exact_rows_bytes(store.num_nodes, config.num_layers)
    return max(setup, _held_every_run(store) + rows + whole.model + whole.evaluation)


#: Bytes per node training holds for the whole run whatever the mega-batch:
#: the labels (int64, the source's), the splits in the store's ids (the
#: source's) and in the graph's (the task's), int64 each. 204 MB on the
#: showcase's 8.5M nodes.
RESIDENT_NODE_BYTES = 24


#: Copies of every layer's row list exact evaluation holds at its setup, as
#: int64 ids: validation's and test's (up to ``N`` a layer each) and their
#: union for the joint pass. The setup runs before the first mega-batch loads
#: (the task is built before the epochs), and only the union stays.
EXACT_ROW_COPIES = 3


def exact_rows_bytes(num_nodes: int, num_layers: int, copies: int = 1) -> int:
    """Bytes of ``copies`` of the row lists exact (layer-wise) evaluation keeps,
    one int64 id per node and layer each: the joint pass's union (one copy)
    beside the mega-batches, :data:`EXACT_ROW_COPIES` while it is built. On the
    showcase's 8.5M nodes the setup took 0.45 GB (sampled anonymous memory
    of the step: 1.27 -> 1.72 GB while joining, 1.47 GB after)."""
    return int(copies) * 8 * int(num_nodes) * max(int(num_layers), 1)


def setup_bytes(store: PartitionedStore, config: NodeTrainConfig) -> int:
    """What training holds while it is set up, before any mega-batch: the
    static cache, the per-node arrays and, with exact evaluation, the
    :data:`EXACT_ROW_COPIES` row lists its joint pass is built from."""
    held = _held_every_run(store)
    if config.eval_fanouts is None:
        held += exact_rows_bytes(store.num_nodes, config.num_layers, EXACT_ROW_COPIES)
    return held


def _held_every_run(store: PartitionedStore) -> int:
    """The static cache and the per-node arrays: held from the setup to the end."""
    return static_cache_bytes(store) + RESIDENT_NODE_BYTES * store.num_nodes


def sized_parts(
    store: PartitionedStore, config: NodeTrainConfig, neighbour_degree: float | None = None
) -> int:
    """``N_d``, the partitions per mega-batch (:func:`sized_mega_batches`)."""
    return sized_mega_batches(store, config, neighbour_degree)[0]


def sized_mega_batches(
    store: PartitionedStore, config: NodeTrainConfig, neighbour_degree: float | None = None
) -> tuple[int, int]:
    """``(N_d, depth)``: the partitions per mega-batch and the mini-batches
    prepared ahead. ``N_d`` is ``config.mega_batch_parts`` when set; without
    ``config.memory_budget`` an eighth of the partitions
    (:func:`~gnncore.outofcore.megabatch.mega_batch_parts`); else the most whose
    two mega-batches (their payload bound over :data:`LOAD_SHARE`) and the
    working set (:func:`working_bytes`) fit the budget less what this process
    holds now and the margin. ``depth`` is ``config.prefetch_depth``, or less
    where the batches prepared ahead leave no room for one partition: the
    deepest that does (the same batches, fewer of them waiting; logged).

    Raises:
        MemoryBudgetError: The budget leaves no room for one partition even
            with one batch prepared ahead; the message names the budget, the
            overhead, the working set and the minimum the whole process needs.
    """
    total = config.memory_budget_bytes
    depth = int(config.prefetch_depth)
    if config.mega_batch_parts > 0 or total is None:
        return mega_batch_parts(store, None, config.mega_batch_parts), depth
    stage = StageBudget.start(total)
    room = stage.data_bytes or 0
    internal = static_internal_edges(store)

    def need(n_d: int, ahead: int) -> tuple[int, int]:
        payload = mega_batch_payload(store, n_d, internal)
        sized = dataclasses.replace(config, prefetch_depth=ahead)
        return payload, working_bytes(store, sized, n_d, neighbour_degree)

    apart = apart_bytes(store, config)
    for ahead in range(depth, 0, -1):
        for n_d in range(store.parts, 0, -1):
            payload, work = need(n_d, ahead)
            if max(payload + work, apart) > room:
                continue
            if ahead < depth:
                _log.info(
                    "hierbatching: %d mini-batches prepared ahead instead of %d: %d would "
                    "leave no room for one partition under a memory budget of %s",
                    ahead, depth, depth, _mib(total),
                )  # fmt: skip
            _log.info(
                "hierbatching: %d of %d partitions per mega-batch from a memory budget of %s: "
                "%s held, %s margin, %s working set, %s for two mega-batches while loading",
                n_d, store.parts, _mib(total), _mib(stage.overhead), _mib(stage.margin),
                _mib(work), _mib(payload),
            )  # fmt: skip
            return n_d, ahead
    payload, work = need(1, 1)
    minimum = stage.overhead + stage.margin + max(payload + work, apart)
    raise MemoryBudgetError(
        f"memory budget of {_mib(total)} is below the {_mib(minimum)} hierbatching needs "
        f"for {store.path}: {_mib(stage.overhead)} this process holds already, "
        f"{_mib(stage.margin)} of margin, and the larger of {_mib(work)} of working set "
        f"(model, batches in flight, per-node arrays, evaluation's row lists) with "
        f"{_mib(payload)} for the static cache and one of {store.parts} partitions twice "
        f"while loading, and {_mib(apart)} between mega-batches (setup, exact evaluation "
        f"beside the static cache); raise the "
        f"budget to at least {format_size(minimum)} ({minimum} bytes), or write the store "
        "with more partitions or a smaller static fraction, or train with a smaller batch_size"
    )


def _mib(size: int) -> str:
    """``size`` in MiB with one decimal (budgets a few MiB apart stay apart)."""
    return f"{size / (1 << 20):,.1f} MiB"


def hierbatching_batches(
    store: PartitionedStore,
    config: NodeTrainConfig,
    log: Callable[[str], None] | None = None,
    neighbour_degree: float | None = None,
    eval_batches: bool = True,
) -> tuple[HierBatchSource, tuple[EvalBatches, EvalBatches] | None]:
    """The out-of-core source of ``config`` over ``store`` (mega-batch groups for
    ``mode="hierbatching"``, a swapping buffer for ``"partition_buffer"``; ``N_d`` and
    the prefetch depth from ``config.mega_batch_parts`` or ``config.memory_budget``:
    :func:`sized_mega_batches`) and its validation and test batches
    (``config.eval_fanouts``, all neighbours when unset); ``None``
    for those with ``eval_batches=False`` (a run that evaluates otherwise, e.g.
    layer-wise over the whole graph)."""
    n_d, depth = sized_mega_batches(store, config, neighbour_degree)
    store = dataclasses.replace(store, direct_reads=direct_reads(store, config.memory_budget_bytes))
    source = HierBatchSource(
        store,
        n_d,
        config.mega_batch_passes,
        config.batch_size,
        _sampler_factory(config, config.fanouts, 0),
        torch.Generator().manual_seed(config.seed),
        prefetch=True,
        log=log,
        schedule="buffer" if config.mode == "partition_buffer" else "groups",
        batch_workers=config.prefetch_workers,
        batch_depth=depth,
        device=resolve_device(config.device),
    )
    if not eval_batches:
        return source, None
    eval_fanouts = config.eval_fanouts or (-1,) * config.num_layers
    make_eval = _sampler_factory(config, eval_fanouts, config.seed + 1)
    evals = (
        source.eval_batches("val", config.eval_batch_size, make_eval),
        source.eval_batches("test", config.eval_batch_size, make_eval),
    )
    return source, evals
