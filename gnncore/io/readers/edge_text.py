"""The C++ reader of integer edge lists: the fast parse of ingestion (bounded and in memory).

``gnncore._C.EdgeTextReader`` reads a text edge list in large blocks (pread,
GIL released), splits each block at a line boundary between two threads and
parses ``src<sep>dst`` lines straight into int64 id arrays: no Arrow columns,
no per-batch Python beyond handing the arrays on. It follows a
:class:`~gnncore.io.readers.edgelist.Layout` sniffed as usual (separator, header and
leading lines skipped, 2 or 3 columns) and accepts a *strict subset* of what the
Polars reader accepts with that layout, parsing it to the same values: ids of 1
to 18 plain decimal digits, exactly the layout's separator (or runs of spaces
and tabs), ``\\n`` or ``\\r\\n`` line ends, blank lines and ``#`` comments.
On any other line -- a sign, a 19-digit id, a missing or extra column, stray
spaces or ``\\r``, unusual bytes -- it *declines* (:class:`Declined`) and the
caller hands the whole file to the Polars path, which either accepts it or
raises its usual :class:`~gnncore.errors.InputError` naming the line. So the
fast path never accepts what Polars rejects, and bad input gets exactly the
errors it got before.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.io.readers.edge_layout import Layout

PARSE_THREADS = 2
"""Threads parsing one block (the comparison with Polars' parse is at 2 threads:
this machine's cores, which Polars uses too)."""
MIN_LINE_BYTES = 4
"""The fewest bytes of a data line with its line end (``"1,2\\n"``): a block of
``B`` bytes holds at most ``B / 4`` edges."""
BYTES_PER_EDGE_GUESS = 8
"""Bytes of text an edge is assumed to take when arrays for a whole file are sized
(fewer are paid for by a copy; the pages of unused room are never touched)."""


class Declined(Exception):
    """The C++ reader met a line outside the subset it parses (module docstring)."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def block_bytes(rows: int) -> int:
    """The read block that fills at most ``rows`` edges (so arrays of ``rows`` take
    a whole block in one call)."""
    return max(MIN_LINE_BYTES * int(rows), 1 << 12)


def read_int_edge_blocks(
    path: str | Path,
    layout: Layout,
    rows: int,
    *,
    threads: int = PARSE_THREADS,
    block_size: int | None = None,
    ahead: bool = False,
    direct: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """The edges of the text edge list ``path`` laid out as ``layout``, parsed in C++.

    Yields ``(src, dst, max_id)``: int64 views of at most ``rows`` edges, in file
    order, and their largest id. The views share two buffers reused for the next
    block: consume (copy) them before asking for it. With ``ahead`` the next
    block is parsed on a thread while the caller works on this one (two pairs
    of buffers: ``32 * rows`` bytes instead of ``16 * rows``).

    Args:
        path: A plain (not gzipped) text file.
        layout (Layout): As :func:`gnncore.io.readers.edgelist.sniff` found it.
        rows (int): Edges per block at most.
        threads (int): 1 or 2 threads parse each block.
        block_size (int, optional): Bytes read at once (default :func:`block_bytes`
            of ``rows``; tests use tiny ones).
        direct (bool): Read past the page cache (``O_DIRECT``, chunks read ahead on a
            thread) where the file system allows it: no kernel copy and no cache to
            reclaim, for a file larger than the memory the caller may use (a file
            half in the page cache or more is read from there).

    Raises:
        Declined: At the first line the reader does not parse (the caller then
            parses the file with Polars).
    """
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    path = Path(path)
    reader = _C.EdgeTextReader(
        str(path),
        layout.separator,
        columns=layout.ncols,
        skip_lines=layout.skip_lines,
        block_bytes=block_bytes(rows) if block_size is None else int(block_size),
        num_threads=threads,
        direct=direct,
    )
    if ahead:
        yield from _read_ahead(reader, path, max(int(rows), 1))
        return
    src = np.empty(max(int(rows), 1), dtype=np.int64)
    dst = np.empty_like(src)
    while True:
        count = reader.read(src, dst)
        if count == 0:
            return
        if count < 0:
            raise Declined(path, reader.decline_line, reader.decline_reason)
        yield src[:count], dst[:count], reader.last_max_id


def _read_ahead(reader: Any, path: Path, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """The blocks of ``reader`` (a ``_C.EdgeTextReader``), each read on a thread
    into one of two pairs of buffers while the caller holds the other: a pair
    goes back to the thread when the caller asks for the next block. The reads
    release the GIL, so the parse of block ``k + 1`` overlaps the caller's work
    on block ``k``. Leaving early (an error, ``close``) stops the thread."""
    free: queue.Queue[int | None] = queue.Queue()
    done: queue.Queue[tuple[int, int, int] | BaseException] = queue.Queue()
    buffers = [(np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64)) for _ in range(2)]

    def produce() -> None:
        try:
            while (slot := free.get()) is not None:
                src, dst = buffers[slot]
                count = reader.read(src, dst)
                done.put((slot, count, reader.last_max_id if count > 0 else -1))
                if count <= 0:
                    return
        except BaseException as exc:  # handed to the caller, raised there
            done.put(exc)

    free.put(0)
    free.put(1)
    thread = threading.Thread(target=produce, name="gnncore-edge-text", daemon=True)
    thread.start()
    held: int | None = None
    try:
        while True:
            item = done.get()
            if isinstance(item, BaseException):
                raise item
            slot, count, top = item
            if held is not None:
                free.put(held)  # the caller has asked for this block: done with the last
            if count == 0:
                return
            if count < 0:
                raise Declined(path, reader.decline_line, reader.decline_reason)
            held = slot
            src, dst = buffers[slot]
            yield src[:count], dst[:count], top
    finally:
        free.put(None)
        thread.join()


def read_int_edges(
    path: str | Path, layout: Layout, *, threads: int = PARSE_THREADS
) -> tuple[np.ndarray, np.ndarray]:
    """All the edges of ``path`` as two int64 arrays, parsed straight into them (no
    copies of blocks: the arrays are sized from the file, :data:`BYTES_PER_EDGE_GUESS`
    bytes an edge, and grown when the lines are shorter). Raises :class:`Declined`
    as :func:`read_int_edge_blocks` does."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    path = Path(path)
    reader = _C.EdgeTextReader(
        str(path), layout.separator, columns=layout.ncols, skip_lines=layout.skip_lines,
        block_bytes=block_bytes(1 << 21), num_threads=threads,
    )  # fmt: skip
    ids = np.empty((2, path.stat().st_size // BYTES_PER_EDGE_GUESS + 1024), dtype=np.int64)
    count = 0
    while True:
        if count == ids.shape[1]:
            grown = np.empty((2, 2 * count), dtype=np.int64)
            grown[:, :count] = ids
            ids = grown
        got = reader.read(ids[0, count:], ids[1, count:])
        if got == 0:
            return ids[0, :count], ids[1, :count]
        if got < 0:
            raise Declined(path, reader.decline_line, reader.decline_reason)
        count += got
