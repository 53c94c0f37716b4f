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
targets are aggregated in groups of consecutive ids, each with the products
of its own id range in memory and the rest of its in-edges summed in passes
over the file in source order (:mod:`gnncore.train.core.aggregate`): a few
sequential passes instead of a random page per cut edge.

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
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.sizes import format_size
from gnncore.train.core.aggregate import (
    SpilledPlan,
    aggregate_in_memory,
    aggregate_spilled,
    spans,
    spilled_plan,
)
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
from gnncore.train.core.nodebatches import layer_inputs
from gnncore.train.core.partrows import RangeSource

LOG = logging.getLogger(__name__)

#: Where a caller can compute the layer part by part instead (a partitioned
#: store's order: each part's rows in one read, each cut edge's source row read
#: apart), what reading one source row at random costs, in bytes read in order:
#: ``compare_rows``. On this 2-core VM 4 KiB direct reads of sorted rows ran at
#: 41,957 rows/s from 16 threads, sequential reads at 390-478 MB/s: 9-11 KiB.
ROW_READ_BYTES = 8 << 10


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
    for a, b in spans(sources, width):
        first, last = int(sources[a]), int(sources[b - 1])
        rows = read_range(first, last + 1)
        picked = rows[torch.from_numpy(sources[a:b] - first)].float()
        products.write(a, F.linear(picked, weight))
        if root is not None and roots is not None:
            t1 = int(np.searchsorted(targets, last + 1))
            if t1 > t0:
                roots.write(t0, root(rows[torch.from_numpy(targets[t0:t1] - first)].float()))
            t0 = t1


def _projected_conv(
    model: BasicGNN, layer: int, dinv: torch.Tensor | None
) -> SAGEConv | GCNConv | None:
    """Layer ``layer``'s convolution where it projects on the CPU, else ``None``."""
    if not projects(model, layer, torch.device("cpu")):
        return None
    conv = model.convs[layer]
    assert isinstance(conv, (SAGEConv, GCNConv))
    if isinstance(conv, GCNConv) and dinv is None:
        raise ValueError("GCN needs every node's deg^-1/2 (dinv)")
    return conv


def index_bytes(num_nodes: int, sources: np.ndarray, every_node: bool) -> int:
    """What :func:`projected_layer` holds beside the products, out of its
    ``max_bytes``: the rows it reads (``sources``), each node's slot among them
    (8 B a node) and, for every node, their ids (8 B a node more)."""
    return int(sources.nbytes) + num_nodes * 8 * (2 if every_node else 1)


