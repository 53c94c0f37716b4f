"""The memory budget and the disk room of the partitioned-store writer
(:func:`gnncore.outofcore.store.build_partitioned_store`).

The writer holds a few arrays of one entry per node (the relabelling, the
partition of each node, ``indptr``, the static set's selection): its fixed
overhead, :data:`FIXED_BYTES_PER_NODE` bytes a node at its peak, on top of what
the process holds when the stage starts (measured). The rest of the budget
sizes its buffers (:func:`store_buffers`): feature rows per block, adjacency
entries per piece, and the dirty bytes written between syncs. A budget that
leaves less than :data:`MIN_BUFFER_BYTES` is refused before anything is read,
naming the budget and the minimum; so is a disk without room for the store.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnncore.errors import InputError
from gnncore.sizes import format_size
from gnncore.usage import StageUsage, current_rss_bytes

if TYPE_CHECKING:  # the store module imports this one
    from gnncore.outofcore.store import PartitionedStore

#: Bytes a node the writer holds at its peak: old→new and new→old ids, the
#: partition of each node, ``indptr``, and the temporaries of the relabelling
#: sort and of the static set's degree sort (int64 each).
FIXED_BYTES_PER_NODE = 72
#: The least the buffers may get: below it the budget is refused.
MIN_BUFFER_BYTES = 8 << 20
#: Beyond this the buffers stop paying (reads and writes are sequential already).
MAX_BUFFER_BYTES = 2 << 30
#: Working memory of one adjacency entry in a piece (ids read, mapped, the
#: bucket key, the sort's permutation and the sorted pair rows).
EDGE_BYTES = 128
#: Working memory of one feature row in a block beyond its bytes (the ids, the
#: sort's permutation and positions).
ROW_OVERHEAD = 64


@dataclass(frozen=True)
class StoreBuffers:
    """How much the store writer holds at a time.

    Attributes:
        feature_rows: Feature rows gathered per block (read at most twice over).
        edge_rows: Adjacency entries per piece (bucket counts, edge buckets,
            the static set's lists).
        sync_bytes: Bytes written to an output between syncs that write its
            dirty pages back and drop them from the page cache.
    """

    feature_rows: int
    edge_rows: int
    sync_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {
            "feature_rows": self.feature_rows,
            "edge_rows": self.edge_rows,
            "sync_bytes": self.sync_bytes,
        }


def fixed_overhead(num_nodes: int, parts: int) -> int:
    """The process's memory now plus the writer's per-node and per-bucket arrays."""
    return current_rss_bytes() + FIXED_BYTES_PER_NODE * (num_nodes + 1) + 32 * parts * parts


def store_buffers(budget: int | None, fixed: int, feature_row_bytes: int) -> StoreBuffers:
    """Buffers from what ``budget`` leaves after ``fixed`` (``None``: the
    largest), for feature rows of ``feature_row_bytes`` bytes as stored.

    Raises:
        InputError: The budget leaves less than :data:`MIN_BUFFER_BYTES`.
    """
    if budget is None:
        rest = MAX_BUFFER_BYTES
    else:
        rest = budget - fixed
        if rest < MIN_BUFFER_BYTES:
            raise InputError(
                f"memory budget {format_size(budget)} is below the "
                f"{format_size(fixed + MIN_BUFFER_BYTES)} the store writer needs "
                f"({format_size(fixed)} fixed: this process's memory and "
                f"{FIXED_BYTES_PER_NODE} bytes a node; {format_size(MIN_BUFFER_BYTES)} "
                "of buffers); give it a larger --memory-budget"
            )
        rest = min(rest, MAX_BUFFER_BYTES)
    sync = min(max(rest // 8, 1 << 20), 256 << 20)
    work = rest - sync
    # Rows are read at most twice over and pass through the page cache once.
    row = 4 * feature_row_bytes + feature_row_bytes + ROW_OVERHEAD
    return StoreBuffers(
        feature_rows=max(1, work // row), edge_rows=max(1, work // EDGE_BYTES), sync_bytes=sync
    )


def free_disk_bytes(path: str | os.PathLike[str]) -> int:
    """Free bytes on the file system that holds ``path`` (or would: its
    nearest existing ancestor)."""
    target = Path(path).absolute()
    while not target.exists():
        target = target.parent
    return shutil.disk_usage(target).free


def check_disk(out_dir: str | os.PathLike[str], needed: int) -> None:
    """Refuse (:class:`InputError` naming both figures) when the file system of
    ``out_dir`` has less than ``needed`` bytes free (the store is written
    beside ``out_dir`` before it replaces it)."""
    free = free_disk_bytes(out_dir)
    if free < needed:
        raise InputError(
            f"the store needs about {format_size(needed)} of disk, and its file system "
            f"has {format_size(free)} free",
            Path(out_dir),
        )


@dataclass
class StoreReport:
    """A store written (or reused) and what it cost.

    Attributes:
        store: The store, opened.
        reused: Whether a complete store with the same stage key was reused.
        memory_budget_bytes: The budget the buffers were sized from (``None``:
            none given).
        fixed_bytes: The fixed overhead measured (process memory at the start
            plus the per-node arrays).
        buffers: The buffers used (``None`` when reused).
        disk_estimate_bytes: The disk the store was estimated to need (0 when reused).
        usage: Wall time, peak RSS and storage bytes of the stage.
    """

    store: PartitionedStore
    reused: bool
    memory_budget_bytes: int | None
    fixed_bytes: int
    buffers: StoreBuffers | None
    disk_estimate_bytes: int
    usage: StageUsage

    def to_dict(self) -> dict[str, Any]:
        """The figures, JSON-ready (the store as its path)."""
        return {
            "store": str(self.store.path),
            "reused": self.reused,
            "memory_budget_bytes": self.memory_budget_bytes,
            "fixed_bytes": self.fixed_bytes,
            "buffers": None if self.buffers is None else self.buffers.to_dict(),
            "disk_estimate_bytes": self.disk_estimate_bytes,
            **self.usage.to_dict(),
        }
