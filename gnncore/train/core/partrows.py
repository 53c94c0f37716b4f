r"""A layer's input rows for batches inside one part: the part's own rows in one
sequential read, the sources of its cut edges in one sorted pass.

Over a graph numbered part by part (a partitioned store's order), layer-wise
inference (:func:`~gnncore.train.core.layerwise.layerwise_inference`) runs its
batches part by part (:func:`~gnncore.train.core.nodebatches.part_batches`).
:class:`PartRows` holds the part's input rows (one sequential read) while its
batches run. The other rows a batch needs are the sources of edges the
partition cuts; they are spread over the rest of the file. Read one 4 KiB page
at a time as the batches ask for them, they cost one storage round trip each.
With a ranges reader (:data:`RangesSource`) :class:`PartRows` reads them
ahead instead, for a window of the part's targets at a time
(:func:`cut_window`: as many targets as keep the rows under a share of the
budget): the window's cut sources, sorted and deduplicated
(:func:`gather_rows`), nearby rows coalesced into one read
(:func:`coalesce`), the reads issued by several threads at once so the device
sees a queue of requests, not one at a time. The rows are the same
(bit for bit); only the order and size of the reads change.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np
import torch

from gnncore.train.core.layerstore import read_npy_header

#: ``rows(n_id) -> [len(n_id), C]`` float rows of a layer's input (``n_id`` int64, CPU).
RowSource = Callable[[torch.Tensor], torch.Tensor]
#: ``read_range(lo, hi) -> [hi - lo, C]``: rows ``lo .. hi - 1`` of a layer's input
#: in one sequential read (what ``RowSource`` gives for ``arange(lo, hi)``).
RangeSource = Callable[[int, int], torch.Tensor]
#: ``read_ranges(ranges) -> [sum(hi - lo), C]``: the rows of each ``(lo, hi)`` row
#: of the int64 ``[k, 2]`` array ``ranges``, concatenated; safe to call from
#: several threads at once (each call reads its ranges in ascending order).
RangesSource = Callable[[np.ndarray], torch.Tensor]

#: Rows closer than this many bytes are read in one request with the rows
#: between them: one page, what an ``O_DIRECT`` read of either row transfers
#: anyway. Wider gaps save requests but read through the file where cut rows
#: are dense: on 1 KiB rows with one row in 15 needed, a 16 KiB gap read 36.1 GB
#: of ranges for 8.0 GB of rows, 4 KiB 12.3 GB; on 2 KiB rows with 16 threads
#: the 16 KiB gap gained 6% in rows/s for 2.1x the bytes (docs/BENCHMARKS.md).
MERGE_GAP_BYTES = 4 << 10
#: Bytes of coalesced ranges one reading thread takes at a time.
GROUP_BYTES = 4 << 20
#: Reading threads: requests in flight at once (4 KiB direct reads of sorted
#: rows on the 2-core VM: 6,155 rows/s from one thread, 31,481 from 4, 41,957 from 16).
READ_THREADS = 16
#: ``pread`` size of :func:`npy_ranges` (each thread's ``O_DIRECT`` bounce buffer).
READ_CHUNK_BYTES = 1 << 20


class HasNodes(Protocol):
    """What :class:`PartRows` reads of a block: its first target and node ids."""

    @property
    def start(self) -> int: ...

    @property
    def stop(self) -> int: ...

    @property
    def n_id(self) -> torch.Tensor: ...


def coalesce(
    ids: np.ndarray,
    row_bytes: int,
    gap_bytes: int = MERGE_GAP_BYTES,
    max_bytes: int = GROUP_BYTES,
) -> np.ndarray:
    """The int64 ``[k, 2]`` row ranges ``(lo, hi)`` covering the ascending, unique
    row ids ``ids``, each from one id to another: consecutive ids less than
    ``gap_bytes`` apart (counting the rows between them) share one range, so
    one read returns both, and no range spans more than ``max_bytes`` (or one
    row), so reading one takes bounded memory."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    if n == 0:
        return np.zeros((0, 2), dtype=np.int64)
    gap_rows = max(gap_bytes // max(row_bytes, 1), 0)
    span = max(max_bytes // max(row_bytes, 1), 1)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = np.diff(ids) - 1 > gap_rows
    run_first = ids[np.maximum.accumulate(np.where(new_run, np.arange(n), 0))]
    piece = (ids - run_first) // span  # a long run is cut every ``span`` rows
    starts = np.flatnonzero(new_run | np.concatenate([[True], np.diff(piece) != 0]))
    stops = np.append(starts[1:], n)
    return np.stack([ids[starts], ids[stops - 1] + 1], axis=1)


def _groups(ranges: np.ndarray, row_bytes: int, group_bytes: int) -> list[tuple[int, int]]:
    """``(i, j)``: runs of ``ranges[i:j]`` of about ``group_bytes`` each (one range
    or more per group)."""
    size = (ranges[:, 1] - ranges[:, 0]) * row_bytes
    ends = np.cumsum(size)
    out, i = [], 0
    while i < len(ranges):
        base = int(ends[i - 1]) if i else 0
        j = int(np.searchsorted(ends, base + group_bytes, side="right"))
        j = max(j, i + 1)
        out.append((i, j))
        i = j
    return out


def gather_rows(
    read_ranges: RangesSource,
    ids: np.ndarray,
    width: int,
    row_bytes: int,
    *,
    threads: int = READ_THREADS,
    gap_bytes: int = MERGE_GAP_BYTES,
    group_bytes: int = GROUP_BYTES,
) -> torch.Tensor:
    """The rows ``ids`` (ascending, unique) as one ``[len(ids), width]`` tensor, in
    one sorted pass: :func:`coalesce`\\ d ranges, split into groups of about
    ``group_bytes`` that ``threads`` threads read at once (memory beyond the
    result: ``threads`` groups)."""
    ids = np.asarray(ids, dtype=np.int64)
    ranges = coalesce(ids, row_bytes, gap_bytes, group_bytes)
    groups = _groups(ranges, row_bytes, group_bytes)
    out: torch.Tensor | None = None
    firsts = np.searchsorted(ids, ranges[:, 0])  # the first id of each range

    def read(group: tuple[int, int]) -> None:
        nonlocal out
        i, j = group
        rows = read_ranges(ranges[i:j])
        a, b = int(firsts[i]), int(firsts[j]) if j < len(ranges) else len(ids)
        starts = ranges[i:j, 0]
        lengths = ranges[i:j, 1] - starts
        base = np.cumsum(lengths) - lengths  # each range's first row in ``rows``
        r = np.searchsorted(starts, ids[a:b], side="right") - 1
        if out is None:  # the first group fixes the dtype
            out = torch.empty(len(ids), width, dtype=rows.dtype)
        out[a:b] = rows[torch.from_numpy(base[r] + ids[a:b] - starts[r])]

    if groups:
        read(groups[0])
    if len(groups) > 1:
        with ThreadPoolExecutor(max(1, min(threads, len(groups) - 1))) as pool:
            list(pool.map(read, groups[1:]))
    return out if out is not None else torch.empty(0, width, dtype=torch.float32)


def npy_ranges(path: str | os.PathLike[str], direct: bool = True) -> RangesSource:
    """A :data:`RangesSource` of the C-order ``.npy`` file ``path``: the ranges in one
    call of ``pread``\\ s (``O_DIRECT`` where the file system allows, so the rows
    read do not stay in the page cache; the GIL released), in
    :data:`READ_CHUNK_BYTES` requests."""
    from gnncore import _C

    with open(path, "rb") as f:
        shape, _, dtype = read_npy_header(f)
        header = f.tell()
    row_shape = tuple(int(d) for d in shape[1:])
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    name = os.fspath(path)

    def read(ranges: np.ndarray) -> torch.Tensor:
        ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        lengths = (ranges[:, 1] - ranges[:, 0]) * row_bytes
        out = np.empty((int(lengths.sum()) // max(row_bytes, 1), *row_shape), dtype=dtype)
        if out.nbytes:
            offsets = header + ranges[:, 0] * row_bytes
            _C.read_ranges(
                name,
                np.ascontiguousarray(offsets),
                np.ascontiguousarray(lengths),
                out.reshape(-1).view(np.uint8),
                chunk_bytes=READ_CHUNK_BYTES,
                sequential_hint=False,
                direct=direct,
            )
        return torch.from_numpy(out)

    return read


def in_edge_entries(indptr: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR positions of the edges into ``nodes`` (int64, node by node, each
    node's in their stored order) and each node's in-degree."""
    degree = indptr[nodes + 1] - indptr[nodes]
    offsets = np.cumsum(degree) - degree
    entries = np.repeat(indptr[nodes] - offsets, degree) + np.arange(int(degree.sum()))
    return entries, degree


def cut_window(
    indptr: np.ndarray,
    indices: np.ndarray,
    start: int,
    stop: int,
    part: tuple[int, int],
    max_rows: int,
    nodes: np.ndarray | None = None,
) -> tuple[int, np.ndarray]:
    """``(end, ids)``: the longest run of targets ``start .. end - 1`` (``end`` at
    most ``stop``, at least ``start + 1``) whose in-edges from outside the part
    ``[lo, hi)`` have at most ``max_rows`` distinct sources (a single target's
    may have more), and those sources, ascending. With ``nodes`` (ascending node
    ids) targets are positions in ``nodes``, else node ids."""
    lo, hi = part
    if nodes is None:
        e0 = int(indptr[start])
        ptr = np.asarray(indptr[start : stop + 1], dtype=np.int64) - e0
        src = np.asarray(indices[e0 : e0 + int(ptr[-1])], dtype=np.int64)
    else:
        entries, degree = in_edge_entries(np.asarray(indptr, dtype=np.int64), nodes[start:stop])
        ptr = np.concatenate([[0], np.cumsum(degree)])
        src = np.asarray(indices[entries], dtype=np.int64)
    outside = np.flatnonzero((src < lo) | (src >= hi))
    ids, first = np.unique(src[outside], return_index=True)
    if len(ids) <= max_rows:
        return stop, ids
    # the edge whose source is the (max_rows + 1)-th distinct one ends the window
    over = int(outside[np.sort(first)[max_rows]])
    end = start + max(int(np.searchsorted(ptr, over, side="right")) - 1, 1)
    keep = outside[outside < int(ptr[end - start])]
    return end, np.unique(src[keep])


class PartRows:
    """A layer's input rows for batches that each lie inside one part of
    ``bounds`` (:func:`~gnncore.train.core.nodebatches.part_batches`, parts in
    order): when a batch enters a part whose rows take at most
    ``cache_bytes``, they are read once (``read_range``: one sequential read)
    and held until the next part; a block's rows inside the part come from
    them. The others (sources of the edges cut by the partition) come from
    ``read`` one batch at a time, or, with ``read_ranges`` and ``adjacency``
    (``(indptr, indices)``), for a window of the part's targets at once
    (:func:`cut_window`, at most ``cache_bytes // 2`` of rows;
    :func:`gather_rows`). A part too large, or no ``read_range``: every row
    from ``read``.

    With ``targets`` (ascending node ids: the nodes a layer computes when it
    computes some only) a block's ``start`` and ``stop`` are positions in
    ``targets``, not node ids."""

    def __init__(
        self,
        read: RowSource,
        read_range: RangeSource | None,
        bounds: np.ndarray,
        cache_bytes: int,
        width: int,
        *,
        read_ranges: RangesSource | None = None,
        adjacency: tuple[np.ndarray, np.ndarray] | None = None,
        row_bytes: int | None = None,
        targets: np.ndarray | None = None,
    ) -> None:
        self.read, self.read_range, self.bounds = read, read_range, np.asarray(bounds)
        self.cache_bytes, self.width = cache_bytes, width
        self.read_ranges, self.adjacency = read_ranges, adjacency
        self.row_bytes = row_bytes if row_bytes is not None else width * 4
        self.targets = targets
        self.part, self.lo, self.hi, self.part_stop = -1, 0, 0, 0
        self.rows: torch.Tensor | None = None
        self.cut_end = 0  # targets before it have their cut rows in ``cut``
        self.cut_ids = np.zeros(0, dtype=np.int64)
        self.cut: torch.Tensor | None = None
        self.cut_rows_read = 0

    def _enter(self, part: int) -> None:
        self.part, self.rows, self.cut, self.cut_end = part, None, None, 0
        lo, hi = int(self.bounds[part]), int(self.bounds[part + 1])
        targets = self.targets
        self.part_stop = hi if targets is None else int(np.searchsorted(targets, hi))
        if self.read_range is not None and (hi - lo) * self.width * 4 <= self.cache_bytes:
            self.rows, self.lo, self.hi = self.read_range(lo, hi), lo, hi

    def _cut_rows(self, blk: HasNodes) -> None:
        """Read the cut rows of the window starting at ``blk`` when ``blk`` ends past
        the current one."""
        if self.read_ranges is None or self.adjacency is None or blk.stop <= self.cut_end:
            return
        self.cut = None  # let the last window go before reading the next
        indptr, indices = self.adjacency
        max_rows = max(self.cache_bytes // 2 // max(self.width * 4, 1), 1)
        part = (self.lo, self.hi)
        targets, stop = self.targets, self.part_stop
        end, ids = cut_window(indptr, indices, blk.start, stop, part, max_rows, targets)
        if end < blk.stop:  # one batch's cut rows exceed the window: that batch's alone
            end, ids = cut_window(indptr, indices, blk.start, blk.stop, part, len(indices), targets)
        self.cut_ids, self.cut_end = ids, end
        self.cut = gather_rows(self.read_ranges, self.cut_ids, self.width, self.row_bytes)
        self.cut_rows_read += len(self.cut_ids)

    def __call__(self, blk: HasNodes) -> torch.Tensor:
        first = blk.start if self.targets is None else int(self.targets[blk.start])
        part = int(np.searchsorted(self.bounds, first, side="right")) - 1
        if part != self.part:
            self._enter(part)
        if self.rows is None:
            return self.read(blk.n_id)
        n_id = blk.n_id
        inside = (n_id >= self.lo) & (n_id < self.hi)
        if bool(inside.all()):
            return self.rows[n_id - self.lo]
        out = torch.empty(len(n_id), self.rows.size(1), dtype=self.rows.dtype)
        out[inside] = self.rows[n_id[inside] - self.lo]
        others = n_id[~inside]
        self._cut_rows(blk)
        if self.cut is not None:
            at = torch.from_numpy(np.searchsorted(self.cut_ids, others.numpy()))
            out[~inside] = self.cut[at].to(self.rows.dtype)
        else:
            out[~inside] = self.read(others).to(self.rows.dtype)
        return out

    def release(self) -> None:
        self.rows = None
        self.cut = None
