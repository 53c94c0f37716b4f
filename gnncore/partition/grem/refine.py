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

Memory: the labels (8 B/node, the partitioner's own), the part sizes, one
block of ``indptr`` rows and one block of ``indices`` (the chunk's memory:
:func:`block_entries_for` gives ``2 · chunk`` neighbour ids, as many as a
GREM chunk's adjacency).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnncore import _C
from gnncore.store.npy import inspect_npy

INDPTR_ROWS = 1 << 18
"""Rows of ``indptr`` read at a time."""
MIN_BLOCK_ENTRIES = 1 << 16
"""Smallest block of neighbour ids a pass reads."""


@dataclass
class RefineRecord:
    """What :func:`refine_kway` did.

    Attributes:
        passes (int): Passes run.
        moves (list[int]): Nodes moved by each pass.
        gains (list[int]): Cut edges each pass removed.
        seconds (float): Wall time of all passes.
        block_entries (int): Neighbour ids read per block at most.
    """

    passes: int = 0
    moves: list[int] = field(default_factory=list)
    gains: list[int] = field(default_factory=list)
    seconds: float = 0.0
    block_entries: int = 0


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
            yield row, np.ascontiguousarray(ptr[: end + 1]), indices
            row += end


def refine_kway(
    graph_path: str | os.PathLike[str],
    labels: np.ndarray,
    parts: int,
    cap: int,
    max_passes: int = 8,
    block_entries: int = 1 << 22,
    min_gain: float = 0.0005,
) -> RefineRecord:
    """Size-constrained label propagation over the partition ``labels``, in place.

    Args:
        graph_path: The graph directory (its ``indptr.npy`` and ``indices.npy``).
        labels: int64[N], every node's part in ``[0, parts)``; updated in place.
        parts: Number of parts.
        cap: Largest part allowed; a node never moves into a part that holds it.
        max_passes: Passes at most (0: none).
        block_entries: Neighbour ids read per block at most.
        min_gain: Stop after a pass that removes fewer cut edges than this
            fraction of the graph's undirected edges.

    Returns:
        The :class:`RefineRecord` of the passes.
    """
    if labels.dtype != np.int64 or not labels.flags.c_contiguous:
        raise ValueError("labels must be a C-contiguous int64 array")
    path = Path(graph_path)
    sizes = np.bincount(labels, minlength=parts).astype(np.int64)
    record = RefineRecord(block_entries=int(block_entries))
    started = time.perf_counter()
    edges = inspect_npy(path / "indices.npy").shape[0] // 2
    for _ in range(max_passes):
        moves = gain = 0
        for first, ptr, idx in csr_blocks(path, block_entries):
            m, g = _C.grem_kway_lp_block(ptr, idx, first, labels, sizes, int(cap))
            moves, gain = moves + m, gain + g
        record.passes += 1
        record.moves.append(int(moves))
        record.gains.append(int(gain))
        if gain < min_gain * edges:
            break
    record.seconds = time.perf_counter() - started
    return record
