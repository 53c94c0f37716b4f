"""Node tables in bounded memory: a Parquet node table beside a text edge list,
laid out by graph node id without holding its features.

The in-memory path (:func:`gnncore.io.readers.node_table.read_node_table` and
:func:`~gnncore.io.readers.node_table.align_node_table`) reads the whole table and
reorders it, about 3.5 times the feature bytes at its peak. Here:

1. **read** (:func:`read_streamed_node_table`, before the edges): the schema, then
   only the ``node_id``, ``label`` and ``split`` columns (O(|V|), outside the budget,
   like the id map), checked exactly as in memory (same errors, same rows); the
   feature columns' types are checked from the schema.
2. **features** (:meth:`StreamedNodeTable.prepare`, still before the edges, so the
   budget is the features' alone): every node of the edge list needs a row, so the
   node ids are the ranks of the table's ids (a row without edges is an isolated
   node, as in memory), and ``features.npy`` is laid out in the scratch directory.
   The feature columns are read in batches of :func:`feature_batch_rows`
   (slices of a Polars scan), each checked and converted exactly as in memory
   (errors name the table's row). A table in node-id order is appended to the
   file as read; any other order goes through bucket files: each batch's rows
   are sorted into ranges of node ids of a quarter of the budget, then each
   range is filled in memory and appended.
   Written bytes are synced and dropped from the page cache every
   :data:`SYNC_BYTES` (:func:`~gnncore.store.page_cache.drop_written`), so
   the cache of a cgroup does not fill with dirty pages.
3. **attach** (:meth:`StreamedNodeTable.attach`, once the edges' distinct ids are
   known): the table's ids join the edges' ones, the edges' nodes without a row
   are the in-memory path's error, and labels and splits are laid out as in
   memory (O(|V|)); :meth:`StreamedNodeTable.write` then moves ``features.npy``
   into the graph directory being written.

The graph directory is the in-memory path's, byte for byte. Not taken here (the
dispatch ingests them in memory, or refuses an explicit budget:
:func:`bounded_node_table_refusal`): CSV/TSV tables, ``standardize_features``
(its statistics run over the training nodes in graph order, a second pass not
written yet) and string node ids (:class:`NodeTableStringIds`). A table with several kinds of
bad feature values may be reported at another one first than in memory (the
batches are checked in turn).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from gnncore.errors import InputError
from gnncore.io.bounded.ids import dense_lookup
from gnncore.io.bounded.npy_stream import npy_writer
from gnncore.io.readers.node_table import (
    FEATURES_COLUMN,
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
    first_repeat,
    label_and_split,
    node_id_column,
    node_table_details,
    table_ids_as,
    write_node_data,
)
from gnncore.lazy import lazy_module
from gnncore.progress import stage
from gnncore.store.page_cache import drop_written
from gnncore.store.writer import GraphDirWriter

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

PARQUET_SUFFIXES = (".parquet", ".pq")
#: Bytes written between syncs (``fdatasync`` and ``POSIX_FADV_DONTNEED``).
SYNC_BYTES = 64 << 20
#: A batch of feature rows is held about four times (Polars' slice, its float32
#: block, the C-ordered copy, the sorted copy of the bucket path): a batch takes
#: this share of the budget (measured: 95 MiB over the process for 22 MiB batches).
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


def read_streamed_node_table(path: str | os.PathLike[str]) -> StreamedNodeTable:
    """Read and check a Parquet node table's ids, labels and splits, and its
    feature columns' types (module docstring, step 1)."""
    import pyarrow as pa  # lazy: only node tables need it (start-up of every ingest)
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise InputError("no such node table", path)
    try:
        schema = pl.read_parquet_schema(path)
        check_id_column(list(schema), path)
        scan = pl.scan_parquet(path, low_memory=True)
        ids = node_id_column(scan.select(ID_COLUMN).collect()[ID_COLUMN], path, False)
        _check_repeats(ids, path)
        rest = [c for c in (LABEL_COLUMN, SPLIT_COLUMN) if c in schema]
        df = scan.select(rest).collect() if rest else pl.DataFrame()
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot be read as a node table ({exc})", path) from exc
    labels, classes, split = label_and_split(df, path, False)
    del df
    columns = feature_columns(list(schema))
    check_feature_schema(schema, path)
    table = NodeTable(path, ids, None, labels, classes, split, columns, False)
    return StreamedNodeTable(table, rows)


