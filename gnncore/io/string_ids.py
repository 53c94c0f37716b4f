"""Bounded-memory ingestion of text edge lists with string ids.

The string-id branch of :func:`gnncore.io.external_ingest.ingest_edgelist_external`
(``id_type="string"``, or ``"auto"`` when Polars cannot read the ids as
integers -- exactly when the in-memory path reads them as strings). It writes
the graph directory the in-memory path writes (:func:`gnncore.io.canonical.remap_str_ids`:
node ids are the ranks of the distinct strings in Polars' byte-wise sorted
order, listed in ``node_ids.parquet``), byte for byte, in two passes over the
text:

1. **names** (phase ``parse``): the file is read in blocks that end at line
   ends outside quotes (:func:`text_blocks`), each parsed by Polars as the
   in-memory path parses the whole file (:func:`gnncore.io.edgelist._scan`,
   string ids); a bad line is an :class:`~gnncore.errors.InputError` naming the
   file and line as there (found as there, on the whole file). Each batch's
   distinct strings go to a :class:`NameCollector`, which keeps them
   while they fit its share of the budget and otherwise spills them, sorted, as
   *runs* (Arrow IPC files of record batches) beside the output; the runs are
   merged from disk, at most ``max_fan_in`` at a time (several passes when
   there are more), into the sorted distinct names: :class:`SortedNames`, in
   memory or one run file.
2. **remap**: the sorted names are cut into *ranges* that fit a quarter of the
   budget (with their codes and a join's hash table). With one range -- the
   usual case -- the text is parsed again and each batch's endpoints are joined
   against it into node ids (:class:`RangeLookup`: Polars' join on 64-bit
   hashes of the names, about twice as fast as on the strings), which go
   straight into the key sorter of
   :func:`gnncore.io.external_ingest.write_edge_stream`. With several, the text
   is parsed once per range, each pass joining the endpoints between the
   range's first and last name and filling their ids into two int64 id files
   on disk (16 bytes an edge); the last pass streams the finished ids to the
   sorter.
3. The rest -- sort/dedup, CSR, shuffled stream, checksums, the atomic rename
   -- is :func:`~gnncore.io.external_ingest.write_edge_stream`'s;
   ``node_ids.parquet`` is streamed from the sorted names in the row groups
   Polars' ``write_parquet`` cuts, so its bytes match too.

Memory: the budget's quarter for collected names (and the merge buffers), a
quarter for a range of names, half for the edge keys; a parse batch and
Polars' temporaries come on top (not Polars' streaming reader of the whole
file, whose memory grows with the file: :func:`_string_batches`). Unlike the
integer path, nothing O(|V|) is held beyond one range of names (the CSR's
per-node arrays aside). Disk: the runs of names (about the names' size, twice
that during a merge pass) and, with several ranges, 16 bytes per edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from gnncore.errors import InputError
from gnncore.io.compression import is_gzip
from gnncore.io.edgelist import (
    Layout,
    _scan,
    default_name,
    locate_problem,
    sniff,
    string_ids_reason,
)
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.writer import PARQUET_OPTIONS, GraphDirWriter

if TYPE_CHECKING:
    from gnncore.io.external_ingest import Phases

NAME_COLUMN = "name"
RUN_SCHEMA = pa.schema([(NAME_COLUMN, pa.large_string())])
ENTRY_OVERHEAD = 40
"""Bytes per name of a range on top of Polars' size estimate: its int64 code and
the join's hash-table entry."""
MIN_RUN_BATCH_BYTES = 4096
HASH_SEED = 0x9E3779B9
MIN_BLOCK_BYTES = 16 << 10
MAX_BLOCK_BYTES = 4 << 20
"""Text blocks parsed at once: a 64th of the budget within these bounds (Polars
takes about nine times a block while parsing it; small blocks parse as fast)."""


# Run files: sorted distinct names as Arrow IPC record batches --------------------------


