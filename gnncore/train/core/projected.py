r"""The first layer of an evaluation from one sequential pass over the features:
project before aggregating where the layer narrows.

Layer-wise evaluation in a partitioned store's order
(:func:`~gnncore.train.core.layerwise.layerwise_inference` with ``rows``)
reads, for each part, the sources of its needed rows' cut edges from
anywhere in the feature file: one page per row, at random. SAGE's mean and
GCN's normalised sum are linear in the source rows, so
``mean_j W x_j = W mean_j x_j``: the layer can multiply every needed row by
``W`` first (DGL's ``SAGEConv`` does so whenever its input is wider than its
output) and aggregate the narrow products afterwards. Here the products of
every row the first layer reads (the rows it computes and their
in-neighbours) come from one pass over the feature file in node order, in
spans of consecutive rows, and stay in memory, ``hidden`` wide instead of
``features`` wide; the aggregation then reads nothing from storage.

The arithmetic is the layer's (:func:`~gnncore.train.core.layerwise.apply_layer`)
in another order of float additions (the products before the mean), so the
rows agree within float tolerance. Only when the products fit the memory
given (else ``None``: the caller reads the rows as before), on the CPU, for
``SAGEConv`` (mean aggregation, no ``project``) and default ``GCNConv``
whose output is narrower than their input.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.train.core.layerstore import SYNC_BYTES, LayerOutput, new_layer_output
from gnncore.train.core.layerwise import Adjacency, finish_layer
from gnncore.train.core.nodebatches import node_batches
from gnncore.train.core.partrows import RangeSource, in_edge_entries

LOG = logging.getLogger(__name__)

#: Bytes of feature rows one read of the projection pass spans, at most.
SPAN_BYTES = 64 << 20
#: Targets whose in-neighbours are marked at a time (:func:`first_layer_inputs`).
MARK_TARGETS = 1 << 20


def projects_first(model: BasicGNN, device: torch.device) -> bool:
    """Whether :func:`projected_first_layer` computes ``model``'s first layer: on
    the CPU, a ``SAGEConv`` with mean aggregation and no ``project``, or a
    ``GCNConv`` with its defaults, whose output is narrower than its input,
    followed by another layer."""
    if device.type != "cpu" or model.num_layers < 2 or model.jk_mode is not None:
        return False
    conv = model.convs[0]
    if isinstance(conv, SAGEConv):
        usable = conv.aggr == "mean" and not conv.project
    elif isinstance(conv, GCNConv):
        usable = not conv.improved and conv.add_self_loops and conv.normalize
    else:
        return False
    return usable and int(conv.out_channels) < int(model.in_channels)


def first_layer_inputs(adjacency: Adjacency, targets: np.ndarray) -> np.ndarray:
    """The rows the first layer reads to compute ``targets`` (ascending): the
    targets and their in-neighbours, ascending and unique (marked
    :data:`MARK_TARGETS` targets at a time)."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    mask = np.zeros(adjacency.num_nodes, dtype=bool)
    mask[targets] = True
    for at in range(0, len(targets), MARK_TARGETS):
        entries, _ = in_edge_entries(indptr, targets[at : at + MARK_TARGETS])
        mask[np.asarray(adjacency.indices[entries])] = True
    return np.flatnonzero(mask)


