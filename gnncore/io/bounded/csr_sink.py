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

from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np

from gnncore.io.bounded.npy_stream import npy_header
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
        for name, dtype, shape in (
            ("indptr.npy", np.int64, indptr.shape),
            ("indices.npy", int_dtype, (num_edges,)),
            ("eid.npy", np.int64, (num_edges,)),
        ):
            fh = open(writer.file_path(name, "npy"), "wb")
            self._files.append((name, fh))
            fh.write(npy_header(dtype, shape))
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
        self._checks.rows(row, end, indices, eid)
        self._write(1, indices)
        self._write(2, eid)

    def _write(self, which: int, array: np.ndarray) -> None:
        self._files[which][1].write(np.ascontiguousarray(array).data.cast("B"))

    def close(self) -> None:
        """Wait for every queued range (raising the first error), close the files,
        start their sha256 on ``writer``'s hashing thread and record the checks
        that passed."""
        for done in self._queued:
            done.result()
        self._queued.clear()
        self._pool.shutdown(wait=True)
        for name, fh in self._files:
            fh.close()
            self._writer.hash_in_background(name)
        for check in self._checks.results():
            self._writer.record_check(check)

    def abort(self) -> None:
        """Drop what is queued and close the files (on an error)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
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
