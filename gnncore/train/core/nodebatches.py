"""Node batches of layer-wise inference: contiguous ranges of targets bounded in
nodes and in-edges (:func:`node_batches`), none straddling a part's bounds
(:func:`part_batches`, a partitioned store's order); and the row batches of
models without message passing (:func:`rowwise_inference`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from gnncore.train.core.partrows import RowSource
from gnncore.train.core.steps import autocast


def node_batches(indptr: np.ndarray, batch_size: int, max_edges: int) -> Iterator[tuple[int, int]]:
    """Contiguous ``[a, b)`` covering every node: at most ``batch_size`` nodes and
    at most ``max_edges`` in-edges, except that a batch always holds one node."""
    if batch_size < 1 or max_edges < 1:
        raise ValueError(f"batch_size and max_edges must be >= 1, got {batch_size}, {max_edges}")
    indptr = np.asarray(indptr)
    n = len(indptr) - 1
    a = 0
    while a < n:
        by_nodes = min(a + batch_size, n)
        by_edges = int(np.searchsorted(indptr, indptr[a] + max_edges, side="right")) - 1
        b = max(a + 1, min(by_nodes, by_edges))
        yield a, b
        a = b


def count_batches(
    indptr: np.ndarray, batch_size: int, max_edges: int, bounds: np.ndarray | None = None
) -> int:
    """The number of batches :func:`part_batches` gives."""
    return sum(1 for _ in part_batches(indptr, bounds, batch_size, max_edges))


def part_batches(
    indptr: np.ndarray, bounds: np.ndarray | None, batch_size: int, max_edges: int
) -> Iterator[tuple[int, int]]:
    """:func:`node_batches`, none straddling a bound: with ``bounds`` (``p + 1``
    ascending node ids from 0 to ``N``, a partitioned store's partition offsets)
    each batch lies inside one part ``[bounds[k], bounds[k + 1])``."""
    if bounds is None:
        yield from node_batches(indptr, batch_size, max_edges)
        return
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        for a, b in node_batches(indptr[lo : hi + 1], batch_size, max_edges):
            yield lo + a, lo + b


@torch.no_grad()
def rowwise_inference(
    forward: Callable[[torch.Tensor], torch.Tensor],
    num_nodes: int,
    inputs: RowSource,
    *,
    batch_size: int = 4096,
    device: torch.device | str = "cpu",
    amp_dtype: torch.dtype | None = None,
    on_batch: Callable[[], None] | None = None,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """:func:`layerwise_inference` for models without message passing (an MLP on
    the features, a link model's embedding table): ``forward(rows)`` per batch."""
    device = torch.device(device)
    for a in range(0, num_nodes, batch_size):
        b = min(a + batch_size, num_nodes)
        rows = inputs(torch.arange(a, b)).to(device, non_blocking=True)
        with autocast(device, amp_dtype):
            out = forward(rows).float()
        if on_batch is not None:
            on_batch()
        yield a, b, out
