"""``edges.parquet``, the canonical edge table: its integer columns delta-coded.

The table is sorted by ``(src, dst)`` (``(src, rel, dst)`` for knowledge
graphs), so ``src`` is a run of small steps and ``dst`` rises inside each
source's row. Parquet's ``DELTA_BINARY_PACKED`` encoding stores exactly that:
each page as bit-packed differences. Against Polars' default writer
(dictionary tried first, then plain values, zstd level 1), on the 20M-edge
graph of ``benchmarks/ingest_throughput.py`` (20.0M rows): 51.5 against
73.2 MiB, 0.24 against 0.65 CPU s to write (one thread against two), and
Polars reads it back in 0.07 against 0.21 s. zstd on the packed pages saved
3% of the bytes for a third more CPU, so the pages are left uncompressed.
Every Parquet reader reads the encoding (it is in the format since 2.0;
Polars, pyarrow, DuckDB and Spark read it).

Both ingestion paths write through :class:`EdgeTableWriter` in row groups of
:data:`EDGE_TABLE_ROW_GROUP` rows, whatever blocks they hand it: the file is
the same, byte for byte, for the whole table at once and for a stream of
blocks of any sizes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: Rows of each row group (the last holds what is left).
EDGE_TABLE_ROW_GROUP = 1 << 20


class EdgeTableWriter:
    """Writes an edge table to ``path`` from blocks of columns of any lengths,
    cut into row groups of ``row_group`` rows.

    ``columns`` names the columns and their NumPy dtypes, in file order
    (``src``, ``dst``; or ``src``, ``rel``, ``dst``). Use as a context manager,
    or call :meth:`close`; a writer left by an exception is closed without
    its last row group.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[tuple[str, np.dtype | type]],
        row_group: int = EDGE_TABLE_ROW_GROUP,
    ) -> None:
        if row_group < 1:
            raise ValueError(f"row_group must be positive, got {row_group}")
        self._names = [name for name, _ in columns]
        self._dtypes = [np.dtype(dtype) for _, dtype in columns]
        schema = pa.schema(
            [(name, pa.from_numpy_dtype(dtype)) for name, dtype in zip(self._names, self._dtypes)]
        )
        self._writer = pq.ParquetWriter(
            os.fspath(path),
            schema,
            compression="none",
            use_dictionary=False,
            column_encoding={name: "DELTA_BINARY_PACKED" for name in self._names},
            write_statistics=True,
        )
        self._schema = schema
        self._row_group = row_group
        self._pending: list[np.ndarray] | None = None  # a row group's buffers, once needed
        self._pending_rows = 0
        self.rows = 0
        """Rows written so far, the pending ones included."""

    def write(self, columns: Mapping[str, np.ndarray]) -> None:
        """Append a block: one 1-D array per column, of equal lengths (cast to
        the column's dtype). Whole row groups of the block are written from it;
        the rest is copied into the writer's row-group buffers (the caller may
        reuse its block) and written once they are full."""
        arrays = [np.asarray(columns[name]) for name in self._names]
        length = len(arrays[0])
        if any(a.ndim != 1 or len(a) != length for a in arrays):
            raise ValueError("an edge table block takes 1-D columns of one length")
        self.rows += length
        at = 0
        while at < length:
            if self._pending_rows == 0 and length - at >= self._row_group:
                stop = at + self._row_group
                typed = zip(arrays, self._dtypes, strict=True)
                self._write_group([a[at:stop].astype(t, copy=False) for a, t in typed])
                at = stop
                continue
            if self._pending is None:
                self._pending = [np.empty(self._row_group, dtype=t) for t in self._dtypes]
            take = min(self._row_group - self._pending_rows, length - at)
            for buffer, array in zip(self._pending, arrays):
                buffer[self._pending_rows : self._pending_rows + take] = array[at : at + take]
            self._pending_rows += take
            at += take
            if self._pending_rows == self._row_group:
                self._flush()

    def close(self) -> None:
        """Write the last, partial row group and the footer; idempotent."""
        if self._writer is None:
            return
        self._flush()
        self._writer.close()
        self._writer = None
        self._pending = None

    def _flush(self) -> None:
        if self._pending_rows and self._pending is not None:
            self._write_group([buffer[: self._pending_rows] for buffer in self._pending])
        self._pending_rows = 0

    def _write_group(self, arrays: list[np.ndarray]) -> None:
        # Arrow arrays over the NumPy buffers, zero copy (``pa.array`` would
        # also look for pandas objects, and import pandas: 0.14 s)
        columns = [
            pa.Array.from_buffers(field.type, len(a), [None, pa.py_buffer(np.ascontiguousarray(a))])
            for field, a in zip(self._schema, arrays, strict=True)
        ]
        table = pa.Table.from_arrays(columns, schema=self._schema)
        self._writer.write_table(table, row_group_size=len(arrays[0]))

    def __enter__(self) -> EdgeTableWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        elif self._writer is not None:  # the caller removes the half-written file
            self._writer.close()
            self._writer = None


def write_edge_table(path: str | os.PathLike[str], columns: Mapping[str, np.ndarray]) -> None:
    """Write the whole edge table ``columns`` (name to 1-D array, in file order)
    to ``path``, as :class:`EdgeTableWriter` writes it."""
    with EdgeTableWriter(path, [(name, a.dtype) for name, a in columns.items()]) as writer:
        writer.write(columns)


__all__ = ["EDGE_TABLE_ROW_GROUP", "EdgeTableWriter", "write_edge_table"]