def _spilled_plan_worth_it(
    adjacency: Adjacency,
    ids: np.ndarray,
    sources: np.ndarray,
    hidden: int,
    max_bytes: int,
    compare_rows: bool,
    layer: int,
) -> SpilledPlan | None:
    """The spilled aggregation's plan, or ``None`` with ``compare_rows`` when its
    passes over the products would read more than reading each cut edge's source
    row apart (:data:`ROW_READ_BYTES` a row), as part by part does."""
    plan = spilled_plan(adjacency, ids, sources, hidden, max_bytes)
    cut = int(plan.cut_edges.sum())
    products_bytes = len(sources) * hidden * 4
    # no cut edge: part by part reads each input row once and nothing else
    if compare_rows and plan.passes * products_bytes > cut * ROW_READ_BYTES:
        LOG.info("layer %d not projected: %s of products read %d times (%d cut edges)",
                 layer, format_size(products_bytes), plan.passes, cut)  # fmt: skip
        return None
    return plan


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
    compare_rows: bool = False,
) -> LayerOutput | None:
    """Layer ``layer``'s output rows of ``targets`` (ascending node ids, every node
    when ``None``; the other rows zeros on disk, unset in memory), computed by
    projecting first (module docstring), or ``None`` where that does not apply
    (:func:`projects`: the caller computes the layer as before).

    The products of the rows the layer reads stay in memory when they fit
    ``max_bytes``; otherwise, with ``spill_dir``, they go to a file there and
    the targets are aggregated in groups and tiles whose sums, local products
    and cut edges take about ``max_bytes``
    (:func:`~gnncore.train.core.aggregate.aggregate_spilled`; a target's
    in-edges are taken whole, so a hub's may take more); without
    ``spill_dir``, ``None``.

    Args:
        model (BasicGNN): In eval mode, on the CPU.
        layer (int): The layer to compute.
        adjacency (Adjacency): The graph, in the numbering of ``read_range``.
        targets (Tensor, optional): The rows to compute (``rows[layer]``).
        read_range (callable): The layer's input rows ``lo .. hi - 1`` in one read.
        max_bytes (int): The most the layer may hold in memory: the index
            arrays of :func:`index_bytes`, then the products (or a group's sums
            and edges) in what they leave, a quarter of it at least.
        dinv (Tensor, optional): ``deg^-1/2`` of every node, for GCN
            (:func:`~gnncore.train.core.layerwise.gcn_dinv`).
        batch_size (int): Targets finished and written at a time (in memory).
        layer_dir (path, optional): Where the output goes as a ``.npy`` file
            (else it stays in memory).
        sync_bytes (int): With ``layer_dir``, bytes written between flushes.
        spill_dir (path, optional): Where the products go when they do not
            fit ``max_bytes`` (removed before this returns).
        compare_rows (bool): With the products on disk, ``None`` when their
            passes would read more bytes than :data:`ROW_READ_BYTES` for each
            cut edge: for a caller that computes the layer part by part,
            reading the cut edges' source rows apart, instead.
    """
    conv = _projected_conv(model, layer, dinv)
    if conv is None:
        return None
    n = adjacency.num_nodes
    ids = targets.numpy() if targets is not None else np.arange(n)
    hidden = int(conv.out_channels)
    has_roots = _weights(conv)[1] is not None
    sources = layer_inputs(adjacency.indptr, adjacency.indices, ids)
    max_bytes = max(max_bytes - index_bytes(n, sources, targets is None), max_bytes // 4)
    held = (len(sources) + (len(ids) if has_roots else 0)) * hidden * 4
    in_memory = held <= max_bytes
    plan = None
    if not in_memory:
        if spill_dir is None:
            return None
        plan = _spilled_plan_worth_it(adjacency, ids, sources, hidden, max_bytes, compare_rows,
                                      layer)  # fmt: skip
        if plan is None:
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

    def emit(i: int, j: int, x: torch.Tensor) -> None:
        output.write_at(torch.from_numpy(ids[i:j]), finish_layer(model, layer, x))

    passes = 0
    try:
        products, roots = new("products", len(sources)), None
        if has_roots:
            roots = new("roots", len(ids))
        _project(conv, read_range, sources, ids, int(conv.in_channels), products, roots)
        products, roots = products.finish(), roots.finish() if roots is not None else None
        if isinstance(products, MemoryLayer):
            aggregate_in_memory(conv, adjacency, products.rows, roots, slot, ids, dinv, emit,
                                batch_size)  # fmt: skip
        else:
            assert plan is not None and scratch is not None
            passes = aggregate_spilled(
                conv, adjacency, products, roots, slot, sources, ids, dinv, max_bytes, plan,
                scratch, emit, batch_size,
            )  # fmt: skip
        output = output.fill()
    except BaseException:
        output.release()
        raise
    finally:
        for held_output in made:
            held_output.release()
    where = "in memory" if plan is None else f"on disk, {plan.describe()}, read {passes} times"
    LOG.info("layer %d projected before aggregating: %d rows of %d read in node order, %d "
             "computed, products %s, %.1f s", layer, len(sources), n, len(ids), where,
             time.perf_counter() - started)  # fmt: skip
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
    compare_rows: bool = False,
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
            compare_rows=compare_rows,
        )  # fmt: skip

    return hook
