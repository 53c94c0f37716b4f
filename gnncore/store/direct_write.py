"""Large output files written sequentially past the page cache (``O_DIRECT``).

A buffered ``write`` copies every byte into a page of the page cache. On a
machine whose free memory is handed back to a hypervisor (a VM's balloon with
free page reporting: docs/BENCHMARKS.md, "What fresh memory costs on this VM")
those pages are fresh each time, and the copy of the 20M-edge graph's 640 MB
of CSR and shuffled pairs cost 0.6-0.8 CPU s, more than writing them to the
disk. The pages also stay cached after the write, counted in a memory cgroup's
usage, when bounded-memory ingestion is the very case where the output does
not fit in memory.

:class:`DirectWriter` stages the bytes in two aligned buffers, reused (warm),
and writes each whole with ``O_DIRECT`` while the other fills: the device reads
the buffer, no page is copied or cached. The last, partial block is written padded and the file cut
back to its length. Where the filesystem refuses ``O_DIRECT`` (tmpfs, some
overlays) it writes through the page cache as before; either way the file's
bytes are the same.
"""

from __future__ import annotations

import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

#: Alignment of the direct writes' offsets, lengths and buffer: a page, which is
#: a multiple of every block size Linux allows under it.
ALIGNMENT = mmap.PAGESIZE

#: The staging buffer's size: each direct write is this many bytes.
STAGING_BYTES = 8 << 20

#: Set to ``0`` to write through the page cache (the environment's switch,
#: read when a writer opens its file).
DIRECT_ENV = "GNNCORE_DIRECT_WRITE"


def direct_write_enabled() -> bool:
    """Whether :class:`DirectWriter` tries ``O_DIRECT`` (``GNNCORE_DIRECT_WRITE``
    unset or not ``0``) and the platform has it."""
    return hasattr(os, "O_DIRECT") and os.environ.get(DIRECT_ENV, "1") != "0"


class DirectWriter:
    """A new file at ``path`` written sequentially by :meth:`write`, past the page
    cache where the filesystem allows (:attr:`direct`; ``direct=False``: through
    it, as a plain file). Not thread-safe: one caller thread. :meth:`close` must
    be called for the file to be complete (its last partial block is written there).

    Direct writes wait for the device: two staging buffers take turns, one
    filled by :meth:`write` while a thread of the writer's own writes the other,
    so the caller's copies (and whatever it computes between them) overlap the I/O.
    """

    def __init__(
        self, path: str | os.PathLike[str], staging_bytes: int = STAGING_BYTES, direct: bool = True
    ) -> None:
        self.path = Path(path)
        self._fd = -1
        self.direct = False
        if direct and direct_write_enabled():
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT,
                                   0o644)  # fmt: skip
                self.direct = True
            except OSError:  # EINVAL: the filesystem has no direct I/O
                self._fd = -1
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        size = max(staging_bytes // ALIGNMENT, 1) * ALIGNMENT
        # page-aligned (anonymous maps), allocated once and reused: warm pages
        self._maps = [mmap.mmap(-1, size) for _ in range(2)] if self.direct else []
        self._turn = 0
        self._used = 0
        self._pending: Future[None] | None = None
        self._io = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-direct-write")
            if self.direct
            else None
        )
        self.written = 0
        """The bytes given to :meth:`write` so far."""

    @property
    def closed(self) -> bool:
        """Whether the file is closed (:meth:`close` or :meth:`abort`)."""
        return self._fd < 0

    def write(self, data: Any) -> None:
        """Append ``data`` (bytes, a memoryview or a C-contiguous array)."""
        view = memoryview(data).cast("B")
        if not self._maps:
            _write_all(self._fd, view)
            self.written += len(view)
            return
        src = np.frombuffer(view, dtype=np.uint8)
        at = 0
        while at < len(src):
            staging = np.frombuffer(self._maps[self._turn], dtype=np.uint8)
            take = min(len(staging) - self._used, len(src) - at)
            staging[self._used : self._used + take] = src[at : at + take]  # GIL released
            del staging  # no export of the map outlives the copy
            self._used += take
            at += take
            if self._used == len(self._maps[self._turn]):
                self._submit(self._used)
        self.written += len(src)

    def _submit(self, length: int) -> None:
        """Hand this turn's buffer (its first ``length`` bytes, aligned) to the I/O
        thread once the previous write is done, and fill the other one next."""
        self._wait()
        assert self._io is not None
        self._pending = self._io.submit(self._write_block, self._maps[self._turn], length)
        self._turn ^= 1
        self._used = 0

    def _wait(self) -> None:
        """Wait for the write in flight (raising its error)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _write_block(self, buffer: mmap.mmap, length: int) -> None:
        """Write ``buffer[:length]`` (on the I/O thread): direct, or through the page
        cache once the device refused a direct write (some overlays do at the first)."""
        view = memoryview(buffer)[:length]
        try:
            try:
                _write_all(self._fd, view)
            except OSError:
                if not self.direct:
                    raise
                self._reopen_buffered()
                _write_all(self._fd, view)
        finally:
            view.release()

    def _reopen_buffered(self) -> None:
        """Go on through the page cache from where the direct writes stopped."""
        offset = os.lseek(self._fd, 0, os.SEEK_CUR)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY)
        os.lseek(self._fd, offset, os.SEEK_SET)
        self.direct = False

    def close(self) -> None:
        """Write what is staged (its last block padded, then the file cut back
        to :attr:`written` bytes) and close the file; idempotent."""
        if self._fd < 0:
            return
        try:
            if self._used:
                tail = self._used
                padded = -(-tail // ALIGNMENT) * ALIGNMENT
                self._maps[self._turn][tail:padded] = bytes(padded - tail)
                self._submit(padded)
            self._wait()
            if self._maps:
                os.ftruncate(self._fd, self.written)
        finally:
            self._stop()

    def abort(self) -> None:
        """Close the file as it is (on an error; the caller removes it)."""
        self._stop()

    def _stop(self) -> None:
        """Let a write in flight end, then close the file and free the buffers."""
        if self._io is not None:
            self._io.shutdown(wait=True, cancel_futures=True)
            self._io = None
        self._pending = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for buffer in self._maps:
            buffer.close()
        self._maps = []

    def __enter__(self) -> DirectWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def _write_all(fd: int, view: memoryview) -> None:
    """``os.write`` until all of ``view`` is written (a write may be short)."""
    done = os.write(fd, view)
    while done < len(view):
        with view[done:] as rest:  # released at once: the buffer's map is closed later
            done += os.write(fd, rest)
