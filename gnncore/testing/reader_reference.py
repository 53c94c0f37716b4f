"""Slow pure-Python reference of the block reader (:mod:`gnncore.outofcore.reader`).

It reads the same row ranges with ``open`` / ``seek`` / ``read`` and
``np.frombuffer``, so the tests can demand identical arrays from
``_C.read_range`` / ``_C.read_ranges``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike


def read_rows_reference(
    path: str | os.PathLike[str],
    header_bytes: int,
    dtype: DTypeLike,
    row_shape: tuple[int, ...],
    start: int,
    stop: int,
) -> np.ndarray:
    """Rows ``start:stop`` as :func:`gnncore.outofcore.reader.read_rows` reads
    them; raises ``EOFError`` when the file ends before row ``stop``."""
    return read_row_ranges_reference(path, header_bytes, dtype, row_shape, [(start, stop)])


def read_row_ranges_reference(
    path: str | os.PathLike[str],
    header_bytes: int,
    dtype: DTypeLike,
    row_shape: tuple[int, ...],
    ranges: Sequence[tuple[int, int]],
) -> np.ndarray:
    """The rows of each range, concatenated, as
    :func:`gnncore.outofcore.reader.read_row_ranges` reads them."""
    dt = np.dtype(dtype)
    row_items = 1
    for d in row_shape:
        row_items *= int(d)
    row_bytes = row_items * dt.itemsize
    chunks = []
    with open(path, "rb") as f:
        for start, stop in ranges:
            f.seek(header_bytes + start * row_bytes)
            want = (stop - start) * row_bytes
            data = f.read(want)
            if len(data) != want:
                raise EOFError(f"{path}: rows {start}:{stop} end after {len(data)} of {want} bytes")
            chunks.append(data)
    rows = sum(stop - start for start, stop in ranges)
    return np.frombuffer(b"".join(chunks), dtype=dt).reshape((rows, *row_shape)).copy()
