"""The sorted distinct names of a string-id edge list in bounded memory: runs of
names (Arrow IPC files of record batches) spilled by a :class:`NameCollector`
and merged from disk into :class:`SortedNames`, and ``node_ids.parquet``
streamed from them (:func:`write_node_ids`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnncore.io.bounded.edges_parquet import parquet_row_groups
from gnncore.io.canonical import node_id_table
from gnncore.lazy import lazy_module
from gnncore.store.writer import PARQUET_OPTIONS

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

NAME_COLUMN = "name"
ENTRY_OVERHEAD = 40
"""Bytes per name of a range on top of Polars' size estimate: its int64 code and
the join's hash-table entry."""
MIN_RUN_BATCH_BYTES = 4096


# Run files: sorted distinct names as Arrow IPC record batches --------------------------


def write_name_run(path: Path, chunks: Iterable[pl.Series]) -> list[tuple[int, int]]:
    """Write sorted chunks of names as one run file (written to a ``.partial``
    sibling, renamed at the end); returns ``(rows, bytes)`` of each record batch."""
    import pyarrow as pa  # lazy: only string ids need it (start-up of every ingest)

    schema = pa.schema([(NAME_COLUMN, pa.large_string())])
    tmp = path.with_name(path.name + ".partial")
    batches: list[tuple[int, int]] = []
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for chunk in chunks:
            if len(chunk) == 0:
                continue
            column = chunk.to_arrow().cast(pa.large_string())
            writer.write_batch(pa.record_batch([column], schema=schema))
            batches.append((len(chunk), int(chunk.estimated_size())))
    tmp.replace(path)
    return batches


def read_name_run(path: Path, first: int = 0, end: int | None = None) -> Iterator[pl.Series]:
    """The record batches ``first..end-1`` of a run file, as Polars string Series."""
    import pyarrow as pa  # lazy: only string ids need it

    with pa.OSFile(str(path), "rb") as source:
        reader = pa.ipc.open_file(source)
        stop = reader.num_record_batches if end is None else end
        for i in range(first, stop):
            yield pl.Series(NAME_COLUMN, reader.get_batch(i).column(0), dtype=pl.String)


def slices(names: pl.Series, target_bytes: int) -> Iterator[pl.Series]:
    """``names`` in consecutive slices of about ``target_bytes`` each."""
    if len(names) == 0:
        return
    per_row = max(names.estimated_size() / len(names), 1.0)
    rows = max(int(target_bytes / per_row), 1)
    for start in range(0, len(names), rows):
        yield names.slice(start, rows)


def merge_name_runs(runs: list[Path], out: Path, batch_bytes: int) -> list[tuple[int, int]]:
    """Merge sorted runs of distinct names into one run of their sorted distinct
    union at ``out`` (the inputs are left alone); returns its record batches.

    Holds one record batch per run: everything up to the smallest of the held
    batches' last names is in memory (later batches of every run are larger), so
    it is sorted, deduplicated and written, and the exhausted batches are
    replaced by their runs' next ones.
    """
    readers = [read_name_run(path) for path in runs]
    held: list[pl.Series | None] = [next(reader, None) for reader in readers]

    def merged() -> Iterator[pl.Series]:
        while True:
            live = [i for i, chunk in enumerate(held) if chunk is not None]
            if not live:
                return
            bound = min(held[i][-1] for i in live)  # type: ignore[index]
            parts = []
            for i in live:
                chunk = held[i]
                assert chunk is not None
                cut = int(chunk.search_sorted(bound, side="right"))
                parts.append(chunk.slice(0, cut))
                held[i] = chunk.slice(cut) if cut < len(chunk) else next(readers[i], None)
            yield from slices(pl.concat(parts).unique().sort(), batch_bytes)

    return write_name_run(out, merged())


# Collecting and merging the names ----------------------------------------------------------


@dataclass
class SortedNames:
    """The sorted distinct names: in memory (``series``) or a run file (``run``,
    with the rows and estimated bytes of each of its record batches)."""

    count: int
    series: pl.Series | None = None
    run: Path | None = None
    batches: list[tuple[int, int]] = field(default_factory=list)

    def chunks(self) -> Iterator[pl.Series]:
        """The names in order, in chunks."""
        if self.series is not None:
            yield self.series
        elif self.run is not None:
            yield from read_name_run(self.run)

    def ranges(self, budget_bytes: int) -> list[tuple[int, int, int]]:
        """Consecutive ranges ``(first_node_id, first_batch, end_batch)`` whose names,
        codes and join table fit ``budget_bytes`` each (a larger record batch alone)."""
        if self.series is not None or self.run is None:
            return [(0, 0, 1)]
        ranges: list[tuple[int, int, int]] = []
        node = first = held = start_node = 0
        for i, (rows, size) in enumerate(self.batches):
            cost = size + ENTRY_OVERHEAD * rows  # names_cost of the record batch
            if i > first and held + cost > budget_bytes:
                ranges.append((start_node, first, i))
                first, held, start_node = i, 0, node
            held += cost
            node += rows
        ranges.append((start_node, first, len(self.batches)))
        return ranges

    def range_table(self, first_node: int, first: int, end: int) -> pl.DataFrame:
        """One range as a join table: ``name`` and its node id ``id``."""
        if self.series is not None:
            names = self.series
        elif self.run is not None:
            names = pl.concat(list(read_name_run(self.run, first, end)))
        else:
            names = pl.Series(NAME_COLUMN, [], dtype=pl.String)
        ids = pl.int_range(first_node, first_node + len(names), eager=True, dtype=pl.Int64)
        return pl.DataFrame({NAME_COLUMN: names, "id": ids})


