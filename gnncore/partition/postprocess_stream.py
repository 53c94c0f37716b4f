"""The partition directory written in bounded memory (issue: scale past memory).

:func:`write_postprocessed` writes what :func:`~gnncore.partition.store.write_partition_dir`
writes for an assignment and the arrays of :func:`~gnncore.partition.postprocess.postprocess_arrays`
-- the same files, byte for byte, and the same manifest -- without holding the
graph: O(|V|) arrays (the assignment and the relabelling maps) plus

* one chunk of edge rows: the edge cut and the 1-hop halos come from
  sequential reads of ``edges_shuffled.npy`` (C++ ``_C.edge_pass``, a chunk at
  a time), never from the CSR or a copy of the edges;
* the halo bits of a group of parts, ``ceil(N / 64)`` words per part: as many
  parts per read as ``halo_budget`` bytes hold (at least one), so a large
  ``p`` takes more reads, not more memory. Each halo file is then written from
  its bits a block at a time.

The reference it is tested against, the in-memory path it replaces, is
:mod:`gnncore.testing.postprocess_reference`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.partition.base import part_offsets, part_order
from gnncore.partition.metrics import (
    EDGE_CHUNK_ROWS,
    PartitionMetrics,
    graph_edge_file,
    partition_metrics,
)
from gnncore.partition.postprocess import _checked_assignment
from gnncore.partition.store import (
    NpyStream,
    PartitionDir,
    PartitionDirWriter,
    partition_dir_writer,
)
from gnncore.store import GraphDir
from gnncore.typing import require_csrc

#: Bytes of halo bits one read of the edges may fill (``ceil(N / 64) · 8`` per part).
HALO_BUDGET = 64 << 20
#: Words of halo bits turned into node ids at a time (64 ids per word).
BITS_BLOCK_WORDS = 1 << 15
#: ``gnncore partition --memory-budget``'s default: the buffers below.
DEFAULT_MEMORY_BUDGET = 128 << 20
#: The least budget taken: a chunk of 4096 rows, the smallest halo and sort buffers.
MIN_MEMORY_BUDGET = 1 << 20


@dataclass(frozen=True)
class StreamBuffers:
    """How the post-processing spends a memory budget beyond its O(|V|) arrays.

    Attributes:
        chunk_rows (int): Edge rows per read (an eighth of the budget, as
            int64 rows, at most 2^20).
        halo_budget (int): Bytes of halo bits per read of the edges (half).
        sort_budget (int): Bytes of the external sort that builds a symmetric
            CSR for the split balancing of directed graphs (a quarter).
    """

    chunk_rows: int
    halo_budget: int
    sort_budget: int

    @classmethod
    def of(cls, budget: int) -> StreamBuffers:
        """The buffers of ``budget`` bytes (:data:`MIN_MEMORY_BUDGET` at least)."""
        budget = int(budget)
        if budget < MIN_MEMORY_BUDGET:
            raise ValueError(
                f"the post-processing needs a memory budget of at least "
                f"{MIN_MEMORY_BUDGET >> 20} MiB, got {budget} bytes"
            )
        return cls(
            chunk_rows=min(EDGE_CHUNK_ROWS, budget // 8 // 16),
            halo_budget=budget // 2,
            sort_budget=budget // 4,
        )


@dataclass(frozen=True)
class Postprocessed:
    """What :func:`write_postprocessed` wrote.

    Attributes:
        partition (PartitionDir): The directory, opened against the graph.
        metrics (PartitionMetrics): Cut and balance of the assignment.
        halo_sizes (list[int]): Halo nodes of each part.
        edge_reads (int): Sequential reads of the edge file it took.
        seconds (float): Wall time of the writing.
    """

    partition: PartitionDir
    metrics: PartitionMetrics
    halo_sizes: list[int]
    edge_reads: int
    seconds: float


def halo_parts_per_read(num_nodes: int, parts: int, halo_budget: int = HALO_BUDGET) -> int:
    """Parts whose halo bits (``ceil(N / 64)`` uint64 words each) one read of the
    edges fills within ``halo_budget`` bytes: at least 1, at most ``parts``."""
    per_part = max(1, (num_nodes + 63) // 64) * 8
    return max(1, min(parts, halo_budget // per_part))


def _members(bits: np.ndarray, block_words: int) -> tuple[int, list[tuple[int, int]]]:
    """Set bits of ``bits`` (uint64 words) in total, and the non-empty blocks."""
    total, blocks = 0, []
    for start in range(0, len(bits), block_words):
        block = bits[start : start + block_words]
        count = int(np.unpackbits(block.view(np.uint8)).sum(dtype=np.int64))
        if count:
            blocks.append((start, start + len(block)))
            total += count
    return total, blocks


def write_bitset(stream: NpyStream, bits: np.ndarray, blocks: list[tuple[int, int]]) -> None:
    """Append the ids of the set bits of ``bits`` (bit ``w % 64`` of word
    ``w // 64`` stands for id ``w``), ascending, a block of words at a time."""
    for start, end in blocks:
        unpacked = np.unpackbits(bits[start:end].view(np.uint8), bitorder="little")
        stream.append(np.flatnonzero(unpacked).astype(np.int64, copy=False) + 64 * start)


def write_postprocessed(
    out_dir: str | os.PathLike[str],
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    info: dict[str, Any],
    chunk_rows: int = EDGE_CHUNK_ROWS,
    halo_budget: int = HALO_BUDGET,
) -> Postprocessed:
    """Atomically write the partition directory of ``assignment`` to ``out_dir``:
    ``assignment.npy``, ``relabel_new_of_old.npy``, ``relabel_old_of_new.npy``,
    ``offsets.npy`` (:func:`~gnncore.partition.postprocess.relabel`),
    ``halo_<i>.npy`` for every part, and the manifest holding ``info`` plus the
    ``metrics`` and ``halo_sizes`` found on the way.

    Args:
        out_dir: The partition directory to create or replace.
        graph (GraphDir): The graph the assignment is of.
        assignment (np.ndarray): ``int64[N]`` with values in ``[0, parts)``.
        parts (int): Number of parts.
        info (dict): Manifest entries (method, options, timings, ...).
        chunk_rows (int): Edge rows per read.
        halo_budget (int): Bytes of halo bits per read of the edges
            (:func:`halo_parts_per_read`).
    """
    require_csrc()
    started = time.perf_counter()
    n = graph.num_nodes
    a = _checked_assignment(assignment, parts, n)
    edges = graph_edge_file(graph).spec()
    group = halo_parts_per_read(n, parts, halo_budget)
    cut: int | None = None
    sizes: list[int] = []
    reads = 0
    with partition_dir_writer(out_dir, graph) as writer:
        writer.save_assignment(a)
        _write_relabelling(writer, a, parts)
        for first in range(0, parts, group):
            count = min(group, parts - first)
            found = _C.edge_pass(
                edges, a, parts, halo_first=first, halo_count=count, chunk_rows=chunk_rows
            )
            reads += 1
            cut = int(found.cut)
            bits = np.asarray(found.halo_bits).reshape(count, found.words)
            for k in range(count):
                total, blocks = _members(bits[k], BITS_BLOCK_WORDS)
                with writer.stream(f"halo_{first + k}", np.int64, total) as stream:
                    write_bitset(stream, bits[k], blocks)
                sizes.append(total)
            del found, bits
        metrics = partition_metrics(graph, a, parts, cut=cut)
        writer.write_manifest({**info, "metrics": metrics.to_dict(), "halo_sizes": sizes})
    partition = PartitionDir.open(out_dir, graph)
    return Postprocessed(partition, metrics, sizes, reads, time.perf_counter() - started)


def _write_relabelling(writer: PartitionDirWriter, a: np.ndarray, parts: int) -> None:
    """The maps of :func:`~gnncore.partition.postprocess.relabel`, each written
    and dropped before the next is made (at most two ``int64[N]`` at once)."""
    n = len(a)
    old_of_new = part_order(a, parts)
    writer.save("relabel_old_of_new", old_of_new)
    new_of_old = np.empty(n, dtype=np.int64)
    step = 1 << 20
    for start in range(0, n, step):  # new_of_old[old_of_new] = arange(n), in blocks
        stop = min(start + step, n)
        new_of_old[old_of_new[start:stop]] = np.arange(start, stop, dtype=np.int64)
    del old_of_new
    writer.save("relabel_new_of_old", new_of_old)
    del new_of_old
    writer.save("offsets", part_offsets(a, parts))


__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "HALO_BUDGET",
    "Postprocessed",
    "StreamBuffers",
    "halo_parts_per_read",
    "write_bitset",
    "write_postprocessed",
]
