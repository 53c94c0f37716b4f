"""``.npy`` files written and read sequentially (no memory map)."""

from __future__ import annotations

import hashlib
import io
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np

from gnncore.store.direct_write import DirectWriter
from gnncore.store.npy import read_npy_header


def npy_writer(path: Path, dtype: Any, shape: tuple[int, ...]) -> BinaryIO:
    """Open ``path`` for writing a C-ordered ``.npy`` of ``dtype`` and ``shape``
    sequentially: the header is written (as ``numpy.lib.format.open_memmap``
    writes it) and the data follow by ``ndarray.tofile``."""
    fh = open(path, "wb")
    fh.write(npy_header(dtype, shape))
    return fh


def npy_header(dtype: Any, shape: tuple[int, ...]) -> bytes:
    """The header bytes of a C-ordered ``.npy`` of ``dtype`` and ``shape`` (version
    1.0, as ``numpy.lib.format.open_memmap`` writes it)."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": shape}  # fmt: skip
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue()


class HashedNpyWriter:
    """A ``.npy`` written sequentially (as :func:`npy_writer`) whose sha256 is
    computed from the arrays as they are written, on a background thread
    (hashlib releases the GIL), instead of reading the file back afterwards.

    Each array given to :meth:`write` is hashed after the call returns: it must
    not change until :meth:`close`, which returns the hex digest's future.
    ``check``, when given, is called on each array on the same thread before it
    is hashed (a content check: :meth:`checked` says whether every array passed).
    """

    def __init__(
        self, path: Path, dtype: Any, shape: tuple[int, ...], lag_bytes: int = 64 << 20,
        check: Callable[[np.ndarray], bool] | None = None,
    ) -> None:  # fmt: skip
        header = npy_header(dtype, shape)
        self._check = check
        self._checked = 0
        self._failed = False
        self._fh = DirectWriter(path)  # past the page cache (gnncore.store.direct_write)
        self._fh.write(header)
        self._sha = hashlib.sha256(header)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-sha256")
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._pending_bytes = 0
        self._lag_bytes = lag_bytes

    def write(self, array: np.ndarray) -> None:
        """Append C-contiguous ``array``'s bytes to the file and to the hash. The
        hashing runs at most ``lag_bytes`` behind (past that, this waits): the
        arrays it holds stay within that."""
        data = np.ascontiguousarray(array)
        if data.nbytes == 0:
            return
        while self._pending and self._pending_bytes + data.nbytes > self._lag_bytes:
            done, size = self._pending.popleft()
            done.result()
            self._pending_bytes -= size
        update = self._pool.submit(self._update, data)
        self._pending.append((update, data.nbytes))
        self._pending_bytes += data.nbytes
        self._fh.write(data)

    def _update(self, data: np.ndarray) -> None:
        if self._check is not None and not self._failed:
            if self._check(data):
                self._checked += data.size
            else:
                self._failed = True
        self._sha.update(data.data.cast("B"))

    def checked(self) -> int | None:
        """After :meth:`close`: the elements that passed ``check`` (all written), or
        :obj:`None` when one array failed it or there was none (waits for the hashing)."""
        self._pool.shutdown(wait=True)
        return None if self._failed or self._check is None else self._checked

    def drain(self) -> None:
        """Wait until every array written so far is hashed (the caller may then
        drop or reuse them)."""
        while self._pending:
            self._pending.popleft()[0].result()
        self._pending_bytes = 0

    def close(self) -> Future[str]:
        """Close the file; the future of the hex sha256 of all it holds."""
        self._fh.close()
        self._pending.clear()
        digest = self._pool.submit(self._sha.hexdigest)
        self._pool.shutdown(wait=False)
        return digest

    def abort(self) -> None:
        """Close the file and drop the hashing (on an error)."""
        self._fh.abort()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> HashedNpyWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.abort()


def npy_reader(path: Path) -> tuple[BinaryIO, np.dtype, tuple[int, ...]]:
    """Open a ``.npy`` positioned at its data: ``(file, dtype, shape)``."""
    fh = open(path, "rb")
    shape, _, dtype = read_npy_header(fh)
    return fh, dtype, shape
