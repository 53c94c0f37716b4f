r"""Sums of a projected layer's products over each target's in-edges
(:mod:`gnncore.train.core.projected`): with the products in memory, or
spilled to a file in source order.

With the products on disk the targets are aggregated in two steps
(:func:`aggregate_spilled`, by a :class:`SpilledPlan`). First in groups of
consecutive ids (:func:`spilled_groups`): a group holds its sums and, in
memory, the products of the sources whose ids lie between its first and last
target (its *local span*, one sequential read). In a partitioned store's order
a part's nodes are consecutive, so most in-edges come from the local span and
are summed as the group's in-lists stream past, a chunk at a time; the others
(the *cut* edges) go to a scratch file in target order, the partial sums to
another. Then tiles of as many targets as half the memory holds the sums of
take their cut edges, sorted by source, in passes over the products file in
order (:func:`spans`), each pass as many cut edges as
:func:`remote_capacity` holds, and are finished. Every edge is read once, the
products once for the local spans plus once per pass. In the graph's own
order (random) nearly every edge is cut: one pass per tile or more.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv, SAGEConv

from gnncore.train.core.layerstore import SYNC_BYTES, DiskLayer, LayerOutput
from gnncore.train.core.layerwise import Adjacency
from gnncore.train.core.nodebatches import MARK_EDGES, node_batches, subset_indptr
from gnncore.train.core.partrows import in_edge_entries

#: Bytes of rows one sequential read of a pass spans, at most.
SPAN_BYTES = 64 << 20
#: Bytes an in-edge takes while its chunk is summed (its CSR entry, source,
#: product row, target, weight and the masks), besides its message row.
EDGE_BYTES = 48
#: Bytes a cut edge takes while summed in a pass over the products: its product
#: row and target as read (up to 8 each), the sort order (8), the sorted row and
#: target (8 each), GCN's weight before and after sorting (4 each).
REMOTE_EDGE_BYTES = 48


def spans(ids: np.ndarray, width: int, max_bytes: int = SPAN_BYTES) -> Iterator[tuple[int, int]]:
    """``(a, b)``: runs of ``ids`` (ascending) whose rows ``ids[a] .. ids[b - 1]``
    span at most ``max_bytes`` (at most :data:`SPAN_BYTES`) of ``width``-wide
    float32 rows."""
    span = max(min(SPAN_BYTES, max_bytes) // max(width * 4, 1), 1)
    a = 0
    while a < len(ids):
        b = int(np.searchsorted(ids, int(ids[a]) + span))
        yield a, b
        a = b


def group_edges(
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
    ends = np.cumsum(degree)  # each target's self-loop after its in-edges: still by target
    src = np.insert(src, ends, targets)
    dst = np.insert(dst, ends, np.arange(len(targets)))
    weight = dinv[torch.from_numpy(src)] * dinv[torch.from_numpy(targets[dst])]
    return slot[src], torch.from_numpy(dst), weight, degree


def finish_sums(
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


def _pick(weight: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor | None:
    return weight[mask] if weight is not None else None


def _add(
    out: torch.Tensor,
    products: torch.Tensor,
    rows: np.ndarray,
    dst: torch.Tensor,
    weight: torch.Tensor | None,
) -> None:
    """``out[dst[k]] += weight[k] * products[rows[k]]`` for every ``k``. Edges by
    target (``dst`` ascending) are summed as one sparse CSR product over the
    targets they reach (each row's sum in edge order, no message rows; about
    15x faster than gathering the messages and ``index_add_``); others are
    gathered and scattered."""
    if len(rows) == 0:
        return
    targets = dst.numpy()
    if len(targets) > 1 and bool(np.any(targets[1:] < targets[:-1])):
        messages = products[torch.from_numpy(rows)]
        if weight is not None:
            messages *= weight.unsqueeze(1)
        out.index_add_(0, dst, messages)
        return
    lo, hi = int(targets[0]), int(targets[-1]) + 1
    crow = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(np.bincount(targets - lo, minlength=hi - lo), out=crow[1:])
    values = weight if weight is not None else torch.ones(len(rows), dtype=products.dtype)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": used as documented
        warnings.simplefilter("ignore", UserWarning)
        matrix = torch.sparse_csr_tensor(
            torch.from_numpy(crow), torch.from_numpy(np.asarray(rows, dtype=np.int64)),
            values.to(products.dtype), size=(hi - lo, products.size(0)), check_invariants=False,
        )  # fmt: skip
        out[lo:hi] += matrix @ products


def aggregate_in_memory(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    products: torch.Tensor,
    roots: LayerOutput | None,
    slot: np.ndarray,
    ids: np.ndarray,
    dinv: torch.Tensor | None,
    emit: Callable[[int, int, torch.Tensor], None],
    batch_size: int = 4096,
) -> None:
    """The layer's rows of ``ids`` (before activation) from ``products`` in
    memory: ``emit(i, j, rows)`` for batches of at most ``batch_size`` targets
    and ``64 * batch_size`` in-edges, in order."""
    cumulative = subset_indptr(np.asarray(adjacency.indptr, dtype=np.int64), ids)
    for i, j in node_batches(cumulative, batch_size, 64 * batch_size):
        rows, dst, weight, degree = group_edges(conv, adjacency, slot, ids[i:j], dinv)
        out = torch.zeros(j - i, products.size(1), dtype=products.dtype)
        _add(out, products, rows, dst, weight)
        root = roots.read_range(i, j) if roots is not None else None
        emit(i, j, finish_sums(conv, out, degree, root))


def spilled_groups(
    ids: np.ndarray, sources: np.ndarray, hidden: int, max_bytes: int
) -> list[tuple[int, int]]:
    """The groups ``[i, j)`` of the targets ``ids`` (ascending) whose local
    in-edges are summed at a time: as many consecutive targets as half of
    ``max_bytes`` holds of their sums and their local span (the products of
    ``sources`` from ``ids[i]`` to ``ids[j - 1]``); at least one. Each group's
    end is found by bisection, without arrays as long as ``ids``."""
    row = hidden * 4
    budget = max_bytes // 2
    n = len(ids)

    def cost(i: int, j: int) -> int:
        first = int(np.searchsorted(sources, ids[i]))
        last = int(np.searchsorted(sources, ids[j - 1], side="right"))
        return row * (j - i) + row * (last - first)

    groups: list[tuple[int, int]] = []
    i = 0
    while i < n:
        lo, hi = i + 1, n  # cost(i, lo) may exceed the budget: a group holds one target
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(i, mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        groups.append((i, lo))
        i = lo
    return groups


def remote_edges(
    adjacency: Adjacency, ids: np.ndarray, groups: list[tuple[int, int]]
) -> np.ndarray:
    """Each group's in-edges from outside its local span (ids ``ids[i] ..
    ids[j - 1]``), read :data:`MARK_EDGES` at a time: its cut edges."""
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    counts = np.zeros(len(groups), dtype=np.int64)
    for g, (i, j) in enumerate(groups):
        lo, hi = int(ids[i]), int(ids[j - 1])
        for c, d in node_batches(subset_indptr(indptr, ids[i:j]), j - i, MARK_EDGES):
            entries, _ = in_edge_entries(indptr, ids[i + c : i + d])
            src = np.asarray(adjacency.indices[entries])
            counts[g] += int(np.count_nonzero((src < lo) | (src > hi)))
    return counts


@dataclass(frozen=True)
class SpilledPlan:
    """How a layer's targets are aggregated from products on disk.

    Attributes:
        groups: ``[i, j)`` of the targets whose local in-edges are summed at a
            time (:func:`spilled_groups`).
        tiles: ``(g0, g1)``: runs of groups whose cut edges are summed at a
            time, their sums in memory.
        cut_edges: Each group's in-edges from outside its local span.
        passes: Reads of the products file, whole or nearly: the local spans
            together once, and each tile's cut edges once per
            :func:`remote_capacity` of them.
    """

    groups: list[tuple[int, int]]
    tiles: list[tuple[int, int]]
    cut_edges: np.ndarray
    passes: int

    def describe(self) -> str:
        targets = self.groups[-1][1] if self.groups else 0
        return f"{targets} targets in {len(self.groups)} groups and {len(self.tiles)} tiles"


def remote_capacity(max_bytes: int) -> int:
    """Cut edges summed in one pass over the products: three eighths of
    ``max_bytes`` at :data:`REMOTE_EDGE_BYTES` each."""
    return max(3 * max_bytes // 8 // REMOTE_EDGE_BYTES, 1)


def spilled_plan(
    adjacency: Adjacency, ids: np.ndarray, sources: np.ndarray, hidden: int, max_bytes: int
) -> SpilledPlan:
    """The :class:`SpilledPlan` of the targets ``ids`` (reading ``sources``)
    under ``max_bytes``: the groups, their cut edges (one scan of the
    targets' in-edges), tiles of as many targets as half of ``max_bytes``
    holds the sums of, and the passes they take."""
    groups = spilled_groups(ids, sources, hidden, max_bytes)
    cut = remote_edges(adjacency, ids, groups)
    per_tile = max(max_bytes // 2 // (hidden * 4), 1)
    tiles: list[tuple[int, int]] = []
    g0 = 0
    while g0 < len(groups):
        g1 = g0 + 1
        while g1 < len(groups) and groups[g1][1] - groups[g0][0] <= per_tile:
            g1 += 1
        tiles.append((g0, g1))
        g0 = g1
    capacity = remote_capacity(max_bytes)
    passes = 1 + sum(-(-int(cut[g0:g1].sum()) // capacity) for g0, g1 in tiles)
    return SpilledPlan(groups, tiles, cut, passes)


class _CutEdgeFile:
    """The cut edges of a layer's targets, in target order, in scratch files:
    each edge's product row and target position (and GCN's weight)."""

    def __init__(self, scratch: Path, weighted: bool, wide: bool) -> None:
        self.dtype = np.dtype(np.int64 if wide else np.int32)
        self.paths = [scratch / "cut-rows.bin", scratch / "cut-targets.bin"]
        if weighted:
            self.paths.append(scratch / "cut-weights.bin")
        self.files: list[BinaryIO] = []
        self.count = 0
        try:
            for path in self.paths:
                self.files.append(open(path, "wb"))  # noqa: SIM115  (closed in close)
        except BaseException:
            self.remove()
            raise

    def append(self, rows: np.ndarray, dst: np.ndarray, weight: torch.Tensor | None) -> None:
        rows.astype(self.dtype).tofile(self.files[0])
        dst.astype(self.dtype).tofile(self.files[1])
        if weight is not None:
            weight.numpy().astype(np.float32).tofile(self.files[2])
        self.count += len(rows)

    def close(self) -> None:
        for f in self.files:
            f.close()

    def read(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
        """Edges ``lo .. hi - 1``: ``(rows, targets, weights)``."""
        size = self.dtype.itemsize
        rows = np.fromfile(self.paths[0], self.dtype, hi - lo, offset=lo * size)
        dst = np.fromfile(self.paths[1], self.dtype, hi - lo, offset=lo * size)
        weight = None
        if len(self.paths) > 2:
            weights = np.fromfile(self.paths[2], np.float32, hi - lo, offset=lo * 4)
            weight = torch.from_numpy(weights)
        return rows, dst, weight

    def remove(self) -> None:
        """Close and delete every file, each whatever happens to the others."""
        for f in self.files:
            with contextlib.suppress(OSError):
                f.close()
        for p in self.paths:
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)


def _sum_cut_edges(
    out: torch.Tensor,
    first: int,
    edges: tuple[np.ndarray, np.ndarray, torch.Tensor | None],
    products: DiskLayer,
    message_rows: int,
    max_bytes: int,
) -> None:
    """Add cut edges (targets from ``first``, ``out``'s row 0; in target order)
    into ``out`` in one pass over ``products`` in source order, spans of
    consecutive rows of at most an eighth of ``max_bytes``."""
    rows, dst, weight = edges
    order = np.argsort(rows, kind="stable")  # by source, each source's by target
    rows = rows[order].astype(np.int64)
    targets = torch.from_numpy(dst[order].astype(np.int64) - first)
    if weight is not None:
        weight = weight[torch.from_numpy(order)]
    del order
    for a, b in spans(rows, products.width, max_bytes // 8):
        lo = int(rows[a])
        block = products.read_range(lo, int(rows[b - 1]) + 1)
        for c in range(a, b, message_rows):
            d = min(c + message_rows, b)
            part = weight[c:d] if weight is not None else None
            _add(out, block, rows[c:d] - lo, targets[c:d], part)


def _sum_local(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    products: DiskLayer,
    slot: np.ndarray,
    span: tuple[int, int],
    targets: np.ndarray,
    first: int,
    dinv: torch.Tensor | None,
    max_bytes: int,
    cut: _CutEdgeFile,
) -> torch.Tensor:
    """One group's sums of its in-edges from its local span ``span`` (product
    rows, read at once), its other in-edges appended to ``cut`` (target
    positions from ``first``), chunks of edges bounded by a quarter of
    ``max_bytes``."""
    a, b = span
    local = products.read_range(a, b)
    out = torch.zeros(len(targets), products.width, dtype=torch.float32)
    chunk = max(max_bytes // 4 // (EDGE_BYTES + products.width * 4), 1)
    indptr = np.asarray(adjacency.indptr, dtype=np.int64)
    for i, j in node_batches(subset_indptr(indptr, targets), len(targets), chunk):
        rows, dst, weight, _ = group_edges(conv, adjacency, slot, targets[i:j], dinv)
        dst += i
        near = (rows >= a) & (rows < b)
        near_t, far_t = torch.from_numpy(near), torch.from_numpy(~near)
        _add(out, local, rows[near] - a, dst[near_t], _pick(weight, near_t))
        cut.append(rows[~near], dst[far_t].numpy() + first, _pick(weight, far_t))
    return out


def aggregate_spilled(
    conv: SAGEConv | GCNConv,
    adjacency: Adjacency,
    products: DiskLayer,
    roots: LayerOutput | None,
    slot: np.ndarray,
    sources: np.ndarray,
    ids: np.ndarray,
    dinv: torch.Tensor | None,
    max_bytes: int,
    plan: SpilledPlan,
    scratch: Path,
    emit: Callable[[int, int, torch.Tensor], None],
    batch_size: int = 4096,
) -> int:
    """The layer's rows of ``ids`` (before activation) from products on disk,
    by ``plan`` (module docstring): ``emit(i, j, rows)`` for the targets
    ``ids[i:j]``, in order. Returns the passes over the products taken."""
    weighted = isinstance(conv, GCNConv)
    wide = max(len(sources), len(ids)) >= 1 << 31
    cut: _CutEdgeFile | None = None
    sums: DiskLayer | None = None
    offsets = [0]
    try:
        cut = _CutEdgeFile(scratch, weighted, wide)
        sums = DiskLayer(scratch / "sums.npy", len(ids), products.width, SYNC_BYTES)
        for i, j in plan.groups:  # 1. local in-edges, cut edges to a file
            span = (int(np.searchsorted(sources, ids[i])),
                    int(np.searchsorted(sources, ids[j - 1], side="right")))  # fmt: skip
            sums.write(i, _sum_local(conv, adjacency, products, slot, span, ids[i:j], i, dinv,
                                     max_bytes, cut))  # fmt: skip
            offsets.append(cut.count)
        cut.close()
        sums.finish()
        passes = 1
        capacity = remote_capacity(max_bytes)
        message_rows = max(max_bytes // 8 // (products.width * 4), 1)
        indptr = np.asarray(adjacency.indptr, dtype=np.int64)
        for g0, g1 in plan.tiles:  # 2. cut edges, a tile of sums at a time
            t0, t1 = plan.groups[g0][0], plan.groups[g1 - 1][1]
            out = sums.read_range(t0, t1)
            for e in range(offsets[g0], offsets[g1], capacity):
                edges = cut.read(e, min(e + capacity, offsets[g1]))
                _sum_cut_edges(out, t0, edges, products, message_rows, max_bytes)
                del edges
                passes += 1
            for c in range(t0, t1, batch_size):
                d = min(c + batch_size, t1)
                root = roots.read_range(c, d) if roots is not None else None
                degree = indptr[ids[c:d] + 1] - indptr[ids[c:d]]
                emit(c, d, finish_sums(conv, out[c - t0 : d - t0], degree, root))
    finally:
        if cut is not None:
            cut.remove()
        if sums is not None:
            sums.release()
    return passes
