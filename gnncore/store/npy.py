"""The one checked reader of ``.npy`` files.

Every ``.npy`` file a graph directory holds is read through these functions,
so a bad file always gives one :class:`~gnncore.errors.InputError` naming it
(never numpy's own ``ValueError``, ``tokenize.TokenError`` or ``SyntaxError``
from deep inside its header parser):

- :func:`read_npy_header`: the header alone, for code that reads the data
  itself (in chunks, with ``pread`` or from C++);
- :func:`inspect_npy`: the header of a file, checked against the file: plain
  numbers, C order, and exactly the data the header announces;
- :func:`load_npy`: the array, memory-mapped (or read) after those checks;
- :func:`npy_blocks`: the array read (not mapped) in blocks of rows.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from gnncore.errors import InputError

#: Largest header accepted (numpy's own default limit).
MAX_HEADER_SIZE = 10_000

#: Header versions numpy writes; 1.0 and 2.0 differ only in the length field.
#: (3.0 exists only for structured dtypes with non-latin-1 field names, which no
#: gnncore file holds.)
VERSIONS = ((1, 0), (2, 0))

MmapMode = Literal["r", "c", "r+"]


def read_npy_header(
    fh: BinaryIO, path: str | os.PathLike[str] | None = None
) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` file open in ``fh``,
    which is left at the first byte of the data (``fh.tell()`` is its offset).

    Args:
        fh: The file, open for binary reading at its first byte.
        path: The file's name in errors (default: ``fh.name``).

    Raises:
        InputError: Naming the file, for anything that is not a readable
            ``.npy`` header: a missing or wrong magic string, an unknown
            version, a cut-off or over-long header, a header numpy cannot parse
            (whatever numpy raises then), or a negative dimension.
    """
    where = Path(path if path is not None else getattr(fh, "name", "<npy>"))
    try:
        version = np.lib.format.read_magic(fh)
        if version not in VERSIONS:
            raise ValueError(f"unsupported .npy version {version[0]}.{version[1]}")
        reader = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = reader(fh, max_header_size=MAX_HEADER_SIZE)
    except OSError as exc:  # the disk, not the format: say so, still in one line
        raise InputError(f"cannot read the .npy header: {exc}", where) from exc
    except Exception as exc:  # noqa: BLE001 - numpy raises ValueError, TokenError, SyntaxError, ...
        raise InputError(f"not a valid .npy file: {_one_line(exc)}", where) from exc
    if any(int(d) < 0 for d in shape):
        raise InputError(f"not a valid .npy file: negative dimension in shape {shape}", where)
    return tuple(int(d) for d in shape), bool(fortran), dtype


@dataclass(frozen=True)
class NpyFile:
    """A checked ``.npy`` file: its data is ``shape`` C-ordered items of
    ``dtype`` from byte ``offset`` to the end of the file."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int

    @property
    def data_bytes(self) -> int:
        """Bytes of data the header announces."""
        return math.prod(self.shape) * self.dtype.itemsize


def inspect_npy(path: str | os.PathLike[str]) -> NpyFile:
    """Read and check the header of the ``.npy`` file at ``path`` (nothing else).

    Raises:
        InputError: Naming the file, when the header is unreadable
            (:func:`read_npy_header`), the dtype is not plain numbers (objects,
            records, strings), a multi-dimensional array is in Fortran order, or
            the file does not hold exactly the bytes the header's dtype and
            shape announce (truncated, or data beyond the array).
        FileNotFoundError: When there is no such file.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        shape, fortran, dtype = read_npy_header(fh, path)
        offset = fh.tell()
        size = os.fstat(fh.fileno()).st_size
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biufc":
        raise InputError(f"array must hold plain numbers, not dtype {dtype.str}", path)
    if fortran and sum(d > 1 for d in shape) > 1:
        raise InputError(f"array of shape {shape} must be C-ordered, not Fortran-ordered", path)
    info = NpyFile(path, shape, dtype, offset)
    held = size - offset
    if held < info.data_bytes:
        raise InputError(
            f"truncated: holds {held} bytes of data, its header ({dtype.str}{shape}) "
            f"announces {info.data_bytes}",
            path,
        )
    if held > info.data_bytes:
        raise InputError(
            f"{held - info.data_bytes} bytes follow the data its header ({dtype.str}{shape}) "
            "announces",
            path,
        )
    return info


