"""``indptr.npy``, ``indices.npy`` and ``eid.npy`` written on background threads,
row range after row range, each range checked
(:class:`~gnncore.store.write_checks.CsrChecks`) from the buffers as it is
written, instead of the final validation reading the files back.

The files are written past the page cache
(:class:`~gnncore.store.direct_write.DirectWriter`). Keys in memory: hashed
from the buffers on the writing threads. Copying
the 20M-edge graph's 480 MB of ``indices``/``eid`` into fresh page-cache pages
cost these threads more (0.6 CPU s) than hashing them (0.24 s), and the shuffle
after them is one thread: 2.44 -> 2.05 s as a process (docs/BENCHMARKS.md,
session 31). Keys on disk (a billion edges): ``eid`` (two thirds of the bytes,
``hash_later``) is hashed from its file afterwards, read past the cache too
(:func:`~gnncore.store.direct_read.sha256_past_cache`), on the writer's
hashing thread, beside the shuffle; ``indices`` as written. There the CSR
phase is CPU-bound: with both hashed in it the billion took 221.7 and 225.8 s
against 213.2 and 215.4 (session 31). But with both read back the shuffle
waits on the disk (session 39: 42 of its 48 s busy reading 28.5 GB)."""

from __future__ import annotations

import hashlib
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

import numpy as np

from gnncore.io.bounded.npy_stream import npy_header
from gnncore.store.direct_write import DirectWriter
from gnncore.store.write_checks import CsrChecks
from gnncore.store.writer import GraphDirWriter


class CsrSink:
    """The CSR's files of ``writer``, written in order by background threads: one
    for ``indptr`` and ``indices`` (and the checks), one for ``eid``, so the two
    files' hashing and copying run side by side.

    ``indptr`` (the offsets, in memory) is written at once; :meth:`put` queues
    a row range's ``indices`` and ``eid``; :meth:`close` waits for them, hands
    the files' sha256s to ``writer`` (:meth:`GraphDirWriter.set_digest`, or,
    for the files named in ``hash_later``, starts them on its hashing thread)
    and records the passed checks (:meth:`GraphDirWriter.record_check`)."""

    def __init__(
        self,
        writer: GraphDirWriter,
        indptr: np.ndarray,
        int_dtype: Any,
        num_canonical: int,
        hash_later: tuple[str, ...] = (),
    ) -> None:
        self._writer = writer
        num_edges = int(indptr[-1])
        self._checks = CsrChecks(indptr, len(indptr) - 1, num_canonical)
        # (name, file, its sha256 as written: None when hashed from the file afterwards)
        self._files: list[tuple[str, DirectWriter, Any]] = []
        self._pools: list[ThreadPoolExecutor] = []
        self._queued: list[Future[None]] = []
        try:
            for name, dtype, shape in (
                ("indptr.npy", np.int64, indptr.shape),
                ("indices.npy", int_dtype, (num_edges,)),
                ("eid.npy", np.int64, (num_edges,)),
            ):
                out = DirectWriter(writer.file_path(name, "npy"))
                header = npy_header(dtype, shape)
                sha = None if name in hash_later else hashlib.sha256(header)
                self._files.append((name, out, sha))
                out.write(header)
            self._pools = [
                ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"gnncore-csr-{name}")
                for name in ("indices", "eid")
            ]
        except BaseException:
            self.abort()
            raise
        self._queued.append(self._pools[0].submit(self._write_whole, 0, indptr))

    def put(self, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> RangeWritten:
        """Queue rows ``[row, end)`` (the ranges in order), whose entries are the
        C-contiguous ``indices`` and ``eid``: checked, then appended to their
        files. The arrays must not change until the returned handle's
        :meth:`~RangeWritten.result` has returned."""
        parts = (
            self._pools[0].submit(self._indices, row, end, indices, eid),
            self._pools[1].submit(self._write, 2, eid),
        )
        self._queued.extend(parts)
        return RangeWritten(parts)

    def _indices(self, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> None:
        self._checks.rows(row, end, indices, eid)
        self._write(1, indices)

    def _write_whole(self, which: int, array: np.ndarray) -> None:
        """The file's whole data: written, and closed (its buffers go at once)."""
        self._write(which, array)
        self._files[which][1].close()

    def _write(self, which: int, array: np.ndarray) -> None:
        _, out, sha = self._files[which]
        data = np.ascontiguousarray(array).data.cast("B")
        if sha is not None:
            sha.update(data)  # hashlib releases the GIL
        out.write(data)

    def close(self) -> None:
        """Wait for every queued range (raising the first error), close the files,
        hand their sha256s to ``writer`` and record the checks that passed."""
        for done in self._queued:
            done.result()
        self._queued.clear()
        for pool in self._pools:
            pool.shutdown(wait=True)
        for name, out, sha in self._files:
            out.close()
            if sha is None:
                self._writer.hash_in_background(name, past_cache=out.direct)
                continue
            digest: Future[str] = Future()
            digest.set_result(sha.hexdigest())
            self._writer.set_digest(name, digest)
        for check in self._checks.results():
            self._writer.record_check(check)

    def abort(self) -> None:
        """Drop what is queued and close the files (on an error)."""
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        for _, out, _ in self._files:
            out.abort()

    def __enter__(self) -> CsrSink:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.abort()
        else:
            self.close()


class RangeWritten:
    """A queued range of :meth:`CsrSink.put`: :meth:`result` waits until both of
    its files have it (raising the first error)."""

    def __init__(self, parts: tuple[Future[None], ...]) -> None:
        self._parts = parts

    def result(self) -> None:
        for part in self._parts:
            part.result()