def _check_repeats(ids: pl.Series, path: Path) -> None:
    """:func:`~gnncore.io.readers.node_table.first_repeat` (the same error), by a
    stable sort for integer ids (none for increasing ones) instead of a hash of
    every id."""
    if ids.dtype != pl.Int64:
        first_repeat(ids, path, False)
        return
    values = ids.to_numpy()
    if len(values) < 2 or bool((values[1:] > values[:-1]).all()):
        return
    order = np.argsort(values, kind="stable")
    values = values[order]
    repeats = order[1:][values[1:] == values[:-1]]
    if len(repeats):
        row = int(repeats.min())
        raise InputError(f"node id {ids[row]!r} appears twice", path, row=row)


@dataclass
class StreamedNodeTable:
    """A node table whose features are read in batches (module docstring).

    Attributes:
        table (NodeTable): The ids, labels and splits (``features`` is ``None``).
        rows (int): Rows of the table.
    """

    table: NodeTable
    rows: int
    sorted_ids: np.ndarray | None = None
    node_of_row: np.ndarray | None = None
    features: Path | None = None
    num_features: int = 0
    data: NodeData | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def prepare(self, scratch: Path, budget: int, id_type: str) -> None:
        """Lay the features out by node id into ``scratch/features.npy`` (module
        docstring, step 2), before the edges are read: every node of the edge
        list needs a row, so the node ids are the ranks of the table's ids
        (checked in :meth:`attach`). ``id_type``: the edge list's, as asked;
        ids that are not integers raise :class:`NodeTableStringIds` unless it is
        ``"int"`` (then the in-memory path's error)."""
        if id_type == "string":
            raise NodeTableStringIds("memory_budget with a node table takes integer node ids only")
        try:
            ids = table_ids_as(self.table, "int")
        except InputError:
            if id_type == "int":
                raise
            raise NodeTableStringIds(
                "memory_budget with a node table takes integer node ids only"
            ) from None
        assert isinstance(ids, np.ndarray)
        if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):  # in id order: no sort
            self.sorted_ids, node_of_row = ids, np.arange(len(ids), dtype=np.int64)
        else:
            order = np.argsort(ids, kind="stable")
            self.sorted_ids = ids[order]
            del ids
            node_of_row = np.empty(len(order), dtype=np.int64)
            node_of_row[order] = np.arange(len(order))
            del order
        self.node_of_row = node_of_row
        if self.table.feature_columns:
            stage("node features")
            self.features = scratch / "features.npy"
            self.num_features = _write_features(
                self.features, self.table, node_of_row, scratch, budget
            )

    def attach(
        self, raw_ids: np.ndarray, lut: np.ndarray | None, seed: int
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Join the table's ids to the edges' sorted distinct ``raw_ids`` (with
        their lookup table ``lut`` or ``None``), check that every node has a
        row and lay out labels and splits (module docstring, step 3); returns
        the joined ``(raw_ids, lut)``. :meth:`prepare` first."""
        assert self.sorted_ids is not None and self.node_of_row is not None
        ids, node_of_row = self.sorted_ids, self.node_of_row
        at = np.searchsorted(ids, raw_ids)
        at[at == len(ids)] = 0
        if len(ids) == 0 or not np.array_equal(ids[at], raw_ids):
            # edge nodes without a row: the in-memory error (names some of them)
            joined = np.unique(np.concatenate([raw_ids, ids]))
            node_of_row = np.searchsorted(joined, ids[node_of_row])
        else:
            joined = ids  # every edge node has a row; rows without edges add nodes
            if len(joined) != len(raw_ids):
                lut = _joined_lookup(joined, lut)
        del at
        self.data = align_node_table(self.table, node_of_row, joined, seed)
        self.details = node_table_details(self.table, self.data)
        self.sorted_ids = self.node_of_row = None
        return joined, lut

    def write(self, writer: GraphDirWriter) -> None:
        """Write labels, splits, classes and ``features.npy`` into ``writer``'s
        directory; :meth:`attach` first."""
        assert self.data is not None
        write_node_data(writer, self.data)
        if self.data.classes is not None:
            writer.write_table(
                "classes",
                pl.DataFrame(
                    {"class_id": range(len(self.data.classes)), "name": self.data.classes},
                    schema={"class_id": pl.Int64, "name": pl.String},
                ),
            )
        if self.features is not None:
            os.replace(self.features, writer.file_path("features.npy", "npy"))
            writer.num_features = self.num_features


def _write_features(
    path: Path, table: NodeTable, node_of_row: np.ndarray, scratch: Path, budget: int
) -> int:
    """Write ``features.npy`` at ``path``: row ``node_of_row[r]`` is the table's row
    ``r``; returns the number of features."""
    batches = _FeatureBatches(table, len(node_of_row), budget)
    first = batches.first()
    num_features = 0 if first is None else first.shape[1]
    rows = len(node_of_row)
    in_order = rows < 2 or bool((node_of_row[1:] > node_of_row[:-1]).all())  # 0..rows-1
    with npy_writer(path, np.float32, (rows, num_features)) as out:
        if in_order:
            _append_all(out, batches.all(first))
        else:
            range_rows = feature_batch_rows(budget * BATCH_SHARE // 4, num_features)
            with _Buckets(scratch, rows, num_features, range_rows) as buckets:
                at = 0
                for x in batches.all(first):
                    buckets.add(node_of_row[at : at + len(x)], x)
                    at += len(x)
                _append_all(out, buckets.blocks())
        out.flush()
        drop_written(out.fileno())
    return num_features


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
    """The table's features in batches, checked and converted as in memory.

    Each batch is a slice of a Polars scan (the row groups it overlaps are read,
    only its rows kept): ``ParquetFile.iter_batches`` held about 1 GiB of Arrow
    buffers for 48 MiB batches of a table with 128 MiB row groups."""

    def __init__(self, table: NodeTable, rows: int, budget: int) -> None:
        self.table = table
        self.total = rows
        self.rows = feature_batch_rows(budget, _row_width(table))
        self._iter = self._read()
        self.first_length: int | None = None

    def _read(self) -> Any:
        path = self.table.path
        # low_memory: 154 MiB against 337 MiB of peak RSS for 22 MiB batches of 128 columns
        import pyarrow.parquet as pq  # lazy: only node tables need it

        scan = pl.scan_parquet(path, low_memory=True).select(self.table.feature_columns)
        meta = pq.ParquetFile(path).metadata
        groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        for at, stop in batch_bounds(groups, self.rows):
            try:
                df = scan.slice(at, stop - at).collect()
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise InputError(f"cannot be read as a node table ({exc})", path) from exc
            x = feature_rows(df, path, False, at, self.first_length)
            del df
            if self.first_length is None:
                self.first_length = x.shape[1]
            yield x

    def first(self) -> np.ndarray | None:
        """The first batch (``None``: an empty table)."""
        return next(self._iter, None)

    def all(self, first: np.ndarray | None) -> Any:
        """``first`` and the batches after it."""
        if first is not None:
            yield first
        yield from self._iter


def batch_bounds(group_rows: list[int], rows: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of batches of at most ``rows`` rows (at least one row
    group each when groups are larger) that never cross a row group boundary
    unless they hold whole groups: a slice across two groups reads both (0.88 s
    against 0.5 s for a third of a 2**18-row group of 128 columns)."""
    start = at = 0
    for size in group_rows:
        if size > rows:
            if at > start:
                yield start, at
            step = -(-size // -(-size // rows))
            for first in range(at, at + size, step):
                yield first, min(first + step, at + size)
            start = at = at + size
            continue
        if at + size - start > rows:
            yield start, at
            start = at
        at += size
    if at > start:
        yield start, at


def _row_width(table: NodeTable) -> int:
    """Features per row: the feature columns, or a list column's values per row
    in the first row group."""
    import pyarrow.parquet as pq  # lazy: only node tables need it

    if table.feature_columns != [FEATURES_COLUMN]:
        return max(len(table.feature_columns), 1)
    meta = pq.ParquetFile(table.path).metadata
    if meta.num_row_groups == 0 or meta.row_group(0).num_rows == 0:
        return 1
    group = meta.row_group(0)
    leaf = next(
        i for i in range(group.num_columns)
        if group.column(i).path_in_schema.split(".")[0] == FEATURES_COLUMN
    )  # fmt: skip
    return max(1, -(-group.column(leaf).num_values // group.num_rows))


class _Buckets:
    """Feature rows sorted by node id into ranges of ``rows`` nodes, one pair of
    scratch files per range (node ids, rows), read back range by range."""

    def __init__(self, scratch: Path, num_nodes: int, num_features: int, rows: int) -> None:
        self.num_nodes, self.num_features, self.rows = num_nodes, num_features, rows
        count = max(1, -(-num_nodes // rows))
        self.paths = [(scratch / f"features-{b}.nodes", scratch / f"features-{b}.rows")
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
