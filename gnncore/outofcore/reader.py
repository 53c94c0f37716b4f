"""Sequential block reads of row ranges of ``.npy`` files (the out-of-core store's
partition features and edge buckets) with the C++ block reader.

A range of rows of a C-ordered ``.npy`` file is one contiguous byte range. The
functions here allocate the result uninitialised and fill it in place with
``gnncore._C.read_range`` / ``read_ranges``: large ``pread`` calls
(``chunk_bytes`` each, 8 MiB by default) with the GIL released, instead of the
page faults of a memory map. :func:`evict_from_page_cache` drops files from the
page cache, for cold-cache benchmarks.

Errors: a file that ends before the range raises
:class:`gnncore.errors.InputError` naming it ("ends early (truncated)"); a file
that cannot be opened or read raises :class:`OSError` (``FileNotFoundError``,
...) naming it; bad arguments raise :class:`ValueError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from gnncore.errors import InputError

DEFAULT_CHUNK_BYTES = 8 << 20
"""Bytes per ``pread`` call unless told otherwise (8 MiB)."""

_NPY_MAGIC = b"\x93NUMPY"

PathArg = str | os.PathLike[str]


def npy_header_bytes(path: PathArg) -> int:
    """Bytes before the data of the ``.npy`` file ``path`` (magic, version,
    header length and header), i.e. the byte offset of row 0.

    Raises:
        InputError: ``path`` is not an ``.npy`` file of a known version (1, 2 or 3).
        OSError: ``path`` cannot be read.
    """
    with open(path, "rb") as f:
        preamble = f.read(12)
    if len(preamble) < 10 or preamble[:6] != _NPY_MAGIC:
        raise InputError("not an .npy file (bad magic)", Path(path))
    major = preamble[6]
    if major == 1:
        return 10 + int.from_bytes(preamble[8:10], "little")
    if major in (2, 3) and len(preamble) == 12:
        return 12 + int.from_bytes(preamble[8:12], "little")
    raise InputError(f"unsupported .npy format version {major}.{preamble[7]}", Path(path))


def _row_bytes(dtype: np.dtype, row_shape: tuple[int, ...]) -> int:
    if dtype.hasobject:
        raise ValueError(f"cannot read rows of dtype {dtype}: it holds Python objects")
    if any(int(d) < 0 for d in row_shape):
        raise ValueError(f"row_shape must be non-negative, got {row_shape}")
    return dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))


def _check_range(start: int, stop: int) -> None:
    if not 0 <= start <= stop:
        raise ValueError(f"row range must satisfy 0 <= start <= stop, got {start}:{stop}")


def _bytes_of(out: np.ndarray) -> np.ndarray:
    """``out`` (C-contiguous, fresh) as a flat writable uint8 view."""
    if out.nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return out.reshape(-1).view(np.uint8)


def _truncated(exc: OSError, path: PathArg, what: str) -> InputError:
    # The C++ reader raises OSError with errno None only for a file that ends
    # before the range; its message names the offsets.
    return InputError(f"ends early (truncated) reading {what}: {exc}", Path(path))


def read_rows(
    path: PathArg,
    header_bytes: int,
    dtype: DTypeLike,
    row_shape: tuple[int, ...],
    start: int,
    stop: int,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    sequential_hint: bool = True,
    direct: bool = False,
) -> np.ndarray:
    """Rows ``start:stop`` of a C-ordered array stored in ``path`` from byte
    ``header_bytes`` on, each of ``row_shape`` items of ``dtype``, as a new array
    of shape ``(stop - start, *row_shape)``, read with one sequential block read.

    Args:
        path: The file (e.g. an ``.npy`` file; see :func:`npy_header_bytes`).
        header_bytes: Byte offset of row 0.
        dtype: Item type as stored (byte order included).
        row_shape: Shape of one row (``()`` for a 1-D array).
        start, stop: The row range, ``0 <= start <= stop``.
        chunk_bytes: Bytes per ``pread`` call.
        sequential_hint: Advise the kernel of a sequential read first.
        direct: Read with ``O_DIRECT`` (bypassing the page cache) where the
            file system allows it.

    Raises:
        InputError: The file ends before row ``stop``.
        OSError: The file cannot be opened or read.
        ValueError: A negative offset or row range, or ``start > stop``.
    """
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in row_shape)
    row_bytes = _row_bytes(dt, shape)
    start, stop, header_bytes = int(start), int(stop), int(header_bytes)
    _check_range(start, stop)
    if header_bytes < 0:
        raise ValueError(f"header_bytes must be non-negative, got {header_bytes}")
    out = np.empty((stop - start, *shape), dtype=dt)
    from gnncore import _C

    try:
        _C.read_range(
            os.fspath(path),
            header_bytes + start * row_bytes,
            _bytes_of(out),
            chunk_bytes=int(chunk_bytes),
            sequential_hint=bool(sequential_hint),
            direct=bool(direct),
        )
    except OSError as exc:
        if exc.errno is None:
            raise _truncated(exc, path, f"rows {start}:{stop}") from exc
        raise
    return out


def read_row_ranges(
    path: PathArg,
    header_bytes: int,
    dtype: DTypeLike,
    row_shape: tuple[int, ...],
    ranges: Sequence[tuple[int, int]],
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    sequential_hint: bool = True,
    direct: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The rows of several ranges ``(start, stop)`` of the array in ``path`` (as
    for :func:`read_rows`), concatenated in the order given, read in one call
    that opens the file once and reads the ranges one after the other. With
    ``out`` (C-contiguous, ``dtype``, shape ``(total rows, *row_shape)``, e.g. a
    slice of a larger array) the rows are read into it instead of a new array.
    ``direct`` as for :func:`read_rows`.

    Raises:
        InputError: The file ends before a range does.
        OSError: The file cannot be opened or read.
        ValueError: A range with ``start < 0`` or ``start > stop``, or a negative
            ``header_bytes``.
    """
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in row_shape)
    row_bytes = _row_bytes(dt, shape)
    header_bytes = int(header_bytes)
    if header_bytes < 0:
        raise ValueError(f"header_bytes must be non-negative, got {header_bytes}")
    bounds = [(int(a), int(b)) for a, b in ranges]
    for a, b in bounds:
        _check_range(a, b)
    offsets = np.array([header_bytes + a * row_bytes for a, _ in bounds], dtype=np.int64)
    lengths = np.array([(b - a) * row_bytes for a, b in bounds], dtype=np.int64)
    want = (sum(b - a for a, b in bounds), *shape)
    if out is None:
        out = np.empty(want, dtype=dt)
    elif out.shape != want or out.dtype != dt or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a C-contiguous {dt} array of shape {want}; got {out.dtype}{out.shape}"
        )
    from gnncore import _C

    try:
        _C.read_ranges(
            os.fspath(path),
            offsets,
            lengths,
            _bytes_of(out),
            chunk_bytes=int(chunk_bytes),
            sequential_hint=bool(sequential_hint),
            direct=bool(direct),
        )
    except OSError as exc:
        if exc.errno is None:
            spans = ", ".join(f"{a}:{b}" for a, b in bounds)
            raise _truncated(exc, path, f"rows {spans}") from exc
        raise
    return out


def evict_from_page_cache(paths: Iterable[PathArg]) -> int:
    """Ask the kernel to drop the cached pages of each file of ``paths``
    (``posix_fadvise(POSIX_FADV_DONTNEED)``), e.g. before a cold-cache benchmark.
    Pages still dirty are not dropped: evict files already written out.

    Returns:
        How many of the files were evicted (a file that cannot be opened is not).
    """
    from gnncore import _C

    return sum(bool(_C.evict(os.fspath(p))) for p in paths)


__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "evict_from_page_cache",
    "npy_header_bytes",
    "read_row_ranges",
    "read_rows",
]
