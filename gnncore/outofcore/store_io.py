"""Bounded reads and writes of the partitioned-store writer
(:func:`gnncore.outofcore.store.write_partitioned_store`).

Nothing here maps a whole file. Rows are read with ``pread`` (the C++ block
reader, the GIL released) into buffers of a given size, in ascending file
order, and the pages read are dropped from the page cache after each block
(``posix_fadvise(POSIX_FADV_DONTNEED)``), so a feature file many times the
memory budget passes through one block at a time. Outputs are written with
``pwrite`` from those buffers; every ``sync_bytes`` written the file is synced
and its pages dropped, so dirty page cache (which a cgroup charges) stays below
that bound too. The files are byte for byte what ``np.save`` writes.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.store.npy import NpyFile, inspect_npy
from gnncore.store.page_cache import drop_cache, drop_written

#: Gaps between wanted rows read through rather than skipped (bytes), within
#: the bound of as many extra rows as wanted ones per block.
_READ_THROUGH = 64 << 10
_HASH_BLOCK = 8 << 20


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while len(data):
        done = os.pwrite(fd, data, offset)
        data, offset = data[done:], offset + done


class NpyWriter:
    """A ``.npy`` file of ``shape`` items of ``dtype`` written in blocks of rows,
    appended (:meth:`append`) or placed (:meth:`write_at`); the header is
    ``np.save``'s. Every ``sync_bytes`` written the file is synced and its pages
    dropped from the page cache. :meth:`close` checks every row was written."""

    def __init__(self, path: Path, dtype: Any, shape: tuple[int, ...], sync_bytes: int) -> None:
        self.path, self.dtype, self.shape = path, np.dtype(dtype), tuple(shape)
        self.row_bytes = self.dtype.itemsize * math.prod(self.shape[1:])
        self.sync_bytes = max(int(sync_bytes), 1)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": self.shape,
        }
        with open(path, "r+b", buffering=0) as fh:  # the header alone, as np.save writes it
            np.lib.format.write_array_header_1_0(fh, header)
            self.offset = fh.tell()
        self.rows_appended = 0
        self.bytes_written = 0
        self._unsynced = 0

    def append(self, rows: np.ndarray) -> None:
        """Write ``rows`` after the rows appended so far."""
        self.write_at(self.rows_appended, rows)
        self.rows_appended += len(rows)

    def write_at(self, row: int, rows: np.ndarray) -> None:
        """Write ``rows`` (cast to the file's dtype) as rows ``row, row + 1, ...``."""
        data = np.ascontiguousarray(rows, dtype=self.dtype)
        if data.size == 0:
            return
        raw = data.reshape(-1).view(np.uint8).data
        _pwrite_all(self.fd, raw, self.offset + row * self.row_bytes)
        self.bytes_written += data.nbytes
        self._unsynced += data.nbytes
        if self._unsynced >= self.sync_bytes:
            self.sync()

    def sync(self) -> None:
        """Write the dirty pages back and drop the file's pages from the cache."""
        drop_written(self.fd)
        self._unsynced = 0

    def close(self) -> None:
        """Sync, drop the pages and close; ``RuntimeError`` when fewer bytes were
        written than the shape holds (a bug, never a user error)."""
        try:
            expected = self.row_bytes * (self.shape[0] if self.shape else 1)
            if self.bytes_written != expected:
                raise RuntimeError(
                    f"{self.path}: wrote {self.bytes_written} of {expected} data bytes"
                )
            self.sync()
        finally:
            os.close(self.fd)


def _read_ranges(
    src: NpyFile, fd: int, starts: np.ndarray, counts: np.ndarray, out: np.ndarray
) -> None:
    """Rows ``starts[k] : starts[k] + counts[k]`` of ``src`` (not overlapping),
    concatenated into ``out``; then their pages are dropped. One range is read
    with the C++ block reader (sequential, read ahead); several are scattered,
    so they are read with ``pread`` on ``fd``, which is advised of random reads:
    read-ahead would fetch the rows between them, many times over."""
    row_bytes = src.dtype.itemsize * math.prod(src.shape[1:])
    offsets = (src.offset + starts.astype(np.int64) * row_bytes).astype(np.int64)
    lengths = (counts.astype(np.int64) * row_bytes).astype(np.int64)
    if len(offsets) == 0:
        return
    flat = out.reshape(-1).view(np.uint8)
    if len(offsets) == 1:
        _C.read_ranges(os.fspath(src.path), offsets, lengths, flat, sequential_hint=True)
    else:
        view, done = flat.data, 0
        for offset, length in zip(offsets.tolist(), lengths.tolist(), strict=True):
            got = os.preadv(fd, [view[done : done + length]], offset)
            if got != length:
                raise InputError(f"ends early (truncated) at byte {offset + got}", src.path)
            done += length
    drop_cache(fd, int(offsets.min()), int((offsets + lengths).max() - offsets.min()))


def open_random(path: Path) -> int:
    """``path`` opened for reading, the kernel advised of random reads (no read-ahead)."""
    fd = os.open(path, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        except OSError:
            pass
    return fd


def _covering_ranges(ids: np.ndarray, gap_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, counts, position)`` of the ranges that read the sorted ``ids``:
    adjacent ids share a range, and so do ids at most ``gap_rows`` apart, the
    narrowest gaps first, while the rows read through stay at most ``len(ids)``.
    ``position[m]``: the row of ``ids[m]`` among the rows the ranges read."""
    if len(ids) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    extra = np.diff(ids) - 1  # rows read through when the neighbours share a range
    merge = extra <= 0
    near = np.flatnonzero((extra > 0) & (extra <= gap_rows))
    if len(near):
        near = near[np.argsort(extra[near], kind="stable")]
        merge[near[np.cumsum(extra[near]) <= len(ids)]] = True
    first = np.concatenate(([0], np.flatnonzero(~merge) + 1))
    last = np.concatenate((first[1:] - 1, [len(ids) - 1]))
    starts, counts = ids[first], ids[last] - ids[first] + 1
    base = np.cumsum(counts) - counts
    which = np.repeat(np.arange(len(first)), last - first + 1)
    return starts, counts, ids - starts[which] + base[which]


def gather_rows(src: NpyFile, index: np.ndarray, out: NpyWriter, block_rows: int) -> None:
    """Append ``src[index]`` (rows, cast to ``out``'s dtype) to ``out``,
    ``block_rows`` rows at a time: each block's rows are read in ascending file
    order (at most twice its rows), and their pages dropped after."""
    row_bytes = src.dtype.itemsize * math.prod(src.shape[1:])
    gap_rows = max(1, _READ_THROUGH // max(row_bytes, 1))
    fd = open_random(src.path)
    try:
        for begin in range(0, len(index), max(1, block_rows)):
            block = np.asarray(index[begin : begin + max(1, block_rows)], dtype=np.int64)
            perm = np.argsort(block, kind="stable")
            starts, counts, position = _covering_ranges(block[perm], gap_rows)
            buffer = np.empty((int(counts.sum()), *src.shape[1:]), dtype=src.dtype)
            _read_ranges(src, fd, starts, counts, buffer)
            rows = np.empty((len(block), *src.shape[1:]), dtype=out.dtype)
            rows[perm] = buffer[position]
            del buffer
            out.append(rows)
    finally:
        os.close(fd)


def scatter_rows(src: NpyFile, position: np.ndarray, out: NpyWriter, chunk_rows: int) -> None:
    """Write row ``v`` of ``src`` (cast to ``out``'s dtype) as row
    ``position[v]`` of ``out`` (rows with ``position[v] < 0`` are skipped): one
    sequential read of ``src`` in chunks of ``chunk_rows`` rows, each chunk's
    rows written run by run of consecutive positions (one run a partition when
    the positions group the rows by partition in id order)."""
    step = max(1, int(chunk_rows))
    buffer = np.empty((min(step, src.shape[0]), *src.shape[1:]), dtype=src.dtype)
    fd = os.open(src.path, os.O_RDONLY)
    try:
        for lo in range(0, src.shape[0], step):
            hi = min(lo + step, src.shape[0])
            wanted = position[lo:hi]
            rows = np.flatnonzero(wanted >= 0)
            if len(rows) == 0:
                continue
            first = int(rows[0])
            chunk = buffer[: hi - lo - first]
            _read_ranges(src, fd, np.array([lo + first]), np.array([len(chunk)]), chunk)
            by = np.argsort(wanted[rows], kind="stable")
            target = wanted[rows[by]]
            picked = chunk[rows[by] - first]
            heads = np.concatenate(([0], np.flatnonzero(np.diff(target) != 1) + 1, [len(by)]))
            for a, b in zip(heads[:-1], heads[1:], strict=True):
                out.write_at(int(target[a]), picked[a:b])
            del picked
    finally:
        os.close(fd)


def row_pieces(
    indptr: np.ndarray, rows: np.ndarray, piece_edges: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The adjacency entries of ``rows`` (in that order) cut into pieces of at
    most ``piece_edges`` entries (a row longer than that is cut too): yields
    ``(first, counts, starts)``: the piece holds ``counts[k]`` entries of row
    ``rows[first + k]`` from entry ``starts[k]`` of ``indices`` on."""
    degree = indptr[rows + 1] - indptr[rows]
    bounds = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(degree, out=bounds[1:])
    del degree
    total, step = int(bounds[-1]), max(1, int(piece_edges))
    for lo in range(0, total, step):
        hi = min(lo + step, total)
        a = int(np.searchsorted(bounds, lo, side="right")) - 1
        b = int(np.searchsorted(bounds, hi, side="left"))
        first = np.maximum(bounds[a:b], lo)
        counts = np.minimum(bounds[a + 1 : b + 1], hi) - first
        yield a, counts, indptr[rows[a:b]] + (first - bounds[a:b])


def read_entries(src: NpyFile, fd: int, counts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The ``indices`` entries of one :func:`row_pieces` piece, concatenated
    (adjacent ranges read as one), pages dropped after."""
    keep = counts > 0
    counts, starts = counts[keep], starts[keep]
    out = np.empty(int(counts.sum()), dtype=src.dtype)
    if len(starts):
        joined = np.concatenate(([True], starts[1:] != starts[:-1] + counts[:-1]))
        heads = np.flatnonzero(joined)
        _read_ranges(src, fd, starts[heads], np.add.reduceat(counts, heads), out)
    return out


def npy_entry_streamed(path: Path) -> dict[str, Any]:
    """The manifest entry of a written ``.npy`` file (as
    :func:`gnncore.store.manifest.npy_entry`: bytes, sha256, dtype, shape), its
    pages dropped from the cache while it is hashed."""
    info = inspect_npy(path)
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        done = 0
        while chunk := fh.read(_HASH_BLOCK):
            digest.update(chunk)
            done += len(chunk)
            drop_cache(fh.fileno(), 0, done)
    return {
        "bytes": path.stat().st_size,
        "sha256": digest.hexdigest(),
        "dtype": info.dtype.str,
        "shape": list(info.shape),
    }


def bucket_counts(
    indptr: np.ndarray, indices: NpyFile, assignment: np.ndarray, parts: int, piece_edges: int
) -> np.ndarray:
    """Edges per bucket ``(i, j)`` at ``j·parts + i`` (destination-major), read
    in pieces of ``piece_edges`` entries."""
    counts = np.zeros(parts * parts, dtype=np.int64)
    n = len(indptr) - 1
    fd = os.open(indices.path, os.O_RDONLY)
    try:
        for first, lengths, starts in row_pieces(indptr, np.arange(n, dtype=np.int64), piece_edges):
            src = read_entries(indices, fd, lengths, starts)
            dst_part = np.repeat(assignment[first : first + len(lengths)], lengths)
            key = dst_part.astype(np.int64) * parts + assignment[src]
            counts += np.bincount(key, minlength=parts * parts)
    finally:
        os.close(fd)
    return counts


def write_buckets(
    indptr: np.ndarray,
    indices: NpyFile,
    node_map: np.ndarray,
    assignment: np.ndarray,
    bucket_offsets: np.ndarray,
    out: NpyWriter,
    piece_edges: int,
) -> None:
    """Write every edge ``(src, dst)`` (new ids) into its bucket's rows of ``out``
    (``bucket_offsets`` bounds the buckets). One sequential read of ``indices``
    in pieces of ``piece_edges`` entries: the destinations come in old-id order,
    which within a partition is new-id order, and each row's sources in id
    order, so each piece, sorted by ``(bucket, dst, src)``, continues each of its
    buckets where the pieces before it stopped."""
    parts = int(round(math.sqrt(len(bucket_offsets) - 1)))
    cursor = np.array(bucket_offsets[:-1], dtype=np.int64)
    fd = os.open(indices.path, os.O_RDONLY)
    n = len(indptr) - 1
    try:
        for first, lengths, starts in row_pieces(indptr, np.arange(n, dtype=np.int64), piece_edges):
            src_old = read_entries(indices, fd, lengths, starts)
            dst_old = np.repeat(np.arange(first, first + len(lengths), dtype=np.int64), lengths)
            bucket = assignment[dst_old] * parts + assignment[src_old]
            src, dst = node_map[src_old], node_map[dst_old]
            del src_old, dst_old
            by = np.lexsort((src, dst, bucket))
            bucket, rows = bucket[by], np.stack([src[by], dst[by]], axis=1)
            del src, dst, by
            heads = np.concatenate(([0], np.flatnonzero(np.diff(bucket)) + 1, [len(bucket)]))
            for a, b in zip(heads[:-1], heads[1:], strict=True):
                k = int(bucket[a])
                out.write_at(int(cursor[k]), rows[a:b])
                cursor[k] += b - a
    finally:
        os.close(fd)
    if not np.array_equal(cursor, bucket_offsets[1:]):  # pragma: no cover - a bug, not input
        raise RuntimeError("edge buckets were not filled exactly")


def write_lists(
    indptr: np.ndarray,
    indices: NpyFile,
    rows: np.ndarray,
    node_map: np.ndarray,
    out: NpyWriter,
    piece_edges: int,
) -> None:
    """Append the in-neighbour lists of ``rows`` (old ids), in new ids, to ``out``."""
    fd = open_random(indices.path)
    try:
        for _, lengths, starts in row_pieces(indptr, rows, piece_edges):
            out.append(node_map[read_entries(indices, fd, lengths, starts)])
    finally:
        os.close(fd)
