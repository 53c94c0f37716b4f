"""``.npy`` files written and read sequentially (no memory map)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from gnncore.store.npy import read_npy_header


def npy_writer(path: Path, dtype: Any, shape: tuple[int, ...]) -> BinaryIO:
    """Open ``path`` for writing a C-ordered ``.npy`` of ``dtype`` and ``shape``
    sequentially: the header is written (as ``numpy.lib.format.open_memmap``
    writes it) and the data follow by ``ndarray.tofile``."""
    fh = open(path, "wb")
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": shape}  # fmt: skip
    np.lib.format.write_array_header_1_0(fh, header)
    return fh


def npy_reader(path: Path) -> tuple[BinaryIO, np.dtype, tuple[int, ...]]:
    """Open a ``.npy`` positioned at its data: ``(file, dtype, shape)``."""
    fh = open(path, "rb")
    shape, _, dtype = read_npy_header(fh)
    return fh, dtype, shape
