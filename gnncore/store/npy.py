"""A ``.npy`` file's header alone, for code that reads the data itself (in
chunks, with ``pread`` or from C++) instead of through :func:`numpy.load`."""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

#: Largest header accepted (numpy's own default limit).
MAX_HEADER_SIZE = 10_000


def read_npy_header(fh: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` file open in ``fh``,
    which is left at the first byte of the data (``fh.tell()`` is its offset).

    Raises:
        ValueError: Not an ``.npy`` file, or a header numpy cannot read.
    """
    version = np.lib.format.read_magic(fh)
    reader = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, fortran, dtype = reader(fh, max_header_size=MAX_HEADER_SIZE)
    return tuple(shape), bool(fortran), dtype
