"""GREM's final k-way refinement: size-constrained label propagation over the
whole partition, run as streaming passes over the graph's symmetric CSR.

The recursive bisection decides each node's part with the edges of one
bisection at a time; on graphs without planted communities (heavy-tailed,
bipartite) it leaves many nodes with more neighbours in another final part
than in their own. :func:`refine_kway` sweeps the CSR (``indptr.npy``,
``indices.npy``) in blocks of rows, each read (not mapped) into a buffer of at
most ``block_entries`` neighbour ids, and moves each node, in C++ with the GIL
released (``_C.grem_kway_lp_block``), to the part holding most of its
neighbours among the parts below the cap ``ceil((1 + imbalance) · N / p)``
when that removes cut edges (or keeps the cut and evens the sizes out). It
never breaks the cap, so a balanced partition stays balanced, and never adds a
cut edge. Passes repeat until one removes fewer than ``min_gain`` of the
graph's undirected edges.

Then one coarse level (``coarse=True``), a V-cycle of two levels: a few
sweeps of size-constrained label-propagation clustering *inside* the parts
(clusters of at most :data:`CLUSTER_WEIGHT` nodes that never straddle two
parts), the cluster graph counted in one streaming pass over the edge file
(:func:`~gnncore.partition.grem.plan.cluster_graph_edges`), the same
label propagation over the clusters (weighed by their nodes, their edges by
the graph edges between them) and the projection back, followed by node
passes again. Moving a whole cluster escapes the local optimum of the node
moves, which on heavy-tailed graphs is 1-1.5 points of cut above what a
multilevel partitioner finds (docs/BENCHMARKS.md, "GREM on heavy-tailed
graphs").

Memory: the labels (8 B/node, the partitioner's own, and a copy of 1 B/node
for up to 127 parts that the node passes read and write), the part sizes, one
block of ``indptr`` rows and one block of ``indices`` (the chunk's memory:
:func:`block_entries_for` gives ``2 · chunk`` neighbour ids, as many as a
GREM chunk's adjacency); the coarse level adds the cluster of every node, its
weight and a counting scratch (24 B/node) and the cluster graph (48 B per
pair of adjacent clusters while its CSR is built, 32 B after), so it runs
only on graphs of at most :data:`COARSE_MAX_EDGES` edges.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnncore import _C
from gnncore.partition.base import part_label_dtype
from gnncore.partition.edge_stream import EdgeFile
from gnncore.partition.grem.plan import cluster_graph_edges
from gnncore.store.npy import advise, inspect_npy

INDPTR_ROWS = 1 << 18
"""Rows of ``indptr`` read at a time."""
MIN_BLOCK_ENTRIES = 1 << 16
"""Smallest block of neighbour ids a pass reads."""
CLUSTER_WEIGHT = 100
"""Nodes a cluster of the coarse level holds at most."""
CLUSTER_SWEEPS = 2
"""Clustering sweeps of the coarse level."""
COARSE_MAX_EDGES = 1 << 22
"""Largest graph (undirected edges) whose refinement runs the coarse level:
its cluster graph is held in memory (48 B per pair of adjacent clusters
while its CSR is built), which bigger graphs,
partitioned in a chunk's memory, cannot afford; they get the node passes."""


@dataclass
class RefineRecord:
    """What :func:`refine_kway` did.

    Attributes:
        passes (int): Passes run.
        moves (list[int]): Nodes moved by each pass.
        gains (list[int]): Cut edges each pass removed.
        seconds (float): Wall time of all passes.
        block_entries (int): Neighbour ids read per block at most.
        clusters (int): Clusters of the coarse level (0: none ran).
        coarse_moves (list[int]): Clusters moved by each coarse pass.
        coarse_gains (list[int]): Cut edges each coarse pass removed.
    """

    passes: int = 0
    moves: list[int] = field(default_factory=list)
    gains: list[int] = field(default_factory=list)
    seconds: float = 0.0
    block_entries: int = 0
    clusters: int = 0
    coarse_moves: list[int] = field(default_factory=list)
    coarse_gains: list[int] = field(default_factory=list)


