r"""Layer-wise inference: every layer for all nodes, one node batch at a time.

Sampled inference of an ``L``-layer GNN touches ``O(fanout^L)`` nodes per seed;
with all neighbours (what evaluation uses) a batch's ``L``-hop neighbourhood
can be most of a large graph. Layer-wise inference (PyG's
:meth:`~torch_geometric.nn.models.basic_gnn.BasicGNN.inference`, GraphSAGE §3)
computes layer ``l`` for *every* node before layer ``l + 1``: a batch of
target nodes needs only its 1-hop in-neighbours' layer-``(l - 1)`` rows, so
memory stays at the ``N × hidden`` array of the previous layer plus one
batch's block, and each node is computed once per layer. With ``layer_dir``
that array is a file per layer on disk (:mod:`gnncore.train.core.layerstore`),
and memory is one batch's block.

Batches are contiguous node ranges ``[a, b)`` of at most ``batch_size``
nodes and (beyond the first node) ``max_edges`` in-edges, so a batch's block
is one slice of the CSR (``indices[indptr[a]:indptr[b]]``, the sources of the
edges into ``a .. b-1``, docs/FORMAT.md). Targets come first among a block's
nodes (as in a sampler's output), so a layer's self term is row ``i`` of its
input. Over a graph numbered part by part (a partitioned store's order,
``bounds``), batches stay inside one part (:func:`part_batches`) and a part's
input rows can be read once, in one sequential read (:class:`PartRows`).

Per layer this computes exactly what the model's ``forward`` computes for a
node from its complete in-neighbourhood: SAGE, GAT and GIN read only the edges
into the nodes they update, as PyG's sampled evaluation with all neighbours
does. GCN normalises each edge ``j -> i`` by ``1 / sqrt(deg_i deg_j)``
(in-degrees with the self-loop): here ``deg_j`` is ``j``'s degree in the whole
graph, the exact full-graph GCN. (A sampled subgraph, and PyG's own
``inference``, see only the edges they hold, which gives the outermost hop's
nodes a degree of 1; training's GCN evaluation is that approximation.)
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from gnncore.train.core.layerstore import (
    EDGES_PER_TARGET,
    SYNC_BYTES,
    DiskLayer,
    LayerOutput,
    new_layer_output,
)
from gnncore.train.core.nodebatches import layer_inputs, node_batches, part_batches, subset_indptr
from gnncore.train.core.partrows import (
    PartRows,
    RangeSource,
    RangesSource,
    RowSource,
    in_edge_entries,
    npy_ranges,
)
from gnncore.train.core.steps import autocast


@dataclass(frozen=True)
class Adjacency:
    """In-neighbour lists: row ``v`` of (``indptr``, ``indices``) holds the sources
    of the edges into ``v`` (the graph format's CSR / PyG's CSC)."""

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def from_edge_index(cls, edge_index: np.ndarray, num_nodes: int) -> Adjacency:
        """From a PyG ``[2, E]`` ``edge_index`` (row 0 sources, row 1 targets);
        self-loops are dropped, as ingestion drops them."""
        src, dst = np.asarray(edge_index[0], np.int64), np.asarray(edge_index[1], np.int64)
        keep = src != dst
        src, dst = src[keep], dst[keep]
        order = np.lexsort((src, dst))
        counts = np.bincount(dst, minlength=num_nodes)
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, src[order])

    def in_degree(self) -> np.ndarray:
        return np.diff(np.asarray(self.indptr, dtype=np.int64))


def _layer_batches(
    adjacency: Adjacency,
    nodes: torch.Tensor | None,
    bounds: np.ndarray | None,
    batch_size: int,
    max_edges: int,
) -> Iterator[tuple[int, int]]:
    """A layer's batches: :func:`part_batches` of every node, or with ``nodes``
    (ascending) of those nodes, ``[a, b)`` positions in ``nodes``."""
    if nodes is None:
        yield from part_batches(adjacency.indptr, bounds, batch_size, max_edges)
        return
    ids = nodes.numpy()
    positions = np.searchsorted(ids, bounds) if bounds is not None else None
    yield from part_batches(subset_indptr(adjacency.indptr, ids), positions, batch_size, max_edges)


def _layer_range(layer: LayerOutput) -> RangeSource | None:
    """Sequential row ranges of a layer on disk; ``None`` for one in memory."""
    return layer.read_range if isinstance(layer, DiskLayer) else None


def _part_rows(
    adjacency: Adjacency,
    previous: LayerOutput | None,
    inputs: tuple[RowSource, RangeSource | None, RangesSource | None],
    width: int,
    bounds: np.ndarray,
    cache_bytes: int,
    targets: torch.Tensor | None = None,
) -> PartRows:
    """The :class:`PartRows` of a layer's input (``width`` wide): layer 0's
    (``inputs``: its rows, range and ranges readers) or the previous layer's
    (ranges read from its file when it is on disk)."""
    if previous is None:
        read, ranged, ranges = inputs
    else:
        read, ranged = previous.read, _layer_range(previous)
        ranges = npy_ranges(previous.path) if isinstance(previous, DiskLayer) else None
    return PartRows(
        read,
        ranged,
        bounds,
        cache_bytes,
        width,
        read_ranges=ranges,
        adjacency=(adjacency.indptr, adjacency.indices),
        targets=targets.numpy() if targets is not None else None,
    )


#: ``project(layer, previous, nodes)``: layer ``layer``'s output (the rows of
#: ``nodes``, ascending, or of every node when ``None``) computed from
#: ``previous`` (the layer before's output; ``None``: the layer-0 input), or
#: ``None`` where the hook does not compute it (:func:`layerwise_inference`
#: then does, as usual).
LayerHook = Callable[[int, "LayerOutput | None", "torch.Tensor | None"], "LayerOutput | None"]


@dataclass(frozen=True)
class Block:
    """The 1-hop block of targets ``[a, b)``: ``n_id`` (targets first, then the
    other sources, ascending) and the local ``edge_index`` (sources -> targets)."""

    start: int
    stop: int
    n_id: torch.Tensor
    edge_index: torch.Tensor

    @property
    def num_targets(self) -> int:
        return self.stop - self.start


def block(adjacency: Adjacency, start: int, stop: int) -> Block:
    """The block of the targets ``[start, stop)``."""
    indptr = adjacency.indptr
    lo, hi = int(indptr[start]), int(indptr[stop])
    src = torch.from_numpy(np.asarray(adjacency.indices[lo:hi], dtype=np.int64))
    degree = torch.from_numpy(np.diff(np.asarray(indptr[start : stop + 1], dtype=np.int64)))
    count = stop - start
    dst = torch.repeat_interleave(torch.arange(count), degree)
    inside = (src >= start) & (src < stop)
    others = torch.unique(src[~inside])
    src_local = torch.where(inside, src - start, count + torch.searchsorted(others, src))
    n_id = torch.cat([torch.arange(start, stop), others])
    return Block(start, stop, n_id, torch.stack([src_local, dst]))


def _gcn_layer(
    conv: GCNConv, h: torch.Tensor, edge_index: torch.Tensor, num_targets: int, dinv: torch.Tensor
) -> torch.Tensor:
    """``GCNConv`` over a block with full-graph degrees (``dinv = deg^-1/2`` of
    the block's nodes, self-loop included): ``sum_j dinv_i dinv_j (W h_j) +
    dinv_i^2 (W h_i) + b``."""
    if conv.improved or not conv.add_self_loops or not conv.normalize:
        raise NotImplementedError("layer-wise GCN supports GCNConv's defaults only")
    h = conv.lin(h)
    src, dst = edge_index
    weight = (dinv[src] * dinv[dst]).to(h.dtype)
    out = torch.zeros(num_targets, h.size(1), dtype=h.dtype, device=h.device)
    out.index_add_(0, dst, h[src] * weight.unsqueeze(1))
    out = out + h[:num_targets] * (dinv[:num_targets] ** 2).to(h.dtype).unsqueeze(1)
    if conv.bias is not None:
        out = out + conv.bias
    return out


def _sage_layer(
    conv: SAGEConv, h: torch.Tensor, edge_index: torch.Tensor, num_targets: int
) -> torch.Tensor | None:
    """``SAGEConv`` with mean aggregation over a block on the CPU as one sparse
    CSR product (the block's edges are grouped by target), instead of
    gathering a message per edge and scattering it: the same function,
    summed in another order (float tolerance). ``None`` where this does not
    apply (another aggregation, or not on the CPU)."""
    if h.device.type != "cpu" or conv.aggr != "mean" or h.dtype != torch.float32:
        return None
    source = conv.lin(h).relu() if conv.project and hasattr(conv, "lin") else h
    src, dst = edge_index
    crow = torch.zeros(num_targets + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(dst, minlength=num_targets), 0, out=crow[1:])
    ones = torch.ones(len(src), dtype=source.dtype)
    with warnings.catch_warnings():  # "CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        adjacency = torch.sparse_csr_tensor(
            crow, src, ones, size=(num_targets, source.size(0)), check_invariants=False
        )
    out = conv.lin_l(torch.sparse.mm(adjacency, source, reduce="mean"))
    if conv.root_weight:
        out = out + conv.lin_r(h[:num_targets])
    if conv.normalize:
        out = torch.nn.functional.normalize(out, p=2.0, dim=-1)
    return out


def apply_layer(
    model: BasicGNN,
    layer: int,
    h: torch.Tensor,
    edge_index: torch.Tensor,
    num_targets: int,
    dinv: torch.Tensor | None = None,
) -> torch.Tensor:
    """Layer ``layer`` of ``model`` for a block's targets (rows ``:num_targets``
    of ``h``), followed by what :class:`BasicGNN` applies after it (activation,
    norm; the last layer is returned raw, as ``forward`` returns it)."""
    if model.jk_mode is not None:
        raise NotImplementedError("layer-wise inference of jumping-knowledge models")
    conv = model.convs[layer]
    if isinstance(conv, GCNConv):
        if dinv is None:
            raise ValueError("GCN needs the block's full-graph degrees (dinv)")
        x = _gcn_layer(conv, h, edge_index, num_targets, dinv)
    elif isinstance(conv, SAGEConv):
        fast = _sage_layer(conv, h, edge_index, num_targets)
        x = fast if fast is not None else conv((h, h[:num_targets]), edge_index)
    elif isinstance(conv, (GATConv, GINConv)):
        x = conv((h, h[:num_targets]), edge_index)
    else:  # any layer that reads only the edges into the nodes it updates
        x = conv(h, edge_index)[:num_targets]
    return finish_layer(model, layer, x)


def finish_layer(model: BasicGNN, layer: int, x: torch.Tensor) -> torch.Tensor:
    """What :class:`BasicGNN` applies after layer ``layer``'s convolution
    (activation, norm; nothing after the last layer, as ``forward`` returns it)."""
    if layer == model.num_layers - 1:
        return x
    if model.act is not None and model.act_first:
        x = model.act(x)
    if model.norms is not None:
        x = model.norms[layer](x)
    if model.act is not None and not model.act_first:
        x = model.act(x)
    return x


def gcn_dinv(model: BasicGNN, adjacency: Adjacency) -> torch.Tensor | None:
    """``deg^-1/2`` of every node (in-degree plus the self-loop) when ``model``
    has a GCN layer (:func:`_gcn_layer` reads it), else ``None``."""
    if not any(isinstance(conv, GCNConv) for conv in model.convs):
        return None
    return torch.from_numpy(adjacency.in_degree().astype(np.float32) + 1.0).pow(-0.5)


def block_output(
    model: BasicGNN,
    layer: int,
    blk: Block,
    h: torch.Tensor,
    dinv_all: torch.Tensor | None,
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> torch.Tensor:
    """Layer ``layer``'s float32 rows of ``blk``'s targets on ``device``, from the
    block's input rows ``h`` (:func:`apply_layer` under autocast)."""
    h = h.to(device, non_blocking=True)
    dinv = dinv_all[blk.n_id].to(device) if dinv_all is not None else None
    with autocast(device, amp_dtype):
        return apply_layer(
            model, layer, h, blk.edge_index.to(device), blk.num_targets, dinv
        ).float()


@torch.no_grad()
def layerwise_inference(
    model: BasicGNN,
    adjacency: Adjacency,
    inputs: RowSource,
    *,
    batch_size: int = 4096,
    max_edges: int | None = None,
    device: torch.device | str = "cpu",
    amp_dtype: torch.dtype | None = None,
    on_batch: Callable[[], None] | None = None,
    layer_dir: str | os.PathLike[str] | None = None,
    sync_bytes: int = SYNC_BYTES,
    bounds: np.ndarray | None = None,
    cache_bytes: int = 0,
    input_range: RangeSource | None = None,
    input_ranges: RangesSource | None = None,
    rows: list[torch.Tensor] | None = None,
    project: LayerHook | None = None,
) -> Generator[tuple[int, int, torch.Tensor], None, None]:
    """Yield ``(a, b, out)``: the model's output rows (float32, on ``device``) of
    nodes ``a .. b-1``, in node order, computed layer by layer; with ``rows``
    those of ``rows[-1][a:b]``.

    Layers before the last keep their output in one ``[N, C]`` float32 CPU
    tensor, or with ``layer_dir`` in one ``.npy`` file per layer there
    (:class:`~gnncore.train.core.layerstore.DiskLayer`: memory is one batch, not
    ``N x C``; the same rows); the last layer's rows are yielded batch by batch
    and not kept.

    Args:
        model (BasicGNN): In eval mode, on ``device``.
        adjacency (Adjacency): The graph.
        inputs (callable): Layer-0 rows of a batch's ``n_id``.
        batch_size (int): Target nodes per batch.
        max_edges (int, optional): In-edges per batch (a high-degree node
            still gets its own batch); default ``64 * batch_size``.
        device: Where the layers run.
        amp_dtype: Autocast dtype on CUDA (what training evaluated with).
        on_batch (callable, optional): Called after every batch of every
            layer (progress bars).
        layer_dir (path, optional): An existing directory for the layer files
            (deleted as soon as the next layer is complete).
        sync_bytes (int): With ``layer_dir``, bytes written between flushes
            that drop the written pages from the page cache.
        bounds (array, optional): Part bounds (a partitioned store's
            partition offsets; nodes numbered part by part): batches stay
            inside one part (:func:`part_batches`), and with ``cache_bytes``
            each part's input rows on disk are read once, sequentially
            (:class:`PartRows`: ``input_range`` for layer 0, the layer file
            after), the other parts' rows (sources of cut edges) in sorted
            passes of coalesced reads when they can be read by ranges
            (``input_ranges`` for layer 0, the layer file after), else one
            batch at a time.
        cache_bytes (int): The most a part's input rows may take in memory.
        input_range (callable, optional): Layer-0 rows ``lo .. hi - 1`` in
            one read (the same values ``inputs`` gives).
        input_ranges (callable, optional): Layer-0 rows of several ranges in
            one call (:data:`~gnncore.train.core.partrows.RangesSource`; the
            same values ``inputs`` gives).
        rows (list, optional): Layer ``l`` computes only the nodes
            ``rows[l]`` (:func:`rows_per_layer`), in node order, batches
            inside one part with ``bounds``; a hidden layer's other rows are
            zeros on disk and never read.
        project (callable, optional): A :data:`LayerHook` that computes a
            layer another way where it can
            (:func:`~gnncore.train.core.projected.projection_hook`).
    """
    device = torch.device(device)
    max_edges = max_edges if max_edges is not None else EDGES_PER_TARGET * batch_size
    n = adjacency.num_nodes
    dinv_all = gcn_dinv(model, adjacency)
    slot = np.full(n, -1, dtype=np.int64) if rows is not None else None
    previous: LayerOutput | None = None
    current: LayerOutput | None = None
    previous_width = 0
    last = model.num_layers - 1
    try:
        for layer in range(model.num_layers):
            current = None
            read = inputs if previous is None else previous.read
            part_rows = None
            nodes = rows[layer] if rows is not None else None
            done = project(layer, previous, nodes) if project is not None else None
            if done is not None:  # the hook computed the layer
                if previous is not None:
                    previous.release()
                previous, previous_width = done, int(model.convs[layer].out_channels)
                if layer == last:
                    yield from _rows_of(done, nodes, n, batch_size, device)
                continue
            if bounds is not None and cache_bytes > 0:
                width = int(model.in_channels) if previous is None else int(previous_width)
                layer_input = (inputs, input_range, input_ranges)
                part_rows = _part_rows(
                    adjacency, previous, layer_input, width, bounds, cache_bytes, nodes
                )
            for a, b in _layer_batches(adjacency, nodes, bounds, batch_size, max_edges):
                blk = _batch_block(adjacency, nodes, a, b, slot)
                h = part_rows(blk) if part_rows is not None else read(blk.n_id)
                out = block_output(model, layer, blk, h, dinv_all, device, amp_dtype)
                if on_batch is not None:
                    on_batch()
                if layer == last:
                    yield a, b, out
                    continue
                if current is None:
                    current = new_layer_output(layer_dir, n, layer, out.size(1), sync_bytes)
                    previous_width = out.size(1)
                _write_batch(current, nodes, a, b, out)
            if part_rows is not None:
                part_rows.release()
            if previous is not None:
                previous.release()
            previous = None
            if current is not None:
                previous = current.finish() if nodes is None else current.fill()
    finally:  # also when the consumer stops early or a batch fails
        for held in (previous, current):
            if held is not None:
                held.release()


def _batch_block(
    adjacency: Adjacency, nodes: torch.Tensor | None, a: int, b: int, slot: np.ndarray | None
) -> Block:
    """The block of batch ``[a, b)``: nodes ``a .. b - 1``, or positions in ``nodes``."""
    if nodes is None:
        return block(adjacency, a, b)
    return replace(block_of(adjacency, nodes[a:b], slot), start=a, stop=b)


def _write_batch(
    layer: LayerOutput, nodes: torch.Tensor | None, a: int, b: int, out: torch.Tensor
) -> None:
    """Write a batch's rows (:func:`_batch_block`'s) into ``layer``."""
    if nodes is None:
        layer.write(a, out)
    else:
        layer.write_at(nodes[a:b], out)


def _rows_of(
    output: LayerOutput,
    nodes: torch.Tensor | None,
    num_nodes: int,
    batch_size: int,
    device: torch.device,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(a, b, out)`` of a computed last layer, ``batch_size`` rows at a time
    (``a .. b - 1`` positions in ``nodes``, or node ids)."""
    count = len(nodes) if nodes is not None else num_nodes
    for a in range(0, count, batch_size):
        b = min(a + batch_size, count)
        ids = nodes[a:b] if nodes is not None else torch.arange(a, b)
        yield a, b, output.read(ids).to(device)


# Some nodes only ---------------------------------------------------------------


def block_of(adjacency: Adjacency, targets: torch.Tensor, slot: np.ndarray | None = None) -> Block:
    """The 1-hop block of ``targets`` (int64, ascending, unique; any nodes):
    ``n_id`` holds the targets first, then the other sources ascending, as
    :func:`block` of a contiguous range does (``start``/``stop`` are
    positions in ``targets``, not node ids).

    ``slot`` (int64 ``[N]``, all ``-1``; left so) is scratch for mapping node
    ids to block positions without sorting every source: pass one array to
    a run of calls to save allocating it per block."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    if slot is None:
        slot = np.full(adjacency.num_nodes, -1, dtype=np.int64)
    nodes = targets.numpy()
    count = len(nodes)
    entries, degree = in_edge_entries(indptr, nodes)
    src = np.asarray(adjacency.indices[entries], dtype=np.int64)
    slot[nodes] = np.arange(count)
    outside = src[slot[src] < 0]
    slot[outside] = np.arange(len(outside))  # one write per node survives
    others = np.sort(outside[slot[outside] == np.arange(len(outside))])
    slot[others] = count + np.arange(len(others))
    src_local = slot[src]
    slot[nodes] = -1
    slot[others] = -1
    dst = np.repeat(np.arange(count), degree)
    n_id = torch.from_numpy(np.concatenate([nodes, others]))
    return Block(0, count, n_id, torch.from_numpy(np.stack([src_local, dst])))


def rows_per_layer(
    adjacency: Adjacency, targets: torch.Tensor, num_layers: int
) -> list[torch.Tensor]:
    """The nodes whose rows layer ``l`` must compute so that the last layer
    gives ``targets``' outputs: the last layer computes ``targets`` (unique,
    ascending), layer ``l - 1`` the nodes of layer ``l`` and their
    in-neighbours. Each list is ascending and unique."""
    rows = [torch.unique(targets)]
    for _ in range(num_layers - 1):
        inputs = layer_inputs(adjacency.indptr, adjacency.indices, rows[0].numpy())
        rows.insert(0, torch.from_numpy(inputs))
    return rows


def in_edges(adjacency: Adjacency, nodes: torch.Tensor) -> int:
    """The number of edges into ``nodes``."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    if len(nodes) == adjacency.num_nodes:
        return int(indptr[-1])
    index = nodes.numpy()
    return int((indptr[index + 1] - indptr[index]).sum())


@torch.no_grad()
def layerwise_subset(
    model: BasicGNN,
    adjacency: Adjacency,
    inputs: RowSource,
    rows: list[torch.Tensor],
    *,
    batch_size: int = 4096,
    max_edges: int | None = None,
    device: torch.device | str = "cpu",
    amp_dtype: torch.dtype | None = None,
    layer_dir: str | os.PathLike[str] | None = None,
) -> Generator[tuple[torch.Tensor, torch.Tensor], None, None]:
    """Yield ``(nodes, out)``: the model's output rows (float32, on ``device``)
    of ``rows[-1]``'s nodes, batch by batch in node order, computing layer
    ``l`` only for ``rows[l]`` (:func:`rows_per_layer`), each node once.

    What :func:`layerwise_inference` computes for every node (the same
    per-layer arithmetic, :func:`apply_layer`), restricted to the rows the
    last layer's nodes depend on. A hidden layer is one ``[N, C]`` float32
    array (rows outside ``rows[l]`` are never read): a tensor in memory, or,
    with ``layer_dir``, a ``.npy`` file there written sequentially (zeros
    between the subset's rows), read memory-mapped by the next layer and
    deleted once that layer is complete
    (:class:`~gnncore.train.core.layerstore.DiskLayer`).
    """
    device = torch.device(device)
    max_edges = max_edges if max_edges is not None else EDGES_PER_TARGET * batch_size
    dinv_all = gcn_dinv(model, adjacency)
    slot = np.full(adjacency.num_nodes, -1, dtype=np.int64)
    previous: LayerOutput | None = None
    current: LayerOutput | None = None
    last = model.num_layers - 1
    try:
        for layer in range(model.num_layers):
            nodes = rows[layer]
            cumulative = subset_indptr(adjacency.indptr, nodes.numpy())
            for i, j in node_batches(cumulative, batch_size, max_edges):
                blk = block_of(adjacency, nodes[i:j], slot)
                h = inputs(blk.n_id) if previous is None else previous.read(blk.n_id)
                out = block_output(model, layer, blk, h, dinv_all, device, amp_dtype)
                if layer == last:
                    yield nodes[i:j], out
                    continue
                if current is None:
                    width = out.size(1)
                    current = new_layer_output(layer_dir, adjacency.num_nodes, layer, width)
                current.write_at(nodes[i:j], out)
            if previous is not None:
                previous.release()
            previous, current = (current.fill() if current is not None else None), None
    finally:  # also when the consumer stops early or a batch fails
        for held in (previous, current):
            if held is not None:
                held.release()