def write_name_run(path: Path, chunks: Iterable[pl.Series]) -> list[tuple[int, int]]:
    """Write sorted chunks of names as one run file (written to a ``.partial``
    sibling, renamed at the end); returns ``(rows, bytes)`` of each record batch."""
    tmp = path.with_name(path.name + ".partial")
    batches: list[tuple[int, int]] = []
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, RUN_SCHEMA) as writer:
        for chunk in chunks:
            if len(chunk) == 0:
                continue
            column = chunk.to_arrow().cast(pa.large_string())
            writer.write_batch(pa.record_batch([column], schema=RUN_SCHEMA))
            batches.append((len(chunk), int(chunk.estimated_size())))
    tmp.replace(path)
    return batches


def read_name_run(path: Path, first: int = 0, end: int | None = None) -> Iterator[pl.Series]:
    """The record batches ``first..end-1`` of a run file, as Polars string Series."""
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
    from polars.io.plugins import register_io_source

    from gnncore.io.canonical import node_id_table
    from gnncore.io.external_ingest import parquet_row_groups

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

    register_io_source(source, schema=schema).sink_parquet(path, **PARQUET_OPTIONS)


# Ingestion -------------------------------------------------------------------------------


def text_blocks(path: Path, block_bytes: int, skip_lines: int, quoted: bool) -> Iterator[bytes]:
    """The bytes of ``path`` past its first ``skip_lines`` lines, in blocks of about
    ``block_bytes`` that end at a line end (the last one may not).

    ``quoted`` (comma layouts, whose fields Polars reads with ``"`` quotes): a
    block ends only where its count of ``"`` is even, so that no quoted field
    spans two blocks (a line holding an odd count of quotes that Polars does not
    read as quotes, such as a comment, makes the block run on to the next such
    line). Where no block end is found, the next read is as large as what is
    held (the work stays linear in a long line or block).
    """
    with open(path, "rb") as fh:
        for _ in range(skip_lines):
            fh.readline()
        carry = b""
        size = block_bytes
        while True:
            chunk = fh.read(size)
            if not chunk:
                if carry:
                    yield carry
                return
            data = carry + chunk
            cut = _block_end(data, quoted)
            carry = data[cut:]
            if cut:
                size = block_bytes
                yield data[:cut]
            else:
                size = max(block_bytes, len(data))


def _block_end(data: bytes, quoted: bool) -> int:
    """Where a block of ``data`` (starting outside quotes) may end: after its last
    line end outside quotes (0: none yet)."""
    cut = data.rfind(b"\n") + 1
    if not quoted or cut == 0:
        return cut
    quotes = data.count(b'"', 0, cut)
    while cut and quotes % 2:
        earlier = data.rfind(b"\n", 0, cut - 1) + 1
        quotes -= data.count(b'"', earlier, cut)
        cut = earlier
    return cut


def _string_batches(
    text: Path, layout: Layout, rows: int, block_bytes: int
) -> Iterator[pl.DataFrame]:
    """The edges of ``text`` as Polars parses them with ``layout`` (string ids,
    :func:`gnncore.io.edgelist._scan`), in frames of at least ``rows`` rows (the
    last may hold fewer), parsed from blocks of ``block_bytes``.

    Blocks read here and parsed one at a time hold memory to about a block
    (plus the frame): Polars' streaming reader of the whole file
    (``collect_batches``) runs ahead of its consumer, and its memory grows with
    the file (182 MiB of anonymous memory for a 119 MB file, 330 MiB for
    357 MB). Raises ``_PolarsFailed`` where Polars cannot parse a block.
    """
    from gnncore.io.external_ingest import _PolarsFailed

    quoted = layout.separator == ","
    lines = replace(layout, skip_lines=0)
    pending: list[pl.DataFrame] = []
    held = 0
    for block in text_blocks(text, block_bytes, layout.skip_lines, quoted):
        try:
            df = _scan(block, lines, pl.String).collect()  # type: ignore[arg-type]
        except pl.exceptions.PolarsError as exc:
            raise _PolarsFailed(str(exc)) from exc
        del block
        if df.height:
            pending.append(df)
            held += df.height
        if held >= rows:
            yield pl.concat(pending)
            pending, held = [], 0
    if pending:
        yield pl.concat(pending)


