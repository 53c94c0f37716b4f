r"""HierBatching's mega-batches (ALGORITHMS.md §7): what one holds in memory and
how it is read.

Memory holds a **static cache** (:class:`StaticCache`: features and
in-neighbour lists of the ``r_s·|V|`` highest-degree nodes, read once) and a
**dynamic cache**: one mega-batch (:class:`MegaBatch`) of ``N_d`` partitions
``T`` of a :class:`~gnncore.outofcore.store.PartitionedStore`, read by
:func:`load_mega_batch` as one sequential range of features and one of in-edges
(the store is destination-major) into the cached graph ``G_cache``: the
subgraph induced on ``T ∪ (N(T) ∩ static)``. :func:`mega_batch_parts` picks
``N_d`` from a memory budget: two mega-batches and the static cache,
``2·(r_s + r_d)·data`` with ``r_d = N_d / N_p`` and ``data`` the bytes of
features plus edges (:func:`data_bytes`). The batch source that walks them is
:class:`~gnncore.outofcore.hierbatching.HierBatchSource`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gnncore.errors import InputError
from gnncore.outofcore.store import PartitionedStore

#: ``r_s``: the static fraction HierBatching's paper uses.
DEFAULT_STATIC_FRACTION = 0.01
#: ``p``: passes over each mega-batch's training nodes.
DEFAULT_PASSES = 2
#: ``r_d`` when neither a budget nor ``N_d`` is given.
DEFAULT_DYNAMIC_FRACTION = 1 / 8


def payload_bytes(store: PartitionedStore, name: str) -> int:
    """Bytes of the array ``name`` (``"features"``, ``"static_indices"``...) as
    the store's manifest describes it (its payload, without the file header);
    0 where the store has no such file."""
    entry = store.info["files"].get(f"{name}.npy")
    if entry is None:
        return 0
    return int(np.prod(entry["shape"], dtype=np.int64)) * np.dtype(entry["dtype"]).itemsize


def data_bytes(store: PartitionedStore) -> int:
    """Bytes of the store's features plus edges (the ``data`` of the memory
    bound; array payloads, without file headers)."""
    return payload_bytes(store, "features") + payload_bytes(store, "edges")


def mega_batch_parts(
    store: PartitionedStore, budget_bytes: int | None = None, parts: int = 0
) -> int:
    """``N_d``: ``parts`` when given (> 0), else the most partitions with
    ``2·(r_s + N_d/N_p)·data ≤ budget`` (at least 1), else ``N_p / 8``.

    Raises:
        InputError: The budget cannot hold the static cache and one partition.
    """
    n_p = store.parts
    if parts > 0:
        return min(parts, n_p)
    if budget_bytes is None:
        return max(1, round(DEFAULT_DYNAMIC_FRACTION * n_p))
    data = data_bytes(store)
    r_s = store.num_static / max(store.num_nodes, 1)
    r_d = budget_bytes / (2.0 * max(data, 1)) - r_s
    n_d = min(n_p, int(r_d * n_p))
    if n_d < 1:
        need = 2 * (r_s + 1 / n_p) * data
        raise InputError(
            f"memory budget {budget_bytes} bytes cannot hold the static cache and one "
            f"partition twice (needs about {int(need)} bytes for {n_p} partitions); raise "
            "the budget or write the store with more partitions or a smaller static fraction",
            store.path,
        )
    return n_d


@dataclass(frozen=True)
class StaticCache:
    """The static set in memory: its ids (ascending), features and in-lists."""

    nodes: np.ndarray
    features: np.ndarray | None
    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def read(cls, store: PartitionedStore) -> StaticCache:
        features = (
            np.array(store.array("static_features")) if store.has("static_features") else None
        )
        return cls(
            np.array(store.array("static_nodes")),
            features,
            np.array(store.array("static_indptr")),
            np.array(store.array("static_indices")),
        )

    @property
    def nbytes(self) -> int:
        arrays = (self.nodes, self.features, self.indptr, self.indices)
        return sum(a.nbytes for a in arrays if a is not None)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id in the static set, ``-1`` where it is not static."""
        if len(self.nodes) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.nodes, ids), len(self.nodes) - 1)
        return np.where(self.nodes[pos] == ids, pos, -1)


@dataclass(frozen=True)
class PartitionData:
    """One partition in memory: its features (``None`` without features) and its
    in-edges (int64 ``[E, 2]``, store ids)."""

    features: np.ndarray | None
    in_edges: np.ndarray


