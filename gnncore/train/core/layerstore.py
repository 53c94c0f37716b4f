r"""Where layer-wise inference keeps a layer's output: in memory, or on disk.

Layer-wise inference (:mod:`gnncore.train.core.layerwise`) computes layer ``l``
for every node before layer ``l + 1`` reads it, so between two layers it
holds one ``[N, C]`` array. In memory that is ``N · C · 4`` bytes (100M nodes
at 256 wide: 100 GB). :func:`plan_inference` compares it with a memory
budget: when it fits, the array stays a tensor (the fast path); when not, each
layer goes to a file on disk (:class:`DiskLayer`) and the node batches are
sized from the budget, so memory is one batch plus the page cache the kernel
can reclaim.

Layer files are NumPy ``.npy`` files (``float32``, C order, shape
``[num_nodes, width]``), one per layer, named ``layer-<l>.npy``, rows in node
order (the graph directory's order: a partitioned graph's nodes are numbered
part by part, so a batch's in-neighbours are mostly a few nearby row ranges).
A file is written sequentially under ``layer-<l>.npy.partial`` and renamed
when its last row is in, read memory-mapped by the next layer, and deleted
once that layer is complete. Written pages are flushed and dropped from the
page cache every :attr:`DiskLayer.sync_bytes`, so dirty pages never pile up
against a memory limit.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from gnncore.store.page_cache import drop_cache, drop_written

#: Bytes of one layer-output entry (float32).
ENTRY_BYTES = 4
#: Working memory of one batch per (block node + block edge) per channel, in
#: entries: the block's input rows and their normalised copy, the gathered
#: messages, the aggregate and the layer's outputs, with a margin of 2.
BATCH_ENTRIES_PER_ITEM = 12
#: The share of the budget one batch's block may take.
BATCH_SHARE = 0.5
#: Smallest budget accepted (the O(N) index arrays and the model come on top).
MIN_MEMORY_BUDGET = 16 << 20
#: In-edges per batch per target node, at most (the in-memory path's ratio).
EDGES_PER_TARGET = 64
#: Rows :meth:`DiskLayer.write_at` and :meth:`DiskLayer.fill` write at once.
ZERO_SPAN = 1 << 14
#: Bytes a spilled layer writes between flushes that drop them from the page cache.
SYNC_BYTES = 64 << 20


@dataclass(frozen=True)
class InferencePlan:
    """How layer-wise inference runs: batch limits and whether layers spill."""

    batch_size: int
    max_edges: int
    spill: bool
    layer_bytes: int  # of the in-memory path's layer arrays

    def to_dict(self) -> dict[str, int | bool]:
        return {
            "batch_size": self.batch_size,
            "max_edges": self.max_edges,
            "layers_on_disk": self.spill,
            "in_memory_layer_bytes": self.layer_bytes,
        }


def plan_inference(
    num_nodes: int,
    widths: tuple[int, ...],
    num_layers: int,
    batch_size: int,
    memory_budget: int | None,
    num_edges: int = 0,
) -> InferencePlan:
    """Keep the layers in memory when the ``[N, C]`` arrays held at once (the
    previous layer's and the one being filled) take at most half of
    ``memory_budget`` (``None``: no budget, always); else put them on disk and
    size the batches so one batch's block needs about :data:`BATCH_SHARE` of
    it: ``nodes + edges`` items of the widest layer, split by the average
    in-degree (``num_edges / num_nodes``).

    Args:
        num_nodes (int): Nodes of the graph.
        widths (tuple): Channels of the model's input, hidden layers and output.
        num_layers (int): Message-passing layers.
        batch_size (int): Target nodes per batch asked for (an upper bound).
        memory_budget (int, optional): Bytes the inference may take.
        num_edges (int): Edges of the graph (in-edges of all nodes).
    """
    check_budget(memory_budget)
    held = min(max(num_layers - 1, 0), 2)
    hidden = max(widths[1:-1], default=0)
    layer_bytes = held * num_nodes * hidden * ENTRY_BYTES
    default = InferencePlan(batch_size, EDGES_PER_TARGET * batch_size, False, layer_bytes)
    if memory_budget is None or layer_bytes <= memory_budget // 2:
        return default
    items = int(memory_budget * BATCH_SHARE) // (BATCH_ENTRIES_PER_ITEM * ENTRY_BYTES * max(widths))
    degree = num_edges / max(num_nodes, 1)
    nodes = max(1, min(batch_size, int(items / (1 + min(degree, EDGES_PER_TARGET)))))
    edges = max(1, min(EDGES_PER_TARGET * nodes, items - nodes))
    return InferencePlan(nodes, edges, True, layer_bytes)


def read_npy_header(f: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` file open at its start;
    ``f`` is left at the first byte of the data."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    return np.lib.format.read_array_header_2_0(f)


def random_access_rows(path: str | os.PathLike[str]) -> np.ndarray:
    """The array of a ``.npy`` file, memory-mapped read-only with
    ``MADV_RANDOM``: a page fault reads that page alone, not the readahead
    window around it, so gathering scattered rows (a batch's in-neighbours)
    under a memory limit keeps the page cache for rows that are read.
    (A C-order, non-object array of any shape.)"""
    with open(path, "rb") as f:
        shape, fortran, dtype = read_npy_header(f)
        offset = f.tell()
        if fortran or dtype.hasobject:
            raise ValueError(f"{path}: not a C-order numeric array")
        count = int(np.prod(shape))
        if count == 0:
            return np.empty(shape, dtype=dtype)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)
    return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)


def check_budget(memory_budget: int | None) -> int | None:
    """``memory_budget``, or ``ValueError`` when below :data:`MIN_MEMORY_BUDGET`."""
    if memory_budget is not None and memory_budget < MIN_MEMORY_BUDGET:
        raise ValueError(f"must be at least {MIN_MEMORY_BUDGET} bytes, got {memory_budget}")
    return memory_budget


def read_npy_range(path: str | os.PathLike[str], lo: int, hi: int) -> torch.Tensor:
    """Rows ``lo .. hi - 1`` of a C-order float32 ``.npy`` file in one sequential
    read, then dropped from the page cache (they are held in memory now)."""
    with open(path, "rb") as f:
        shape, _, dtype = read_npy_header(f)
        row = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        start = f.tell() + lo * row
        f.seek(start)
        data = np.fromfile(f, dtype=dtype, count=(hi - lo) * row // dtype.itemsize)
        drop_cache(f.fileno(), start, (hi - lo) * row)
    return torch.from_numpy(data.reshape(hi - lo, *shape[1:]))


class MemoryLayer:
    """A layer's output as one ``[N, C]`` float32 CPU tensor."""

    def __init__(self, num_nodes: int, width: int) -> None:
        self.rows = torch.empty(num_nodes, width, dtype=torch.float32)

    def write(self, start: int, rows: torch.Tensor) -> None:
        self.rows[start : start + len(rows)] = rows.cpu()

    def write_at(self, nodes: torch.Tensor, rows: torch.Tensor) -> None:
        """Rows of the node ids ``nodes`` (the other rows are left unset)."""
        self.rows[nodes] = rows.cpu()

    def finish(self) -> MemoryLayer:
        return self

    def fill(self) -> MemoryLayer:
        """Nothing to complete: rows never written are never read."""
        return self

    def read(self, n_id: torch.Tensor) -> torch.Tensor:
        return self.rows[n_id]

    def read_range(self, lo: int, hi: int) -> torch.Tensor:
        """Rows ``lo .. hi - 1`` (a view)."""
        return self.rows[lo:hi]

    def release(self) -> None:
        self.rows = torch.empty(0, 0)


class DiskLayer:
    """A layer's output written row range by row range to ``path`` (``.npy``),
    then read memory-mapped (see the module docstring)."""

    def __init__(self, path: Path, num_nodes: int, width: int, sync_bytes: int) -> None:
        self.path, self.num_nodes, self.width = Path(path), num_nodes, width
        self.sync_bytes = max(sync_bytes, 1)
        self._partial = self.path.with_name(self.path.name + ".partial")
        self._file: BinaryIO | None = open(self._partial, "wb")  # noqa: SIM115  (closed in finish)
        header = {"descr": "<f4", "fortran_order": False, "shape": (num_nodes, width)}
        np.lib.format.write_array_header_1_0(self._file, header)
        self._next = 0
        self._unsynced = 0
        self._rows: np.ndarray | None = None

    def write(self, start: int, rows: torch.Tensor) -> None:
        """Append rows ``start .. start + len(rows) - 1`` (in order)."""
        if self._file is None or start != self._next or rows.shape[1:] != (self.width,):
            raise ValueError(f"{self.path.name}: rows from {start}, expected {self._next}")
        data = np.ascontiguousarray(rows.detach().cpu().numpy(), dtype="<f4")
        self._file.write(data.data)
        self._next += len(data)
        self._unsynced += data.nbytes
        if self._unsynced >= self.sync_bytes:
            self._drop_written()

    def write_at(self, nodes: torch.Tensor, rows: torch.Tensor) -> None:
        """Write ``rows`` at the ascending node ids ``nodes`` (none before the rows
        written so far), zeros in the rows between them: the layer of a subset
        (:func:`~gnncore.train.core.layerwise.layerwise_subset`), whose other rows
        no later layer reads. Written in spans of at most :data:`ZERO_SPAN` rows."""
        ids = nodes.numpy()
        rows = rows.detach().to("cpu", torch.float32)
        end = int(ids[-1]) + 1 if len(ids) else self._next
        done = 0
        while self._next < end:
            stop = min(self._next + ZERO_SPAN, end)
            upto = int(np.searchsorted(ids, stop))
            span = torch.zeros(stop - self._next, self.width, dtype=torch.float32)
            span[torch.from_numpy(ids[done:upto] - self._next)] = rows[done:upto]
            self.write(self._next, span)
            done = upto

    def fill(self) -> DiskLayer:
        """Zeros in the rows not written yet, then :meth:`finish`."""
        while self._file is not None and self._next < self.num_nodes:
            count = min(ZERO_SPAN, self.num_nodes - self._next)
            self.write(self._next, torch.zeros(count, self.width, dtype=torch.float32))
        return self.finish()

    def _drop_written(self) -> None:
        assert self._file is not None
        self._file.flush()
        drop_written(self._file.fileno())
        self._unsynced = 0

    def finish(self) -> DiskLayer:
        """Close the file (every row written) and put it in place, for reading."""
        if self._file is None:
            return self
        if self._next != self.num_nodes:
            raise RuntimeError(f"{self.path.name}: {self._next} of {self.num_nodes} rows written")
        self._drop_written()
        self._file.close()
        self._file = None
        os.replace(self._partial, self.path)
        return self

    def read_range(self, lo: int, hi: int) -> torch.Tensor:
        """Rows ``lo .. hi - 1`` in one sequential read (:func:`read_npy_range`)."""
        return read_npy_range(self.path, lo, hi)

    def read(self, n_id: torch.Tensor) -> torch.Tensor:
        """Rows ``n_id`` (copied out of the map)."""
        if self._rows is None:
            self._rows = random_access_rows(self.path)
        return torch.from_numpy(np.ascontiguousarray(self._rows[n_id.numpy()]))

    def release(self) -> None:
        """Close and delete the file (or the partial one of an interrupted layer)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._rows = None
        self._partial.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)


LayerOutput = MemoryLayer | DiskLayer


def new_layer_output(
    layer_dir: str | os.PathLike[str] | None,
    num_nodes: int,
    layer: int,
    width: int,
    sync_bytes: int = SYNC_BYTES,
) -> LayerOutput:
    """Layer ``layer``'s output: a :class:`MemoryLayer` without ``layer_dir``, else
    a :class:`DiskLayer` ``layer-<layer>.npy`` there."""
    if layer_dir is None:
        return MemoryLayer(num_nodes, width)
    return DiskLayer(Path(layer_dir) / f"layer-{layer}.npy", num_nodes, width, sync_bytes)