def _collect_names(
    text: Path,
    layouts: list[Layout],
    scratch: Path,
    budget: int,
    rows: int,
    block_bytes: int,
    max_fan_in: int,
) -> tuple[Layout, SortedNames]:
    """Pass 1: the sorted distinct names with the first layout Polars reads; bad
    input is the in-memory path's :class:`InputError`."""
    from gnncore.io.external_ingest import _PolarsFailed

    for layout in layouts:
        collector = NameCollector(scratch, budget, max_fan_in)
        num_edges = 0
        missing = False
        try:
            for df in _string_batches(text, layout, rows, block_bytes):
                if df["missing"].any():  # as in memory: reported once the parse succeeds
                    missing = True
                    continue
                collector.add(pl.concat([df["src"], df["dst"]]))
                num_edges += df.height
        except _PolarsFailed:
            for path in collector.runs:
                path.unlink(missing_ok=True)
            continue
        if missing:
            locate_problem(text, layout, as_int=False)
            raise InputError("a line lacks a node id", text)
        if num_edges == 0:
            raise InputError("empty file: no edges", text)
        return layout, collector.finish()
    locate_problem(text, layouts[-1], as_int=False, parse_failed=True)
    raise InputError("could not be parsed as an edge list", text)


class RangeLookup:
    """The node ids of endpoint names, through one range of the sorted names.

    A hash join on 64-bit hashes of the names (Polars' ``Series.hash``: about
    twice as fast as joining the strings) when the range's hashes are distinct,
    else on the names themselves. Exact either way: every endpoint is one of the
    sorted names, and only endpoints between the range's first and last name --
    names of this range -- are looked up, so equal hashes are equal names.

    Args:
        table (pl.DataFrame): The range (:meth:`SortedNames.range_table`).
        whole (bool): The range holds every name (no bounds to check).
        by_hash (bool, optional): Join on hashes (``True``; refused when two of
            the range's names share a hash) or on names (``False``); default:
            on hashes when they are distinct.
    """

    def __init__(self, table: pl.DataFrame, whole: bool, by_hash: bool | None = None) -> None:
        names = table[NAME_COLUMN]
        hashes = names.hash(HASH_SEED)
        distinct = hashes.n_unique() == len(hashes)
        if by_hash and not distinct:
            raise ValueError("two names of the range share a hash: join on the names")
        self.by_hash = distinct if by_hash is None else by_hash
        key = hashes if self.by_hash else names
        self.table = pl.DataFrame({"key": key, "id": table["id"]})
        self.bounds = None if whole or len(names) == 0 else (names[0], names[-1])

    def _keys(self, names: pl.Series) -> pl.DataFrame:
        return (names.hash(HASH_SEED) if self.by_hash else names).to_frame("key")

    def ids(self, names: pl.Series) -> np.ndarray:
        """int64 node ids of ``names``, ``-1`` for names outside the range."""
        if self.bounds is None:
            found = self._keys(names).join(self.table, on="key", how="left",
                                           maintain_order="left")["id"]  # fmt: skip
            return found.fill_null(-1).to_numpy(writable=True)
        first, last = self.bounds
        inside = ((names >= first) & (names <= last)).to_numpy()
        ids = np.full(len(names), -1, dtype=np.int64)
        part = self._keys(names.filter(pl.Series(inside)))
        found = part.join(self.table, on="key", how="left", maintain_order="left")["id"]
        ids[inside] = found.fill_null(-1).to_numpy()
        return ids


def _timed_endpoints(
    text: Path, layout: Layout, rows: int, block_bytes: int, phases: Phases
) -> Iterator[pl.Series]:
    """Each batch's endpoint names, its sources then its destinations; the parse
    is timed as ``parse``, what the caller does with a batch as ``remap``."""
    batches = _string_batches(text, layout, rows, block_bytes)
    while True:
        phases.start("parse")
        df = next(batches, None)
        if df is None:
            return
        phases.start("remap")
        yield pl.concat([df["src"], df["dst"]])