def _read_in_edges(
    store: PartitionedStore, parts: list[int]
) -> tuple[dict[int, np.ndarray], float]:
    """In-edges of ``parts``, all ranges in one call (views of one array), and the
    seconds the read took."""
    if not parts:
        return {}, 0.0
    ranges = [store.in_edge_range(p) for p in parts]
    started = time.perf_counter()
    edges = store.read_rows("edges", ranges)
    seconds = time.perf_counter() - started
    cuts = np.cumsum([hi - lo for lo, hi in ranges])[:-1]
    return dict(zip(parts, np.split(edges, cuts), strict=True)), seconds


#: In-list entries of the static neighbours :func:`load_mega_batch` filters at a
#: time (a few int64 arrays of this length are live at once). On a heavy-tailed
#: graph the static set's in-lists hold far more than its share of the edges
#: (the 0.36% highest-degree nodes of the showcase's 8.5M-node graph: 13.7% of
#: its 386M stored edges, 447 MB of ids), and a mega-batch touches most of them:
#: expanded at once, with their destinations, partitions and membership, they
#: took gigabytes beside the mega-batch.
STATIC_CHUNK_EDGES = 1 << 21


def _static_in_edges(
    static: StaticCache,
    extra: np.ndarray,
    extra_pos: np.ndarray,
    in_t: np.ndarray,
    offsets: np.ndarray,
    chunk_edges: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The in-edges of the ``extra`` static nodes (at ``extra_pos`` in the
    static cache) whose source lies in T (``in_t`` by partition) or in
    ``extra``: ``((src, src_part, src_in_t), dst)``, ``dst`` indexing
    ``extra``, in the order of the in-lists; ``chunk_edges`` in-list entries
    are expanded at a time."""
    starts, ends = static.indptr[extra_pos], static.indptr[extra_pos + 1]
    lengths = ends - starts
    ends_cum = np.cumsum(lengths)
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    first = 0
    while first < len(extra_pos):
        done = ends_cum[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(ends_cum, done + chunk_edges, side="right")))
        src = np.concatenate(
            [static.indices[a:b] for a, b in zip(starts[first:last], ends[first:last], strict=True)]
        )
        dst = np.repeat(np.arange(first, last, dtype=np.int64), lengths[first:last])
        part = np.searchsorted(offsets, src, side="right") - 1
        inside = in_t[part]
        at = np.minimum(np.searchsorted(extra, src), len(extra) - 1)
        keep = inside | (extra[at] == src)  # extra is not empty: extra_pos is not
        pieces.append((src[keep], part[keep], inside[keep], dst[keep]))
        first = last
    if not pieces:
        empty = np.zeros(0, dtype=np.int64)
        return (empty, empty, np.zeros(0, dtype=bool)), empty
    src, part, inside, dst = (np.concatenate(column) for column in zip(*pieces, strict=True))
    return (src, part, inside), dst


@dataclass
class MegaBatch:
    """One mega-batch (or buffer state) in memory: ``G_cache`` over local ids.

    Attributes:
        parts: The partitions ``T`` in memory (ascending).
        nodes: Store id of each local id: ``T``'s nodes, then the static
            neighbours of ``T`` outside it (ascending within each).
        indptr, indices: In-neighbour CSC of the induced subgraph (local ids).
        x: Features by local id (``None`` for a store without features).
        pieces: Each partition's data (views of ``x`` and of the edges read),
            handed to the next buffer state so it is not read again; empty
            unless asked for.
        nbytes_read: Bytes read from disk for it; ``partitions_read``: the
            partitions read (not those already in memory); ``seconds``: its
            load time; ``read_seconds``: the part of it spent in the store's
            reads (the rest builds ``G_cache``).
    """

    parts: tuple[int, ...]
    nodes: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray | None
    pieces: dict[int, PartitionData]
    nbytes_read: int
    partitions_read: int
    seconds: float
    read_seconds: float

    def local_ids(self, store_ids: np.ndarray) -> np.ndarray:
        """Local ids of store ids among :attr:`nodes` (which must hold them)."""
        order = np.argsort(self.nodes, kind="stable")
        return order[np.searchsorted(self.nodes[order], store_ids)]


def load_mega_batch(
    store: PartitionedStore,
    parts: Sequence[int],
    static: StaticCache,
    resident: dict[int, PartitionData] | None = None,
    keep_pieces: bool = False,
    chunk_edges: int = STATIC_CHUNK_EDGES,
) -> MegaBatch:
    """Read partitions ``parts`` (those in ``resident`` are in memory already and
    are not read again) and build ``G_cache`` on ``T ∪ (N(T) ∩ static)``: every
    stored edge whose both ends lie in that set. Features are read straight
    into the mega-batch's feature matrix (no second copy). The static
    neighbours' in-lists are filtered ``chunk_edges`` edges at a time
    (:data:`STATIC_CHUNK_EDGES`)."""
    started = time.perf_counter()
    parts = tuple(sorted(int(p) for p in parts))
    resident = {p: d for p, d in (resident or {}).items() if p in parts}
    missing = [p for p in parts if p not in resident]
    read, read_seconds = _read_in_edges(store, missing)
    in_edges = {**{p: d.in_edges for p, d in resident.items()}, **read}
    nbytes = sum(in_edges[p].nbytes for p in missing)
    offsets = store.offsets
    sizes = np.array([offsets[p + 1] - offsets[p] for p in parts], dtype=np.int64)
    t_nodes = np.concatenate([np.arange(offsets[p], offsets[p + 1], dtype=np.int64) for p in parts])
    in_t = np.zeros(store.parts, dtype=bool)
    in_t[list(parts)] = True
    # Local id of a node of T: its store id shifted by its partition's base.
    base = np.zeros(store.parts, dtype=np.int64)
    base[list(parts)] = np.concatenate([[0], np.cumsum(sizes)[:-1]]) - offsets[list(parts)]
    edges = np.concatenate([in_edges[p] for p in parts])
    src, dst = edges[:, 0], edges[:, 1]
    src_part = np.searchsorted(offsets, src, side="right") - 1
    src_in_t = in_t[src_part]
    keep = src_in_t.copy()  # and the static sources outside T (looked up for those only)
    keep[~src_in_t] = static.positions(src[~src_in_t]) >= 0
    src, dst, src_part, src_in_t = src[keep], dst[keep], src_part[keep], src_in_t[keep]
    extra = np.unique(src[~src_in_t])  # N(T) ∩ static, outside T
    extra_pos = static.positions(extra)
    n_t = len(t_nodes)

    def local(ids: np.ndarray, part: np.ndarray, inside: np.ndarray) -> np.ndarray:
        out = np.empty(len(ids), dtype=np.int64)
        out[inside] = ids[inside] + base[part[inside]]
        out[~inside] = n_t + np.searchsorted(extra, ids[~inside])
        return out

    # Edges into T (every destination in T, partitions ascending).
    dst_part = np.repeat(np.asarray(parts), [len(in_edges[p]) for p in parts])[keep]
    t_src = local(src, src_part, src_in_t)
    t_dst = dst + base[dst_part]
    # In-edges of the extra static nodes, from the static cache, kept when their
    # source lies in T or among the extra nodes: a chunk of in-lists at a time.
    s_sources, s_dst = _static_in_edges(static, extra, extra_pos, in_t, offsets, chunk_edges)
    s_local = local(*s_sources)
    nodes = np.concatenate([t_nodes, extra])
    all_src = np.concatenate([t_src, s_local])
    all_dst = np.concatenate([t_dst, s_dst + n_t])
    # Destinations come in sorted runs (one per source partition): a stable sort
    # by destination is nearly linear and keeps each row's sources in order.
    by = np.argsort(all_dst, kind="stable")
    indices = all_src[by]
    indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(all_dst, minlength=len(nodes)), out=indptr[1:])
    x = None
    slots: dict[int, np.ndarray] = {}
    if store.has("features"):
        if static.features is None:
            raise InputError("has features but no static_features.npy", store.path)
        x = np.empty((len(nodes), static.features.shape[1]), dtype=static.features.dtype)
        row = 0
        for p in parts:
            size = int(offsets[p + 1] - offsets[p])
            slots[p] = x[row : row + size]
            row += size
            if p in resident:
                slots[p][...] = resident[p].features
            else:
                began = time.perf_counter()
                store.read_rows("features", [(int(offsets[p]), int(offsets[p + 1]))], slots[p])
                read_seconds += time.perf_counter() - began
                nbytes += slots[p].nbytes
        x[row:] = static.features[extra_pos]
    pieces = {p: PartitionData(slots.get(p), in_edges[p]) for p in parts} if keep_pieces else {}
    return MegaBatch(
        parts,
        nodes,
        indptr,
        indices,
        x,
        pieces,
        nbytes,
        len(missing),
        time.perf_counter() - started,
        read_seconds,
    )
