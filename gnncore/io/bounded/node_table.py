"""Node tables in bounded memory: a Parquet node table beside a text edge list,
laid out by graph node id without holding its features.

The in-memory path (:func:`gnncore.io.readers.node_table.read_node_table` and
:func:`~gnncore.io.readers.node_table.align_node_table`) reads the whole table and
reorders it, about 3.5 times the feature bytes at its peak. Here:

1. **read** (:func:`read_streamed_node_table`, before the edges): the schema, then
   only the ``node_id``, ``label`` and ``split`` columns (O(|V|), outside the budget,
   like the id map), checked exactly as in memory (same errors, same rows); the
   feature columns' types are checked from the schema.
2. **attach** (:meth:`StreamedNodeTable.attach`, once the edges' distinct ids are
   known): the table's ids join the edges' ones (a row without edges is an isolated
   node, as in memory), and the edges' nodes without a row are the in-memory
   path's error; labels and splits are laid out as in memory (O(|V|)).
3. **features** (:meth:`StreamedNodeTable.write`, into the graph directory being
   written): the feature columns are read in batches of
   :func:`feature_batch_rows` (``ParquetFile.iter_batches``), each checked and
   converted exactly as in memory (errors name the table's row). A table in
   node-id order (the rows' node ids ``0..N-1`` in order) is appended to
   ``features.npy`` as read. Any other order goes through bucket files in the
   scratch directory: each batch's rows are sorted into ranges of node ids of
   a quarter of the budget, then each range is filled in memory and appended.
   Written bytes are synced and dropped from the page cache every
   :data:`SYNC_BYTES` (:func:`drop_written`), so the cache of a cgroup does not
   fill with dirty pages.

The graph directory is the in-memory path's, byte for byte. Not taken here (the
dispatch ingests them in memory, or refuses an explicit budget:
:func:`bounded_node_table_refusal`): CSV/TSV tables, ``standardize_features``
(its statistics run over the training nodes in graph order, a second pass not
written yet) and string node ids (:class:`NodeTableStringIds`). Errors in the
feature values of a table whose ids, labels and splits are fine are found after
the edges are read (in memory: before); a table with several kinds of bad values
may be reported at another one first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gnncore.errors import InputError
from gnncore.io.bounded.ids import dense_lookup
from gnncore.io.bounded.npy_stream import npy_writer
from gnncore.io.readers.node_table import (
    ID_COLUMN,
    LABEL_COLUMN,
    SPLIT_COLUMN,
    NodeData,
    NodeTable,
    align_node_table,
    check_feature_schema,
    check_id_column,
    feature_columns,
    feature_rows,
    node_columns,
    node_table_details,
    table_ids_as,
    write_node_data,
)
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter

PARQUET_SUFFIXES = (".parquet", ".pq")
#: Bytes written between syncs (``fdatasync`` and ``POSIX_FADV_DONTNEED``).
SYNC_BYTES = 64 << 20
#: A batch of feature rows is held about four times (Arrow, the float32 block, its
#: sorted copy, the bucket split): a batch takes this share of the budget.
BATCH_SHARE = 8


class NodeTableStringIds(ValueError):
    """The edge list's ids are strings: the bounded path takes a node table with
    integer ids only (the dispatch then ingests in memory, or refuses a budget)."""


def bounded_node_table_refusal(
    nodes: str | os.PathLike[str], standardize_features: bool
) -> str | None:
    """Why bounded-memory ingestion does not take this node table (``None``: it does)."""
    if not Path(nodes).name.lower().endswith(PARQUET_SUFFIXES):
        return "the bounded-memory path streams Parquet node tables only (CSV/TSV: in memory)"
    if standardize_features:
        return (
            "standardize_features needs the training nodes' statistics in graph order, "
            "which the bounded-memory path does not compute yet"
        )
    return None


def feature_batch_rows(budget: int, num_features: int) -> int:
    """Rows of a feature batch under ``budget`` (at least 64)."""
    return max(64, budget // BATCH_SHARE // max(4 * num_features, 1))


def drop_written(fd: int) -> None:
    """Write back ``fd``'s dirty pages and drop its cached ones (where the OS can)."""
    os.fdatasync(fd)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def read_streamed_node_table(path: str | os.PathLike[str]) -> StreamedNodeTable:
    """Read and check a Parquet node table's ids, labels and splits, and its
    feature columns' types (module docstring, step 1)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such node table", path)
    try:
        schema = pl.read_parquet_schema(path)
        check_id_column(list(schema), path)
        keys = [c for c in (ID_COLUMN, LABEL_COLUMN, SPLIT_COLUMN) if c in schema]
        df = pl.read_parquet(path, columns=keys)
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot be read as a node table ({exc})", path) from exc
    ids, labels, classes, split = node_columns(df, path, False)
    del df
    columns = feature_columns(list(schema))
    check_feature_schema(schema, path)
    table = NodeTable(path, ids, None, labels, classes, split, columns, False)
    return StreamedNodeTable(table, rows)


@dataclass
class StreamedNodeTable:
    """A node table whose features are read in batches when written (module docstring).

    Attributes:
        table (NodeTable): The ids, labels and splits (``features`` is ``None``).
        rows (int): Rows of the table.
    """

    table: NodeTable
    rows: int
    node_of_row: np.ndarray | None = None
    data: NodeData | None = None
    scratch: Path | None = None
    budget: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def attach(
        self,
        raw_ids: np.ndarray,
        lut: np.ndarray | None,
        seed: int,
        scratch: Path,
        budget: int,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Join the table's ids to the edges' sorted distinct ``raw_ids`` (with
        their lookup table ``lut`` or ``None``) and lay out labels and splits
        (module docstring, step 2); returns the joined ``(raw_ids, lut)``."""
        ids = table_ids_as(self.table, "int")
        assert isinstance(ids, np.ndarray)
        joined = np.union1d(raw_ids, ids) if len(ids) else raw_ids
        if len(joined) != len(raw_ids):
            lut = _joined_lookup(joined, lut)
        node_of_row = lut[ids].astype(np.int64) if lut is not None else None
        if node_of_row is None:
            node_of_row = np.searchsorted(joined, ids)
        del ids
        self.data = align_node_table(self.table, node_of_row, joined, seed)
        self.node_of_row = node_of_row
        self.scratch, self.budget = scratch, budget
        self.details = node_table_details(self.table, self.data)
        return joined, lut

    def write(self, writer: GraphDirWriter) -> None:
        """Write labels, splits, classes and ``features.npy`` into ``writer``'s
        directory (module docstring, step 3); :meth:`attach` first."""
        assert self.data is not None and self.node_of_row is not None
        write_node_data(writer, self.data)
        if self.data.classes is not None:
            writer.write_table(
                "classes",
                pl.DataFrame(
                    {"class_id": range(len(self.data.classes)), "name": self.data.classes},
                    schema={"class_id": pl.Int64, "name": pl.String},
                ),
            )
        if self.table.feature_columns:
            stage("node features")
            self._write_features(writer)

    def _write_features(self, writer: GraphDirWriter) -> None:
        assert self.node_of_row is not None and self.scratch is not None
        path = writer.file_path("features.npy", "npy")
        batches = _FeatureBatches(self.table, self.budget)
        first = batches.first()
        num_features = 0 if first is None else first.shape[1]
        in_order = bool(np.array_equal(self.node_of_row, np.arange(self.rows)))
        with npy_writer(path, np.float32, (self.rows, num_features)) as out:
            if in_order:
                _append_all(out, batches.all(first))
            else:
                rows = feature_batch_rows(self.budget * BATCH_SHARE // 4, num_features)
                with _Buckets(self.scratch, self.rows, num_features, rows) as buckets:
                    at = 0
                    for x in batches.all(first):
                        buckets.add(self.node_of_row[at : at + len(x)], x)
                        at += len(x)
                    _append_all(out, buckets.blocks())
            out.flush()
            drop_written(out.fileno())
        writer.num_features = num_features


def _joined_lookup(joined: np.ndarray, lut: np.ndarray | None) -> np.ndarray | None:
    """The lookup table of the joined ids: as wide as the edges' one would
    have been allowed (a dense edge list keeps its table), else
    :func:`dense_lookup`'s rule."""
    top = int(joined[-1])
    if (
        lut is not None
        and joined[0] >= 0
        and top < 1 << 32
        and top < max(len(lut), 4 * len(joined))
    ):
        dtype = np.int32 if len(joined) <= np.iinfo(np.int32).max else np.int64
        wide = np.full(top + 1, -1, dtype=dtype)
        wide[joined] = np.arange(len(joined), dtype=dtype)
        return wide
    return dense_lookup(joined)


def _append_all(out: BinaryIO, blocks: Any) -> None:
    """Append float32 blocks to ``out``, syncing every :data:`SYNC_BYTES`."""
    pending = 0
    for block in blocks:
        block.tofile(out)
        pending += block.nbytes
        if pending >= SYNC_BYTES:
            out.flush()
            drop_written(out.fileno())
            pending = 0


class _FeatureBatches:
    """The table's features in batches, checked and converted as in memory."""

    def __init__(self, table: NodeTable, budget: int) -> None:
        self.table = table
        self.file = pq.ParquetFile(table.path)
        self.rows = feature_batch_rows(budget, max(len(table.feature_columns), 1))
        self._iter = self._read()
        self.first_length: int | None = None

    def _read(self) -> Any:
        columns = self.table.feature_columns
        at = 0
        try:
            for batch in self.file.iter_batches(batch_size=self.rows, columns=columns):
                df = pl.from_arrow(batch, rechunk=False)
                assert isinstance(df, pl.DataFrame)
                x = feature_rows(df, self.table.path, False, at, self.first_length)
                del df, batch
                if self.first_length is None:
                    self.first_length = x.shape[1]
                at += len(x)
                yield x
        except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as exc:
            raise InputError(f"cannot be read as a node table ({exc})", self.table.path) from exc

    def first(self) -> np.ndarray | None:
        """The first batch (``None``: an empty table)."""
        return next(self._iter, None)

    def all(self, first: np.ndarray | None) -> Any:
        """``first`` and the batches after it."""
        if first is not None:
            yield first
        yield from self._iter


class _Buckets:
    """Feature rows sorted by node id into ranges of ``rows`` nodes, one pair of
    scratch files per range (node ids, rows), read back range by range."""

    def __init__(self, scratch: Path, num_nodes: int, num_features: int, rows: int) -> None:
        self.num_nodes, self.num_features, self.rows = num_nodes, num_features, rows
        count = max(1, -(-num_nodes // rows))
        self.paths = [(scratch / f"features-{b}.i64", scratch / f"features-{b}.f32")
                      for b in range(count)]  # fmt: skip
        self.files: list[tuple[BinaryIO, BinaryIO]] = []
        self.pending = 0

    def __enter__(self) -> _Buckets:
        self.files = [(open(a, "wb"), open(b, "wb")) for a, b in self.paths]
        return self

    def __exit__(self, *exc: object) -> None:
        for a, b in self.files:
            a.close()
            b.close()
        for a_path, b_path in self.paths:
            a_path.unlink(missing_ok=True)
            b_path.unlink(missing_ok=True)

    def add(self, nodes: np.ndarray, x: np.ndarray) -> None:
        """Spill the rows ``x`` of node ids ``nodes`` to their ranges' files."""
        order = np.argsort(nodes, kind="stable")
        nodes, x = nodes[order], x[order]
        cuts = np.searchsorted(nodes, np.arange(1, len(self.files)) * self.rows)
        for b, (lo, hi) in enumerate(zip(np.r_[0, cuts], np.r_[cuts, len(nodes)])):
            if hi > lo:
                ids_file, rows_file = self.files[b]
                nodes[lo:hi].tofile(ids_file)
                x[lo:hi].tofile(rows_file)
        self.pending += x.nbytes
        if self.pending >= SYNC_BYTES:
            for ids_file, rows_file in self.files:
                for f in (ids_file, rows_file):
                    f.flush()
                    drop_written(f.fileno())
            self.pending = 0

    def blocks(self) -> Any:
        """Each range's rows in node-id order, range after range."""
        for f in (f for pair in self.files for f in pair):
            f.flush()
        for b, (ids_path, rows_path) in enumerate(self.paths):
            start = b * self.rows
            size = min(self.rows, self.num_nodes - start)
            nodes = np.fromfile(ids_path, dtype=np.int64)
            x = np.fromfile(rows_path, dtype=np.float32).reshape(-1, self.num_features)
            ids_path.unlink()
            rows_path.unlink()
            block = np.empty((size, self.num_features), dtype=np.float32)
            block[nodes - start] = x
            del nodes, x
            yield block
