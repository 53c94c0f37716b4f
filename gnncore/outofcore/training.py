"""Training sources of the out-of-core modes, built from a training config.

:func:`hierbatching_batches` turns a :class:`~gnncore.train.NodeTrainConfig`
with ``mode="hierbatching"`` into the training source and the evaluation
batches a :class:`~gnncore.train.NodeTask` trains on
(:func:`~gnncore.train.fitting.fit`'s ``source``, the task's ``eval_batches``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gnncore.memory import memory_available
from gnncore.outofcore.hierbatching import EvalBatches, HierBatchSource
from gnncore.outofcore.megabatch import data_bytes, mega_batch_parts
from gnncore.outofcore.store import PartitionedStore
from gnncore.sampler import build_sampler
from gnncore.train.core.device import resolve_device
from gnncore.train.node.config import NodeTrainConfig


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


def hierbatching_batches(
    store: PartitionedStore,
    config: NodeTrainConfig,
    log: Callable[[str], None] | None = None,
) -> tuple[HierBatchSource, tuple[EvalBatches, EvalBatches]]:
    """The out-of-core source of ``config`` over ``store`` (mega-batch groups for
    ``mode="hierbatching"``, a swapping buffer for ``"partition_buffer"``; ``N_d`` from
    ``config.mega_batch_parts`` or ``config.memory_budget``) and its validation
    and test batches (``config.eval_fanouts``, all neighbours when unset)."""
    n_d = mega_batch_parts(store, config.memory_budget_bytes, config.mega_batch_parts)
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
        batch_depth=config.prefetch_depth,
        device=resolve_device(config.device),
    )
    eval_fanouts = config.eval_fanouts or (-1,) * config.num_layers
    make_eval = _sampler_factory(config, eval_fanouts, config.seed + 1)
    evals = (
        source.eval_batches("val", config.eval_batch_size, make_eval),
        source.eval_batches("test", config.eval_batch_size, make_eval),
    )
    return source, evals
