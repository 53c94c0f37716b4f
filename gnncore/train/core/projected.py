r"""Layers that narrow, computed from one sequential pass over their input:
project before aggregating.

Layer-wise evaluation in a partitioned store's order
(:func:`~gnncore.train.core.layerwise.layerwise_inference` with ``rows``)
reads, for each part, the sources of its needed rows' cut edges from
anywhere in the layer's input file: one page per row, at random. SAGE's mean
and GCN's normalised sum are linear in the source rows, so
``mean_j W x_j = W mean_j x_j``: a layer can multiply every row it reads by
``W`` first (DGL's ``SAGEConv`` does so whenever its input is wider than its
output) and aggregate the narrow products afterwards. Here the products of
every row a layer reads (the rows it computes and their in-neighbours) come
from one pass over its input in node order, in spans of consecutive rows
(the features, or the layer before's file), ``hidden`` wide instead of
``features`` wide. When they fit the memory given they stay there and the
aggregation reads nothing from storage; otherwise they go to a file and the
targets are aggregated in groups whose sums and edges fit, each group's
edges sorted by source so that it reads the products file once, in order
(a few sequential passes instead of a random page per cut edge).

The arithmetic is the layer's (:func:`~gnncore.train.core.layerwise.apply_layer`)
in another order of float additions (the products before the mean, and on
disk the edges by source), so the rows agree within float tolerance. On the
CPU, for ``SAGEConv`` (mean aggregation, no ``project``) and default
``GCNConv`` whose output is narrower than their input
(:func:`projects`); other layers are left to the caller (``None``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.sizes import format_size
from gnncore.train.core.layerstore import (
    SYNC_BYTES,
    DiskLayer,
    LayerOutput,
    MemoryLayer,
)
from gnncore.train.core.layerwise import (
    Adjacency,
    LayerHook,
    finish_layer,
    gcn_dinv,
)
from gnncore.train.core.nodebatches import layer_inputs, node_batches, subset_indptr
from gnncore.train.core.partrows import RangeSource, in_edge_entries

LOG = logging.getLogger(__name__)

#: Bytes of feature rows one read of the projection pass spans, at most.
SPAN_BYTES = 64 << 20
#: The most passes over spilled products worth it where a caller can compute the
#: layer part by part instead (a partitioned store's order): ``max_passes``. On
#: the showcase's 8.5M nodes under 2 GiB the first layer's 2.2 GB of products took
#: about 280 groups, each reading the file nearly whole (cut edges' sources lie
#: everywhere).
MAX_SPILLED_PASSES = 8
#: Bytes an edge of a group takes while it is aggregated from products on disk
#: (its CSR entry, source, product row, target, sort order and weight).
EDGE_BYTES = 48


def projects(model: BasicGNN, layer: int, device: torch.device) -> bool:
    """Whether :func:`projected_layer` computes layer ``layer`` of ``model``: on
    the CPU, a ``SAGEConv`` with mean aggregation and no ``project``, or a
    ``GCNConv`` with its defaults, whose output is narrower than its input."""
    if device.type != "cpu" or model.jk_mode is not None:
        return False
    conv = model.convs[layer]
    if isinstance(conv, SAGEConv):
        usable = conv.aggr == "mean" and not conv.project
    elif isinstance(conv, GCNConv):
        usable = not conv.improved and conv.add_self_loops and conv.normalize
    else:
        return False
    return usable and int(conv.out_channels) < int(conv.in_channels)


def _weights(conv: SAGEConv | GCNConv) -> tuple[torch.Tensor, torch.nn.Module | None]:
    """The weight applied to every row a layer reads (SAGE's neighbour weight,
    GCN's weight; no bias) and SAGE's root layer (``None`` without one)."""
    if isinstance(conv, SAGEConv):
        return conv.lin_l.weight, conv.lin_r if conv.root_weight else None
    return conv.lin.weight, None


def _spans(ids: np.ndarray, width: int) -> Iterator[tuple[int, int]]:
    """``(a, b)``: runs of ``ids`` (ascending) whose rows ``ids[a] .. ids[b - 1]``
    span at most :data:`SPAN_BYTES` of ``width``-wide float32 rows."""
    span = max(SPAN_BYTES // max(width * 4, 1), 1)
    a = 0
    while a < len(ids):
        b = int(np.searchsorted(ids, int(ids[a]) + span))
        yield a, b
        a = b


def _project(
    conv: SAGEConv | GCNConv,
    read_range: RangeSource,
    sources: np.ndarray,
    targets: np.ndarray,
    width: int,
    products: LayerOutput,
    roots: LayerOutput | None,
) -> None:
    """Write ``W x`` of every row in ``sources`` (in their order: row ``k`` is
    ``sources[k]``'s) into ``products`` and, with a root layer, its rows of
    ``targets`` (a subset of ``sources``) into ``roots``, from spans of
    consecutive rows read in node order."""
    weight, root = _weights(conv)
    t0 = 0
    for a, b in _spans(sources, width):
        first, last = int(sources[a]), int(sources[b - 1])
        rows = read_range(first, last + 1)
        picked = rows[torch.from_numpy(sources[a:b] - first)].float()
        products.write(a, F.linear(picked, weight))
        if root is not None and roots is not None:
            t1 = int(np.searchsorted(targets, last + 1))
            if t1 > t0:
                roots.write(t0, root(rows[torch.from_numpy(targets[t0:t1] - first)].float()))
            t0 = t1


def _finish(
    conv: SAGEConv | GCNConv, out: torch.Tensor, degree: np.ndarray, roots: torch.Tensor | None
) -> torch.Tensor:
    """The layer's rows from the sums of their (weighted) products: SAGE's mean,
    bias, root term and normalisation; GCN's bias."""
    if isinstance(conv, SAGEConv):
        out /= torch.from_numpy(np.maximum(degree, 1)).to(out.dtype).unsqueeze(1)
        if conv.lin_l.bias is not None:
            out += conv.lin_l.bias
        if roots is not None:
            out += roots
        return F.normalize(out, p=2.0, dim=-1) if conv.normalize else out
    return out + conv.bias if conv.bias is not None else out


def _group_edges(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    slot: np.ndarray,
    targets: np.ndarray,
    dinv: torch.Tensor | None,
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None, np.ndarray]:
    """``(rows, dst, weight, degree)`` of the edges into ``targets``: each edge's
    product row (``slot`` of its source), its target's position, GCN's weight
    (with a self-loop per target; ``None`` for SAGE) and each target's
    in-degree; edges by target, each target's in the graph's order."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    entries, degree = in_edge_entries(indptr, targets)
    src = np.asarray(adjacency.indices[entries], dtype=np.int64)
    dst = np.repeat(np.arange(len(targets)), degree)
    if not isinstance(conv, GCNConv):
        return slot[src], torch.from_numpy(dst), None, degree
    assert dinv is not None
    src = np.concatenate([src, targets])  # the self-loops, last
    dst = np.concatenate([dst, np.arange(len(targets))])
    weight = dinv[torch.from_numpy(src)] * dinv[torch.from_numpy(targets[dst])]
    return slot[src], torch.from_numpy(dst), weight, degree


def _aggregate_in_memory(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    products: torch.Tensor,
    roots: torch.Tensor | None,
    slot: np.ndarray,
    targets: np.ndarray,
    dinv: torch.Tensor | None,
) -> torch.Tensor:
    """The layer's rows of ``targets`` (before activation) from ``products`` in memory."""
    rows, dst, weight, degree = _group_edges(conv, adjacency, slot, targets, dinv)
    messages = products[torch.from_numpy(rows)]
    if weight is not None:
        messages *= weight.unsqueeze(1)
    out = torch.zeros(len(targets), products.size(1), dtype=products.dtype)
    out.index_add_(0, dst, messages)
    return _finish(conv, out, degree, roots)


def _aggregate_streamed(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    products: DiskLayer,
    roots: torch.Tensor | None,
    slot: np.ndarray,
    targets: np.ndarray,
    dinv: torch.Tensor | None,
    message_rows: int,
) -> torch.Tensor:
    """:func:`_aggregate_in_memory` with the products on disk: the group's edges
    sorted by product row, the products read once in spans, in order, the
    messages gathered ``message_rows`` at a time."""
    rows, dst, weight, degree = _group_edges(conv, adjacency, slot, targets, dinv)
    order = np.argsort(rows, kind="stable")
    rows, dst = rows[order], dst[torch.from_numpy(order)]
    if weight is not None:
        weight = weight[torch.from_numpy(order)]
    out = torch.zeros(len(targets), products.width, dtype=torch.float32)
    for a, b in _spans(rows, products.width):
        first = int(rows[a])
        block = products.read_range(first, int(rows[b - 1]) + 1)
        for c in range(a, b, message_rows):  # a span's edges, message_rows at a time
            d = min(c + message_rows, b)
            messages = block[torch.from_numpy(rows[c:d] - first)]
            if weight is not None:
                messages *= weight[c:d].unsqueeze(1)
            out.index_add_(0, dst[c:d], messages)
    return _finish(conv, out, degree, roots)


def _target_groups(
    adjacency: Adjacency,
    ids: np.ndarray,
    hidden: int,
    max_bytes: int,
    batch_size: int,
    in_memory: bool,
) -> list[tuple[int, int]]:
    """The groups ``[i, j)`` of ``ids`` a projected layer aggregates at a time:
    ``batch_size`` targets with the products in memory; with them on disk,
    as many as a quarter of ``max_bytes`` holds of their sums and roots and a
    quarter of their edges' rows, targets, order and weights."""
    group, edges = batch_size, 64 * batch_size
    if not in_memory:
        group = max(max_bytes // 4 // (hidden * 4 * 2), 1)
        edges = max(max_bytes // 4 // EDGE_BYTES, 1)
    cumulative = subset_indptr(np.asarray(adjacency.indptr, dtype=np.int64), ids)
    return list(node_batches(cumulative, group, edges))


@torch.no_grad()
def projected_layer(
    model: BasicGNN,
    layer: int,
    adjacency: Adjacency,
    targets: torch.Tensor | None,
    read_range: RangeSource,
    *,
    max_bytes: int,
    dinv: torch.Tensor | None = None,
    batch_size: int = 4096,
    layer_dir: str | os.PathLike[str] | None = None,
    sync_bytes: int = SYNC_BYTES,
    spill_dir: str | os.PathLike[str] | None = None,
    max_passes: int | None = None,
) -> LayerOutput | None:
    """Layer ``layer``'s output rows of ``targets`` (ascending node ids, every node
    when ``None``; the other rows zeros on disk, unset in memory), computed by
    projecting first (module docstring), or ``None`` where that does not apply
    (:func:`projects`: the caller computes the layer as before).

    The products of the rows the layer reads stay in memory when they fit
    ``max_bytes``; otherwise, with ``spill_dir``, they go to a file there and
    the targets are aggregated in groups whose sums and edges fit
    ``max_bytes``, each group reading the products once, in order (the file
    read once per group); without ``spill_dir``, ``None``.

    Args:
        model (BasicGNN): In eval mode, on the CPU.
        layer (int): The layer to compute.
        adjacency (Adjacency): The graph, in the numbering of ``read_range``.
        targets (Tensor, optional): The rows to compute (``rows[layer]``).
        read_range (callable): The layer's input rows ``lo .. hi - 1`` in one read.
        max_bytes (int): The most the products (or a group's sums and edges)
            may take in memory.
        dinv (Tensor, optional): ``deg^-1/2`` of every node, for GCN
            (:func:`~gnncore.train.core.layerwise.gcn_dinv`).
        batch_size (int): Targets finished and written at a time (in memory).
        layer_dir (path, optional): Where the output goes as a ``.npy`` file
            (else it stays in memory).
        sync_bytes (int): With ``layer_dir``, bytes written between flushes.
        spill_dir (path, optional): Where the products go when they do not
            fit ``max_bytes`` (removed before this returns).
        max_passes (int, optional): With the products on disk, the most groups
            (passes over their file) worth it; more: ``None``, for a caller
            that computes the layer part by part (:data:`MAX_SPILLED_PASSES`).
    """
    if not projects(model, layer, torch.device("cpu")):
        return None
    conv = model.convs[layer]
    assert isinstance(conv, (SAGEConv, GCNConv))
    if isinstance(conv, GCNConv) and dinv is None:
        raise ValueError("GCN needs every node's deg^-1/2 (dinv)")
    n = adjacency.num_nodes
    ids = targets.numpy() if targets is not None else np.arange(n)
    hidden = int(conv.out_channels)
    has_roots = _weights(conv)[1] is not None
    sources = layer_inputs(adjacency.indptr, adjacency.indices, ids)
    held = (len(sources) + (len(ids) if has_roots else 0)) * hidden * 4
    if held > max_bytes and spill_dir is None:
        return None
    in_memory = held <= max_bytes
    batches = _target_groups(adjacency, ids, hidden, max_bytes, batch_size, in_memory)
    if not in_memory and max_passes is not None and len(batches) > max_passes:
        LOG.info("layer %d not projected: %s of products read %d times", layer,
                 format_size(held), len(batches))  # fmt: skip
        return None
    started = time.perf_counter()
    slot = np.full(n, -1, dtype=np.int64)
    slot[sources] = np.arange(len(sources))
    scratch = Path(spill_dir) if spill_dir is not None else None
    made: list[LayerOutput] = []

    def new(name: str, count: int) -> LayerOutput:
        made.append(
            MemoryLayer(count, hidden)
            if in_memory or scratch is None
            else DiskLayer(scratch / f"{name}.npy", count, hidden, sync_bytes)
        )
        return made[-1]

    output: LayerOutput = MemoryLayer(n, hidden)
    if layer_dir is not None:  # named apart from the layer files of layerwise_inference's callers
        output = DiskLayer(Path(layer_dir) / f"projected-{layer}.npy", n, hidden, sync_bytes)
    try:
        products, roots = new("products", len(sources)), None
        if has_roots:
            roots = new("roots", len(ids))
        _project(conv, read_range, sources, ids, int(conv.in_channels), products, roots)
        products, roots = products.finish(), roots.finish() if roots is not None else None
        message_rows = max(max_bytes // 8 // (hidden * 4), 1)
        for i, j in batches:
            root = None
            if roots is not None:
                root = roots.read_range(i, j)
            if isinstance(products, MemoryLayer):
                x = _aggregate_in_memory(conv, adjacency, products.rows, root, slot, ids[i:j], dinv)
            else:
                x = _aggregate_streamed(
                    conv, adjacency, products, root, slot, ids[i:j], dinv, message_rows
                )
            output.write_at(torch.from_numpy(ids[i:j]), finish_layer(model, layer, x))
        output = output.fill()
    except BaseException:
        output.release()
        raise
    finally:
        for held_output in made:
            held_output.release()
    LOG.info(
        "layer %d projected before aggregating: %d rows of %d read in node order, "
        "%d computed, products %s, %.1f s",
        layer,
        len(sources),
        n,
        len(ids),
        "in memory" if in_memory else f"on disk, {len(ids)} targets in {len(batches)} groups",
        time.perf_counter() - started,
    )
    return output


def projection_hook(
    model: BasicGNN,
    adjacency: Adjacency,
    read_range: RangeSource,
    *,
    max_bytes: int,
    batch_size: int = 4096,
    layer_dir: str | os.PathLike[str] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    max_passes: int | None = None,
) -> LayerHook:
    """A :data:`~gnncore.train.core.layerwise.LayerHook` for
    :func:`~gnncore.train.core.layerwise.layerwise_inference`: every layer
    :func:`projects` computes by :func:`projected_layer`, reading layer 0's
    rows through ``read_range`` and a later layer's from the layer before
    (its file, or its rows in memory)."""
    dinv = gcn_dinv(model, adjacency)

    def hook(
        layer: int, previous: LayerOutput | None, nodes: torch.Tensor | None
    ) -> LayerOutput | None:
        if not projects(model, layer, torch.device("cpu")):
            return None
        source = read_range if previous is None else previous.read_range
        return projected_layer(
            model, layer, adjacency, nodes, source, max_bytes=max_bytes, dinv=dinv,
            batch_size=batch_size, layer_dir=layer_dir, spill_dir=spill_dir,
            max_passes=max_passes,
        )  # fmt: skip

    return hook
