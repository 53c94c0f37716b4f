"""Where node-classification data comes from, by ``config.mode``.

* ``mmap``: the graph directory's arrays memory-mapped
  (:class:`~gnncore.store.GraphDirFeatureStore`,
  :class:`~gnncore.store.GraphDirGraphStore`); the page cache decides what
  stays in memory and a miss is a random read.
* ``in_memory``: the same arrays read into RAM first.
* ``hierbatching``: out of core, from a partitioned store
  (:mod:`gnncore.outofcore.hierbatching`): mega-batches read sequentially, the
  next while the current trains, training and evaluation batches sampled from
  each mega-batch's cached subgraph.
* ``partition_buffer``: out of core, the same store and loader walked as a
  buffer of ``c`` partitions that swaps one in at a time (MariusGNN's Alg. 7),
  each partition's training nodes trained when it comes in.

The loop (:func:`~gnncore.train.fitting.fit` of the node task) is the same in every
mode; only its stores, or its batch source, differ.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore, GraphStore

from gnncore.outofcore.megabatch import mega_batch_parts
from gnncore.outofcore.order import StoreOrder
from gnncore.outofcore.store import PartitionedStore
from gnncore.outofcore.training import hierbatching_batches
from gnncore.store import CSCGraphStore, GraphDir, GraphDirFeatureStore, GraphDirGraphStore
from gnncore.store.feature_store import TensorFeatureStore
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.train.core.evalorder import EvaluationOrder
from gnncore.train.core.workingset import neighbour_degree
from gnncore.train.node.config import OUT_OF_CORE_MODES, ConfigError, NodeTrainConfig


@dataclass
class NodeData:
    """The stores (or sources) a node-classification run reads, and the run
    parameters that record where they came from."""

    feature_store: FeatureStore
    graph_store: GraphStore | None
    train_batches: Any | None = None
    eval_batches: tuple[Any, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: The order exact layer-wise evaluation runs in (a partitioned store's), if any.
    eval_order: EvaluationOrder | None = None


def node_data(
    graph: GraphDir,
    config: NodeTrainConfig,
    store: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> NodeData:
    """The :class:`NodeData` of ``config.mode`` for ``graph`` (``store``: a
    partitioned store of it, needed by ``hierbatching``; ``log`` gets one line
    per mega-batch).

    Raises:
        ConfigError: ``hierbatching`` without a store, or a store of another graph.
    """
    if config.mode == "sancus":
        raise ConfigError(
            "mode 'sancus' trains across ranks: run it with --nproc N --partition DIR "
            "(gnncore.distributed.training.train_distributed)"
        )
    if config.mode in OUT_OF_CORE_MODES:
        return _out_of_core(graph, config, store, log)
    if store is not None:
        raise ConfigError(
            "a partitioned store is read by the modes "
            f"{' and '.join(map(repr, OUT_OF_CORE_MODES))}, not {config.mode!r}"
        )
    if config.mode == "in_memory":
        tensors = {"y": torch.from_numpy(np.array(graph.labels(), dtype=np.int64))}
        features = graph.features()
        if features is not None:
            tensors["x"] = torch.from_numpy(np.array(features))
        return NodeData(
            TensorFeatureStore(tensors),
            CSCGraphStore(np.array(graph.indptr), np.array(graph.indices)),
            params={"mode": "in_memory"},
        )
    return NodeData(GraphDirFeatureStore(graph), GraphDirGraphStore(graph), params={"mode": "mmap"})


def open_store(
    graph: GraphDir, config: NodeTrainConfig, store_path: str | os.PathLike[str] | None
) -> Any:
    """The partitioned store an out-of-core ``config`` reads, checked before any
    run starts: present, written from ``graph``, and with a memory budget that
    holds at least one partition.

    Raises:
        ConfigError: No store, or a store of another graph.
        InputError: A damaged store, or a budget below one partition (naming
            the minimum).
    """
    if store_path is None:
        raise ConfigError(
            f"mode {config.mode!r} reads a partitioned store: write one with "
            "`gnncore store GRAPH_DIR PARTITION_DIR OUT_DIR` and pass it (--store)"
        )
    store = PartitionedStore.open(store_path)
    if store.info["graph_manifest_sha256"] != sha256_of(graph.path / MANIFEST_FILE):
        raise ConfigError(f"partitioned store {store.path} was written from another graph")
    mega_batch_parts(store, config.memory_budget_bytes, config.mega_batch_parts)
    return store


def _out_of_core(
    graph: GraphDir,
    config: NodeTrainConfig,
    store_path: str | os.PathLike[str] | None,
    log: Callable[[str], None] | None,
) -> NodeData:
    store = open_store(graph, config, store_path)
    degree = neighbour_degree(graph.indptr) if config.memory_budget_bytes else None
    exact = config.eval_fanouts is None
    source, evals = hierbatching_batches(store, config, log, degree, eval_batches=not exact)
    order = None
    if exact:
        # Exact evaluation (every neighbour) of the whole graph, layer by layer
        # (gnncore.train.node.exact), as predictions compute it: a mega-batch
        # holds only its partitions' neighbours, and sampling every neighbour
        # inside it took 2.5 minutes a mega-batch on the 2M-node graph. It runs
        # in the store's order, as `gnncore predict --store` does: each part's
        # rows read once, sequentially (past the page cache when training
        # reads so: source.store's direct_reads), only cut-edge sources apart.
        stores: tuple[FeatureStore, GraphStore | None] = (
            GraphDirFeatureStore(graph),
            GraphDirGraphStore(graph),
        )
        order = StoreOrder.of_store(source.store, graph).evaluation_order(graph)
    else:
        stores = (source.feature_store, None)
    return NodeData(
        *stores,
        train_batches=source,
        eval_batches=evals,
        eval_order=order,
        params={
            "mode": config.mode,
            "store": str(store.path),
            "store_parts": store.parts,
            "static_fraction": store.info["static_fraction"],
            "mega_batch_parts_used": source.n_d,
            "memory_budget_bytes": config.memory_budget_bytes or 0,
        },
    )
