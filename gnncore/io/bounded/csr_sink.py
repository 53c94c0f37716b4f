"""``indptr.npy``, ``indices.npy`` and ``eid.npy`` written on a background thread,
row range after row range, each range checked
(:class:`~gnncore.store.write_checks.CsrChecks`) from the buffers as it is
written, instead of the final validation reading the files back.

Their sha256s are not taken from the buffers but from the files once they are
complete, on the writer's hashing thread
(:meth:`~gnncore.store.writer.GraphDirWriter.hash_in_background`): during the CSR
both cores are busy (the merge, this thread and Polars' ``edges.parquet``),
while the shuffle that follows is one thread; hashed there, the 480 MB of the
20M-edge graph's ``indices``/``eid`` cost a read from the page cache but no
time on the critical path (docs/BENCHMARKS.md, session 17)."""

from __future__ import annotations

import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np

from gnncore.io.bounded.npy_stream import npy_header
from gnncore.prefault import Prefaulter
from gnncore.store.write_checks import CsrChecks
from gnncore.store.writer import GraphDirWriter


class CsrSink:
    """The CSR's files of ``writer``, written in order by one background thread.

    ``indptr`` (the offsets, in memory) is written at once; :meth:`put` queues
    a row range's ``indices`` and ``eid``; :meth:`close` waits for them, starts
    the files' sha256 (:meth:`GraphDirWriter.hash_in_background`) and records
    the passed checks (:meth:`GraphDirWriter.record_check`)."""

    def __init__(
        self, writer: GraphDirWriter, indptr: np.ndarray, int_dtype: Any, num_canonical: int
    ) -> None:
        self._writer = writer
        num_edges = int(indptr[-1])
        self._checks = CsrChecks(indptr, len(indptr) - 1, num_canonical)
        self._files: list[tuple[str, BinaryIO]] = []
        self._expected: list[int] = []
        self._written: list[int] = []
        for name, dtype, shape in (
            ("indptr.npy", np.int64, indptr.shape),
            ("indices.npy", int_dtype, (num_edges,)),
            ("eid.npy", np.int64, (num_edges,)),
        ):
            fh = open(writer.file_path(name, "npy"), "w+b")  # read too: mapped (below)
            self._files.append((name, fh))
            header = npy_header(dtype, shape)
            fh.write(header)
            self._written.append(len(header))
            self._expected.append(len(header) + int(np.prod(shape)) * np.dtype(dtype).itemsize)
        self._cache = _PageCacheAhead(self._files[1][1], self._files[2][1], int_dtype, num_edges)
        self._done_entries = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-csr-write")
        self._queued: list[Future[None]] = [self._pool.submit(self._write, 0, indptr)]

    def put(self, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> Future[None]:
        """Queue rows ``[row, end)`` (the ranges in order), whose entries are the
        C-contiguous ``indices`` and ``eid``: checked, then appended to their
        files. The arrays must not change until the future is done."""
        done = self._pool.submit(self._range, row, end, indices, eid)
        self._queued.append(done)
        return done

    def _range(self, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> None:
        self._done_entries += len(indices)
        self._cache.advance(self._done_entries)
        self._checks.rows(row, end, indices, eid)
        self._write(1, indices)
        self._write(2, eid)

    def _write(self, which: int, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).data.cast("B")
        self._files[which][1].write(data)
        self._written[which] += len(data)

    def close(self) -> None:
        """Wait for every queued range (raising the first error), close the files,
        start their sha256 on ``writer``'s hashing thread and record the checks
        that passed."""
        for done in self._queued:
            done.result()
        self._queued.clear()
        self._pool.shutdown(wait=True)
        self._cache.close()
        for (name, fh), written, expected in zip(
            self._files, self._written, self._expected, strict=True
        ):
            fh.close()
            if written != expected:  # the file was sized ahead: a short one would hide
                raise RuntimeError(f"{name}: wrote {written} bytes of {expected}")
            self._writer.hash_in_background(name)
        for check in self._checks.results():
            self._writer.record_check(check)

    def abort(self) -> None:
        """Drop what is queued and close the files (on an error)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._cache.close()
        for _, fh in self._files:
            fh.close()

    def __enter__(self) -> CsrSink:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.abort()
        else:
            self.close()


PAGE_CACHE_AHEAD_ENTRIES = 8 << 20
"""The most CSR entries whose page cache :class:`_PageCacheAhead` populates ahead of
the sink (96 MB of ``indices`` and ``eid`` with int32 indices)."""
PAGE_CACHE_MIN_ENTRIES = 1 << 20
"""CSRs of fewer entries are written without it."""


class _PageCacheAhead:
    """The page cache of ``indices.npy`` and ``eid.npy``, populated ahead of the sink.

    Writing a file fills fresh page-cache pages, and the first touch of fresh
    memory is what costs most here (:mod:`gnncore.prefault`: on the development
    VM, 480 MB of CSR took the sink's thread over a second of system time).
    Both files are sized up front (their headers are written and their sizes are
    known) and mapped shared; a :class:`~gnncore.prefault.Prefaulter` faults
    their pages in for writing (zeros, in the page cache) on its own thread,
    ahead of the entries the sink has queued, so the sink's writes only copy.
    The sink checks at the end that it wrote every byte of the sized files."""

    def __init__(self, indices: BinaryIO, eid: BinaryIO, int_dtype: Any, entries: int) -> None:
        self._maps: list[mmap.mmap] = []
        self._faults: Prefaulter | None = None
        if entries < PAGE_CACHE_MIN_ENTRIES:
            return
        views = []
        try:
            for fh, dtype in ((indices, np.dtype(int_dtype)), (eid, np.dtype(np.int64))):
                fh.flush()
                header = fh.tell()
                size = header + entries * dtype.itemsize
                os.ftruncate(fh.fileno(), size)
                flags, access = mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
                mapped = mmap.mmap(fh.fileno(), size, flags, access)
                self._maps.append(mapped)
                views.append(np.frombuffer(mapped, dtype=dtype, count=entries, offset=header))
        except (OSError, ValueError):  # a file system that cannot map: the sink writes alone
            views.clear()
            self.close()
            return
        self._faults = Prefaulter(views, PAGE_CACHE_AHEAD_ENTRIES)
        self._faults.advance(0)

    def advance(self, entries: int) -> None:
        """The sink has been given ``entries`` entries: populate ahead of them."""
        if self._faults is not None:
            self._faults.advance(entries)

    def close(self) -> None:
        """Stop populating and unmap (the files keep what was written); idempotent."""
        if self._faults is not None:
            self._faults.close()
            self._faults = None  # the views go with it, so the maps can close
        for mapped in self._maps:
            mapped.close()
        self._maps.clear()