def _edges(ids: np.ndarray, text: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of a batch's endpoint ids (every one found)."""
    if len(ids) and ids.min() < 0:
        raise RuntimeError(f"{text}: a name was not found in the sorted names")
    half = len(ids) // 2
    return ids[:half], ids[half:]


def _mapped_chunks(
    text: Path, layout: Layout, names: SortedNames, scratch: Path, budget: int, rows: int,
    block_bytes: int, phases: Phases,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Pass 2: the edges as node ids, batch by batch (one parse per range of names;
    with several ranges the ids are assembled in two int64 files, one a column)."""
    ranges = names.ranges(budget)
    if len(ranges) == 1:
        phases.start("remap")
        lookup = RangeLookup(names.range_table(*ranges[0]), whole=True)
        for ends in _timed_endpoints(text, layout, rows, block_bytes, phases):
            yield _edges(lookup.ids(ends), text)
        return
    paths = (scratch / "src.ids", scratch / "dst.ids")
    for number, (first_node, first, end) in enumerate(ranges):
        phases.start("remap")
        lookup = RangeLookup(names.range_table(first_node, first, end), whole=False)
        last = number == len(ranges) - 1
        mode = "r+b" if number else "wb"
        with open(paths[0], mode) as src_fh, open(paths[1], mode) as dst_fh:
            for ends in _timed_endpoints(text, layout, rows, block_bytes, phases):
                ids = lookup.ids(ends)
                half = len(ids) // 2
                for column, fh in ((ids[:half], src_fh), (ids[half:], dst_fh)):
                    at = fh.tell()
                    if number:  # earlier ranges' ids: every name is in exactly one range
                        earlier = fh.read(column.nbytes)
                        if len(earlier) != column.nbytes:
                            raise RuntimeError(f"{fh.name} is truncated")
                        np.maximum(column, np.frombuffer(earlier, dtype=np.int64), out=column)
                    if not last:
                        fh.seek(at)
                        fh.write(column.tobytes())
                if last:
                    yield _edges(ids, text)
        del lookup
    for path in paths:
        path.unlink()


def ingest_string_ids(
    source: Path,
    out: Path,
    scratch: Path,
    phases: Phases,
    started: float,
    budget: int,
    *,
    directed: bool,
    name: str | None,
    seed: int,
    header: bool | None,
    max_fan_in: int,
    fallback: bool = False,
) -> IngestReport:
    """Ingest the string-id edge list ``source`` into ``out`` (module docstring).

    Called by :func:`gnncore.io.external_ingest.ingest_edgelist_external`
    inside its scratch directory ``scratch`` (removed by it), with its
    :class:`~gnncore.io.external_ingest.Phases` and checked ``budget``;
    ``fallback``: ``id_type="auto"`` found ids that are not integers (warned
    and recorded as ``details["id_type_reason"]``, as in memory).
    """
    from gnncore.io.external_ingest import _decompress, batch_rows, write_edge_stream

    stage("reading edges")
    phases.start("parse")
    text = source
    if is_gzip(source):
        text = scratch / "input.txt"
        if not text.exists():  # the integer attempt of id_type="auto" may have made it
            _decompress(source, text)
    rows = batch_rows(budget)
    block_bytes = min(max(budget // 64, MIN_BLOCK_BYTES), MAX_BLOCK_BYTES)
    try:
        layout = sniff(text, header)
        layouts = [layout]
        if layout.separator in ("\t", " "):
            layouts.append(replace(layout, separator=None))
        layout, names = _collect_names(
            text, layouts, scratch, budget // 4, rows, block_bytes, max_fan_in
        )
        reason = string_ids_reason(text, layout, source) if fallback else None
    except InputError as exc:
        if exc.path == text and text != source:
            raise InputError(exc.problem, source, line=exc.line, row=exc.row) from None
        raise
    details: dict[str, Any] = {
        "separator": layout.separator_name,
        "header": layout.header,
        "ignored_weight_column": layout.ncols == 3,
        "id_type": "string",
    }
    if reason is not None:
        details["id_type_reason"] = reason

    def before(writer: GraphDirWriter) -> None:
        write_node_ids(writer.file_path("node_ids.parquet", "parquet"), names)

    stage("remapping ids")
    chunks = _mapped_chunks(text, layout, names, scratch, budget // 4, rows, block_bytes,
                            phases)  # fmt: skip
    return write_edge_stream(
        chunks, out, scratch, phases, num_nodes=names.count, directed=directed,
        name=name or default_name(source), seed=seed, budget=budget, fmt="edgelist",
        source=source, before=before, details=details, started=started, max_fan_in=max_fan_in,
    )  # fmt: skip