def block_entries_for(chunk_edges: int) -> int:
    """Neighbour ids a refinement block holds for GREM chunks of ``chunk_edges``
    undirected edges: the chunk's adjacency, ``2 · chunk_edges`` (at least
    :data:`MIN_BLOCK_ENTRIES`)."""
    return max(2 * int(chunk_edges), MIN_BLOCK_ENTRIES)


def _read(fh: object, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
    fd = fh.fileno()  # type: ignore[attr-defined]
    data = os.pread(fd, count * dtype.itemsize, offset)
    if len(data) != count * dtype.itemsize:
        raise OSError(f"short read at byte {offset} of {getattr(fh, 'name', '?')}")
    return np.frombuffer(data, dtype=dtype)


def csr_blocks(
    graph_path: Path, block_entries: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(first_row, indptr block, indices block)`` over the whole CSR of the
    graph directory ``graph_path``, each block at most ``block_entries``
    neighbour ids (or one row, when a single row holds more)."""
    ptr_file, idx_file = (
        inspect_npy(graph_path / "indptr.npy"),
        inspect_npy(graph_path / "indices.npy"),
    )
    num_nodes = ptr_file.shape[0] - 1
    with open(ptr_file.path, "rb") as ptr_fh, open(idx_file.path, "rb") as idx_fh:
        advise(idx_fh.fileno(), 0, 0, "POSIX_FADV_SEQUENTIAL")
        row = 0
        while row < num_nodes:
            count = min(INDPTR_ROWS, num_nodes - row) + 1
            ptr = _read(
                ptr_fh, ptr_file.offset + row * ptr_file.dtype.itemsize, ptr_file.dtype, count
            )
            ptr = ptr.astype(np.int64, copy=False)
            end = int(np.searchsorted(ptr, ptr[0] + block_entries, side="right")) - 1
            end = max(end, 1)  # at least one row
            lo, hi = int(ptr[0]), int(ptr[end])
            offset = idx_file.offset + lo * idx_file.dtype.itemsize
            indices = _read(idx_fh, offset, idx_file.dtype, hi - lo)
            # the disk reads the next block (as large) while the caller works on this one
            size = (hi - lo) * idx_file.dtype.itemsize
            advise(idx_fh.fileno(), offset + size, size, "POSIX_FADV_WILLNEED")
            yield row, np.ascontiguousarray(ptr[: end + 1]), indices
            row += end


def _node_passes(
    path: Path,
    labels: np.ndarray,
    sizes: np.ndarray,
    cap: int,
    max_passes: int,
    block_entries: int,
    least_gain: float,
    record: RefineRecord,
) -> None:
    # The passes read every neighbour's label at random: in 1 or 2 bytes a node
    # rather than 8 (at 100M nodes, 100 MB instead of 800), copied back after.
    narrow = part_label_dtype(len(sizes))
    work = labels.astype(narrow) if narrow in (np.int8, np.int16) else labels
    for _ in range(max_passes):
        moves = gain = 0
        for first, ptr, idx in csr_blocks(path, block_entries):
            m, g = _C.grem_kway_lp_block(ptr, idx, first, work, sizes, int(cap))
            moves, gain = moves + m, gain + g
        record.passes += 1
        record.moves.append(int(moves))
        record.gains.append(int(gain))
        if gain < least_gain:
            break
    if work is not labels:
        labels[:] = work


def _clusters(path: Path, labels: np.ndarray, block_entries: int) -> tuple[np.ndarray, int]:
    """Clusters inside the parts: ``(cluster int64[N] in [0, k), k)``."""
    n = labels.shape[0]
    cluster = np.arange(n, dtype=np.int64)
    weight = np.ones(n, dtype=np.int64)
    scratch = np.zeros(n, dtype=np.int64)
    for _ in range(CLUSTER_SWEEPS):
        moves = 0
        for first, ptr, idx in csr_blocks(path, block_entries):
            moves += _C.grem_kway_cluster_block(
                ptr, idx, first, labels, cluster, weight, CLUSTER_WEIGHT, scratch
            )
        if moves == 0:
            break
    del scratch
    used = weight > 0  # renumber the clusters that kept nodes to 0..k-1
    new_id = np.cumsum(used) - 1
    return new_id[cluster], int(used.sum())


def _coarse_level(
    path: Path,
    labels: np.ndarray,
    parts: int,
    cap: int,
    max_passes: int,
    block_entries: int,
    least_gain: float,
    record: RefineRecord,
) -> None:
    """One V-cycle: cluster inside the parts, move whole clusters, project back."""
    cluster, k = _clusters(path, labels, block_entries)
    record.clusters = k
    edges = EdgeFile.from_npy(path / "edges_shuffled.npy")
    keys, counts, _ = cluster_graph_edges(edges, cluster, k, max(block_entries // 2, 1))
    weight = np.bincount(cluster, minlength=k).astype(np.int64)
    part = np.empty(k, dtype=np.int64)
    part[cluster] = labels  # clusters never straddle two parts
    indptr, heads, counts = _C.grem_coarse_csr(keys, counts.astype(np.int64, copy=False), k)
    del keys
    sizes = np.bincount(part, weights=weight, minlength=parts).astype(np.int64)
    for _ in range(max_passes):
        m, g = _C.grem_kway_lp_weighted(indptr, heads, counts, weight, part, sizes, int(cap))
        record.coarse_moves.append(int(m))
        record.coarse_gains.append(int(g))
        if g < least_gain:
            break
    np.take(part, cluster, out=labels)


def refine_kway(
    graph_path: str | os.PathLike[str],
    labels: np.ndarray,
    parts: int,
    cap: int,
    max_passes: int = 8,
    block_entries: int = 1 << 22,
    min_gain: float = 0.0005,
    coarse: bool = True,
) -> RefineRecord:
    """Size-constrained label propagation over the partition ``labels``, in
    place: node passes, then (``coarse``) one coarse level of clusters and
    node passes again (module docstring).

    Args:
        graph_path: The graph directory (its ``indptr.npy``, ``indices.npy``
            and, for the coarse level, ``edges_shuffled.npy``).
        labels: int64[N], every node's part in ``[0, parts)``; updated in place.
        parts: Number of parts.
        cap: Largest part allowed; a node never moves into a part that holds it.
        max_passes: Passes at most of each round (0: none).
        block_entries: Neighbour ids read per block at most.
        min_gain: A round stops after a pass that removes fewer cut edges than
            this fraction of the graph's undirected edges.
        coarse: Run the coarse level and the node passes after it (on graphs
            of at most :data:`COARSE_MAX_EDGES` undirected edges).

    Returns:
        The :class:`RefineRecord` of the passes.
    """
    if labels.dtype != np.int64 or not labels.flags.c_contiguous:
        raise ValueError("labels must be a C-contiguous int64 array")
    path = Path(graph_path)
    started = time.perf_counter()
    record = RefineRecord(block_entries=int(block_entries))
    if max_passes > 0:
        edges = inspect_npy(path / "indices.npy").shape[0] // 2
        least = min_gain * edges
        sizes = np.bincount(labels, minlength=parts).astype(np.int64)
        _node_passes(path, labels, sizes, cap, max_passes, block_entries, least, record)
        if coarse and edges <= COARSE_MAX_EDGES:
            _coarse_level(path, labels, parts, cap, max_passes, block_entries, least, record)
            sizes = np.bincount(labels, minlength=parts).astype(np.int64)
            _node_passes(path, labels, sizes, cap, max_passes, block_entries, least, record)
    record.seconds = time.perf_counter() - started
    return record
