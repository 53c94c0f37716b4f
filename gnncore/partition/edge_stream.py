"""GREM's input: distinct undirected node pairs in a binary file, in stream order,
read a chunk of rows at a time (C++), never as a whole."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from gnncore import _C
from gnncore.store.npy import read_npy_header


@dataclass(frozen=True)
class EdgeFile:
    """Rows of ``(u, v)`` node-id pairs in a binary file.

    Attributes:
        path (str): The file.
        offset (int): Byte offset of row 0 (a ``.npy`` file's data offset, or 0).
        dtype (str): ``"int32"`` or ``"int64"`` (little-endian).
        rows (int): Number of rows.
    """

    path: str
    offset: int
    dtype: str
    rows: int

    @property
    def int64(self) -> bool:
        return self.dtype == "int64"

    @classmethod
    def from_npy(cls, path: str | os.PathLike[str]) -> EdgeFile:
        """Describe a C-ordered little-endian int32/int64 ``[E, 2]`` ``.npy`` file
        from its header (nothing else is read)."""
        with open(path, "rb") as fh:
            shape, fortran, dtype = read_npy_header(fh)
            offset = fh.tell()
        if dtype.str not in ("<i4", "<i8"):
            raise ValueError(
                f"{path}: edge ids must be little-endian int32 or int64, not {dtype.str}"
            )
        if len(shape) != 2 or shape[1] != 2 or (fortran and shape[0] > 1):
            raise ValueError(
                f"{path}: expected a C-ordered [E, 2] array, got shape {shape}"
                + (" in Fortran order" if fortran else "")
            )
        return cls(
            str(path), int(offset), "int64" if dtype.str == "<i8" else "int32", int(shape[0])
        )

    def spec(self) -> _C.EdgeFileSpec:
        """The file as the C++ core's :class:`gnncore._C.EdgeFileSpec`."""
        return _C.EdgeFileSpec(self.path, offset=self.offset, int64=self.int64, rows=self.rows)

    def read(self, begin: int, count: int) -> np.ndarray:
        """Rows ``[begin, begin + count)`` as ``[k, 2]`` in the file's id width,
        int32 or int64 (one chunk: 8 or 16 bytes a row, read straight into the
        array)."""
        flat = _C.grem_read_edges(self.spec(), begin, count)
        return np.asarray(flat).reshape(-1, 2)


def chunk_rows(fraction: float, num_edges: int) -> int:
    """``ceil(fraction · |E|)`` edges (at least 1), robust to float round-off."""
    return max(1, math.ceil(round(fraction * num_edges, 6)))


__all__ = ["EdgeFile", "chunk_rows"]