def load_npy(path: str | os.PathLike[str], mmap_mode: MmapMode | None = "r") -> np.ndarray:
    """The array of the ``.npy`` file at ``path``, checked by :func:`inspect_npy`
    first: memory-mapped with ``mmap_mode`` (an :class:`numpy.memmap`), or read
    into memory with ``mmap_mode=None``. Never unpickles.

    Raises:
        InputError: Naming the file, when it is not a sound ``.npy`` file.
    """
    path = Path(path)
    inspect_npy(path)
    try:
        array = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except ValueError as exc:  # e.g. the file changed since it was checked
        raise InputError(f"cannot load: {_one_line(exc)}", path) from exc
    if not isinstance(array, np.ndarray):  # pragma: no cover - inspect_npy checked the magic
        raise InputError("not a .npy array", path)
    return array


def advise(fd: int, offset: int, length: int, advice: str) -> None:
    """``os.posix_fadvise(fd, offset, length, os.<advice>)`` where the platform
    has it (advisory: errors are ignored). ``POSIX_FADV_WILLNEED`` on the next
    block of a sequential reader has the kernel read it while the caller works
    on the current one: at a billion edges the graph's arrays exceed the page
    cache a memory limit leaves, and the kernel's own read-ahead window (a few
    MiB) leaves reads of tens of MiB waiting on the disk."""
    flag = getattr(os, advice, None)
    if flag is not None:
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, offset, length, flag)


def npy_blocks(path: str | os.PathLike[str], rows: int) -> Iterator[np.ndarray]:
    """The array of the ``.npy`` file at ``path`` read (not mapped) in blocks of
    at most ``rows`` rows (first-axis entries, at least one a block), each of
    shape ``(k, *shape[1:])``. Reading, not mapping, keeps the pages out of the
    process's memory: graphs may exceed it.

    Raises:
        InputError: Naming the file, when it is not a sound ``.npy`` file or
            ends early while it is read.
    """
    info = inspect_npy(path)
    if not info.shape:
        raise InputError("expected an array with at least one dimension, not a scalar", info.path)
    tail = info.shape[1:]
    per_row = math.prod(tail)
    step = max(1, rows)
    row_bytes = per_row * info.dtype.itemsize
    with open(info.path, "rb") as fh:
        advise(fh.fileno(), 0, 0, "POSIX_FADV_SEQUENTIAL")
        fh.seek(info.offset)
        done = 0
        while done < info.shape[0]:
            count = min(step, info.shape[0] - done)
            block = np.fromfile(fh, dtype=info.dtype, count=count * per_row)
            if len(block) != count * per_row:
                ended = done + len(block) // max(1, per_row)
                raise InputError(f"truncated: ends within row {ended}", info.path)
            done += count
            # the disk reads the next block while the caller works on this one
            ahead = min(step, info.shape[0] - done) * row_bytes
            if ahead:
                advise(fh.fileno(), info.offset + done * row_bytes, ahead, "POSIX_FADV_WILLNEED")
            yield block.reshape((count, *tail))


def _one_line(exc: BaseException) -> str:
    """``exc`` as one line, newlines folded; led by its type unless it is a
    ``ValueError`` (numpy's own messages say what is wrong), and by the message
    alone of a ``(message, position)`` pair (``tokenize.TokenError``)."""
    args = exc.args
    raw = args[0] if len(args) == 2 and isinstance(args[0], str) else str(exc)
    text = " ".join(raw.split())
    if isinstance(exc, ValueError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def index_dtype(num_nodes: int) -> np.dtype:
    """int32 when every node id fits, else int64 (the format's ``indices`` rule)."""
    return np.dtype(np.int32) if num_nodes <= np.iinfo(np.int32).max else np.dtype(np.int64)
