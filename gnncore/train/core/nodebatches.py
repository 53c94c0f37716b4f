"""Node batches of layer-wise inference: contiguous ranges of targets bounded in
nodes and in-edges (:func:`node_batches`), none straddling a part's bounds
(:func:`part_batches`, a partitioned store's order), over every node or some
(:func:`subset_indptr`); the rows a layer reads (:func:`layer_inputs`); and
the row batches of models without message passing (:func:`rowwise_inference`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from gnncore.train.core.partrows import RowSource, in_edge_entries
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


def subset_indptr(indptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The CSR offsets of the in-edges of ``nodes`` alone (``len(nodes) + 1``,
    from 0): what :func:`node_batches` cuts when a layer computes some nodes."""
    indptr = np.asarray(indptr, dtype=np.int64)
    return np.concatenate([[0], np.cumsum(indptr[nodes + 1] - indptr[nodes])])


#: In-edges whose sources are marked at a time (:func:`layer_inputs`).
MARK_EDGES = 1 << 22


def layer_inputs(indptr: np.ndarray, indices: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The rows a layer reads to compute ``targets`` (ascending, unique; the graph
    has ``len(indptr) - 1`` nodes): the targets and their in-neighbours,
    ascending and unique (marked at most :data:`MARK_EDGES` in-edges at a time)."""
    n = len(indptr) - 1
    if len(targets) == n:
        return np.arange(n)
    indptr = np.asarray(indptr, dtype=np.int64)
    mask = np.zeros(n, dtype=bool)
    mask[targets] = True
    for i, j in node_batches(subset_indptr(indptr, targets), len(targets), MARK_EDGES):
        entries, _ = in_edge_entries(indptr, targets[i:j])
        mask[np.asarray(indices[entries])] = True
    return np.flatnonzero(mask)


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