def _project(
    conv: SAGEConv | GCNConv,
    read_range: RangeSource,
    sources: np.ndarray,
    targets: np.ndarray,
    width: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(products, roots)``: ``W x`` of every row in ``sources`` (SAGE's
    neighbour weight, GCN's weight; no bias) and, for SAGE with a root weight,
    ``lin_r(x)`` of ``targets`` (a subset of ``sources``), from spans of
    consecutive rows read in node order."""
    sage = isinstance(conv, SAGEConv)
    weight = conv.lin_l.weight if sage else conv.lin.weight
    hidden = int(weight.size(0))
    products = torch.empty(len(sources), hidden, dtype=torch.float32)
    roots = None
    if sage and conv.root_weight:
        roots = torch.empty(len(targets), hidden, dtype=torch.float32)
    span = max(SPAN_BYTES // max(width * 4, 1), 1)
    a = 0
    while a < len(sources):
        first = int(sources[a])
        b = int(np.searchsorted(sources, first + span))  # rows first .. first + span - 1
        last = int(sources[b - 1])
        rows = read_range(first, last + 1)
        products[a:b] = F.linear(rows[torch.from_numpy(sources[a:b] - first)].float(), weight)
        if roots is not None:
            t0, t1 = np.searchsorted(targets, [first, last + 1])
            picked = rows[torch.from_numpy(targets[t0:t1] - first)].float()
            roots[t0:t1] = conv.lin_r(picked)
        a = b
    return products, roots


def _aggregate(
    conv: SAGEConv | GCNConv,
    products: torch.Tensor,
    roots: torch.Tensor | None,
    slot: np.ndarray,
    src: np.ndarray,
    targets: np.ndarray,
    degree: np.ndarray,
    dinv: torch.Tensor | None,
) -> torch.Tensor:
    """The layer's rows of ``targets`` (before activation) from the products of
    their in-neighbours ``src`` (grouped by target, ``degree`` each)."""
    count = len(targets)
    dst = torch.from_numpy(np.repeat(np.arange(count), degree))
    messages = products[torch.from_numpy(slot[src])]
    out = torch.zeros(count, products.size(1), dtype=products.dtype)
    if isinstance(conv, SAGEConv):
        out.index_add_(0, dst, messages)
        out /= torch.from_numpy(np.maximum(degree, 1)).to(out.dtype).unsqueeze(1)
        if conv.lin_l.bias is not None:
            out += conv.lin_l.bias
        if roots is not None:
            out += roots
        return F.normalize(out, p=2.0, dim=-1) if conv.normalize else out
    assert dinv is not None
    target_dinv = dinv[torch.from_numpy(targets)]
    weight = dinv[torch.from_numpy(src)] * target_dinv[dst]
    out.index_add_(0, dst, messages * weight.unsqueeze(1))
    out += products[torch.from_numpy(slot[targets])] * (target_dinv**2).unsqueeze(1)
    return out + conv.bias if conv.bias is not None else out


@torch.no_grad()
def projected_first_layer(
    model: BasicGNN,
    adjacency: Adjacency,
    targets: torch.Tensor,
    read_range: RangeSource,
    *,
    max_bytes: int,
    dinv: torch.Tensor | None = None,
    batch_size: int = 4096,
    max_edges: int | None = None,
    layer_dir: str | os.PathLike[str] | None = None,
    sync_bytes: int = SYNC_BYTES,
) -> LayerOutput | None:
    """The first layer's output rows of ``targets`` (ascending node ids; the
    other rows zeros on disk, unset in memory), computed by projecting first
    (module docstring), or ``None`` where that does not apply
    (:func:`projects_first`: the caller computes the layer as before) or the
    products would take more than ``max_bytes``.

    Args:
        model (BasicGNN): In eval mode, on the CPU.
        adjacency (Adjacency): The graph, in the numbering of ``read_range``.
        targets (Tensor): The rows to compute (the evaluation's ``rows[0]``).
        read_range (callable): Layer-0 input rows ``lo .. hi - 1`` in one read.
        max_bytes (int): The most the products may take in memory.
        dinv (Tensor, optional): ``deg^-1/2`` of every node, for GCN
            (:func:`~gnncore.train.core.layerwise.gcn_dinv`).
        batch_size (int): Targets aggregated at a time.
        max_edges (int, optional): In-edges aggregated at a time (default
            ``64 * batch_size``).
        layer_dir (path, optional): Where the output goes as a ``.npy`` file
            (:func:`~gnncore.train.core.layerstore.new_layer_output`).
        sync_bytes (int): With ``layer_dir``, bytes written between flushes.
    """
    if not projects_first(model, torch.device("cpu")):
        return None
    conv = model.convs[0]
    assert isinstance(conv, (SAGEConv, GCNConv))
    hidden = int(conv.out_channels)
    has_roots = isinstance(conv, SAGEConv) and conv.root_weight
    ids = targets.numpy()
    row_bytes = hidden * 4
    if len(ids) * row_bytes * (2 if has_roots else 1) > max_bytes:  # before marking
        return None
    sources = first_layer_inputs(adjacency, ids)
    if (len(sources) + (len(ids) if has_roots else 0)) * row_bytes > max_bytes:
        return None
    if isinstance(conv, GCNConv) and dinv is None:
        raise ValueError("GCN needs every node's deg^-1/2 (dinv)")
    started = time.perf_counter()
    products, roots = _project(conv, read_range, sources, ids, int(model.in_channels))
    slot = np.full(adjacency.num_nodes, -1, dtype=np.int64)
    slot[sources] = np.arange(len(sources))
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    degrees = indptr[ids + 1] - indptr[ids]
    cumulative = np.concatenate([[0], np.cumsum(degrees)])
    edges = max_edges if max_edges is not None else 64 * batch_size
    output = new_layer_output(layer_dir, adjacency.num_nodes, 0, hidden, sync_bytes)
    try:
        for i, j in node_batches(cumulative, batch_size, edges):
            entries, degree = in_edge_entries(indptr, ids[i:j])
            src = np.asarray(adjacency.indices[entries], dtype=np.int64)
            part = roots[i:j] if roots is not None else None
            rows = _aggregate(conv, products, part, slot, src, ids[i:j], degree, dinv)
            output.write_at(targets[i:j], finish_layer(model, 0, rows))
        output = output.fill()
    except BaseException:
        output.release()
        raise
    LOG.info(
        "first layer projected before aggregating: %d rows of %d read in node order, "
        "%d computed, %.1f s",
        len(sources),
        adjacency.num_nodes,
        len(ids),
        time.perf_counter() - started,
    )
    return output