def names_cost(names: pl.Series) -> int:
    """Bytes that ``names`` take as a range to join against: Polars' estimate of
    the strings plus :data:`ENTRY_OVERHEAD` each."""
    return int(names.estimated_size()) + ENTRY_OVERHEAD * len(names)


class NameCollector:
    """The distinct names of the edges, in bounded memory.

    Each batch's distinct names are held while their cost (:func:`names_cost`:
    as a range of names to join against) stays within ``budget_bytes``; past
    it, what is held is merged (sorted, distinct) and, when that still costs
    more than half the budget, spilled as a run. :meth:`finish` merges the
    runs, ``max_fan_in`` at a time; names that were never spilled fit one range.
    """

    def __init__(self, directory: Path, budget_bytes: int, max_fan_in: int = 64) -> None:
        self.directory = directory
        self.budget_bytes = int(budget_bytes)
        self.max_fan_in = max(int(max_fan_in), 2)
        self.batch_bytes = max(self.budget_bytes // (self.max_fan_in + 2), MIN_RUN_BATCH_BYTES)
        self._parts: list[pl.Series] = []
        self._held = 0
        self._serial = 0
        self.runs: list[Path] = []
        self._run_batches: dict[Path, list[tuple[int, int]]] = {}
        self.runs_written = 0
        self.merge_passes = 0

    def _next_path(self) -> Path:
        path = self.directory / f"names-{self._serial:06d}.arrow"
        self._serial += 1
        return path

    def add(self, names: pl.Series) -> None:
        """Collect the distinct values of ``names`` (a string Series)."""
        distinct = names.unique()
        self._parts.append(distinct)
        self._held += names_cost(distinct)
        if self._held > self.budget_bytes:
            merged = self._merged()
            if names_cost(merged) > self.budget_bytes // 2:
                self._spill(merged)
            else:
                self._parts, self._held = [merged], names_cost(merged)

    def _merged(self) -> pl.Series:
        merged = (
            pl.concat(self._parts).unique().sort()
            if self._parts
            else pl.Series(NAME_COLUMN, [], dtype=pl.String)
        )
        self._parts, self._held = [], 0
        return merged.rename(NAME_COLUMN)

    def _spill(self, merged: pl.Series) -> None:
        path = self._next_path()
        self._run_batches[path] = write_name_run(path, slices(merged, self.batch_bytes))
        self.runs.append(path)
        self.runs_written += 1

    def finish(self) -> SortedNames:
        """The sorted distinct names collected (runs merged into one run file)."""
        merged = self._merged()
        if not self.runs:
            return SortedNames(len(merged), series=merged)
        if len(merged):
            self._spill(merged)
        del merged
        runs = self.runs
        batches = self._run_batches[runs[0]] if len(runs) == 1 else []
        while len(runs) > 1:
            self.merge_passes += 1
            merged_runs: list[Path] = []
            for i in range(0, len(runs), self.max_fan_in):
                group = runs[i : i + self.max_fan_in]
                if len(group) == 1:
                    merged_runs.append(group[0])
                    continue
                out = self._next_path()
                batches = merge_name_runs(group, out, self.batch_bytes)
                for path in group:
                    path.unlink()
                merged_runs.append(out)
            runs = merged_runs
        self.runs = runs
        return SortedNames(sum(rows for rows, _ in batches), run=runs[0], batches=batches)


# node_ids.parquet ------------------------------------------------------------------------


def write_node_ids(path: Path, names: SortedNames) -> None:
    """``node_ids.parquet`` (``raw_id``, ``node_id``) from the sorted names, streamed
    in the row groups of Polars' ``write_parquet``: the bytes of
    ``node_id_table(raw_ids).write_parquet`` (:mod:`gnncore.io.canonical`)."""
    if names.series is not None:  # in memory: the in-memory writer's own call
        node_id_table(names.series).write_parquet(path, **PARQUET_OPTIONS)
        return
    groups = parquet_row_groups(names.count)
    schema = {"raw_id": pl.String, "node_id": pl.Int64}

    def source(*_: Any) -> Iterator[pl.DataFrame]:
        chunks = names.chunks()
        held = pl.Series("raw_id", [], dtype=pl.String)
        at = 0
        for size in groups:
            while len(held) < size:
                held = pl.concat([held, next(chunks).rename("raw_id")])
            ids = pl.int_range(at, at + size, eager=True, dtype=pl.Int64)
            # one chunk, as in the in-memory frame: the pages follow the chunks
            yield pl.DataFrame({"raw_id": held.slice(0, size).rechunk(), "node_id": ids})
            held, at = held.slice(size), at + size

    from polars.io.plugins import register_io_source  # lazy (gnncore.lazy)

    register_io_source(source, schema=schema).sink_parquet(path, **PARQUET_OPTIONS)
