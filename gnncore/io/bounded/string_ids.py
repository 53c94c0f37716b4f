"""Bounded-memory ingestion of text edge lists with string ids.

The string-id branch of :func:`gnncore.io.bounded.text_ingest.ingest_edgelist_external`
(``id_type="string"``, or ``"auto"`` when Polars cannot read the ids as
integers -- exactly when the in-memory path reads them as strings). It writes
the graph directory the in-memory path writes (:func:`gnncore.io.canonical.remap_str_ids`:
node ids are the ranks of the distinct strings in Polars' byte-wise sorted
order, listed in ``node_ids.parquet``), byte for byte, in two passes over the
text:

1. **names** (phase ``parse``): the file is read in blocks that end at line
   ends outside quotes (:func:`text_blocks`), each parsed by Polars as the
   in-memory path parses the whole file (:func:`gnncore.io.readers.edgelist.scan_edges`,
   string ids); a bad line is an :class:`~gnncore.errors.InputError` naming the
   file and line as there (found as there, on the whole file). Each batch's
   distinct strings go to a :class:`~gnncore.io.bounded.names.NameCollector`, which keeps them
   while they fit its share of the budget and otherwise spills them, sorted, as
   *runs* (Arrow IPC files of record batches) beside the output; the runs are
   merged from disk, at most ``max_fan_in`` at a time (several passes when
   there are more), into the sorted distinct names:
   :class:`~gnncore.io.bounded.names.SortedNames`, in memory or one run file.
2. **remap**: the sorted names are cut into *ranges* that fit a quarter of the
   budget (with their codes and a join's hash table). With one range -- the
   usual case -- the text is parsed again and each batch's endpoints are joined
   against it into node ids (:class:`~gnncore.io.bounded.name_lookup.RangeLookup`:
   Polars' join on 64-bit hashes of the names, about twice as fast as on the strings), which go
   straight into the key sorter of
   :func:`gnncore.io.bounded.stream.write_edge_stream`. With several, the text
   is parsed once per range, each pass joining the endpoints between the
   range's first and last name and filling their ids into two int64 id files
   on disk (16 bytes an edge); the last pass streams the finished ids to the
   sorter.
3. The rest -- sort/dedup, CSR, shuffled stream, checksums, the atomic rename
   -- is :func:`~gnncore.io.bounded.stream.write_edge_stream`'s;
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

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.errors import InputError
from gnncore.io.bounded.budget import batch_rows
from gnncore.io.bounded.name_lookup import RangeLookup
from gnncore.io.bounded.names import NameCollector, SortedNames, write_node_ids
from gnncore.io.bounded.phases import Phases
from gnncore.io.bounded.stream import write_edge_stream
from gnncore.io.bounded.text import PolarsFailed, decompress
from gnncore.io.compression import is_gzip
from gnncore.io.readers.edge_layout import Layout, sniff
from gnncore.io.readers.edge_problems import locate_problem, string_ids_reason
from gnncore.io.readers.edgelist import default_name, scan_edges
from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

MIN_BLOCK_BYTES = 16 << 10
MAX_BLOCK_BYTES = 4 << 20
"""Text blocks parsed at once: a 64th of the budget within these bounds (Polars
takes about nine times a block while parsing it; small blocks parse as fast)."""


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
    :func:`gnncore.io.readers.edgelist.scan_edges`), in frames of at least ``rows`` rows (the
    last may hold fewer), parsed from blocks of ``block_bytes``.

    Blocks read here and parsed one at a time hold memory to about a block
    (plus the frame): Polars' streaming reader of the whole file
    (``collect_batches``) runs ahead of its consumer, and its memory grows with
    the file (182 MiB of anonymous memory for a 119 MB file, 330 MiB for
    357 MB). Raises ``PolarsFailed`` where Polars cannot parse a block.
    """
    quoted = layout.separator == ","
    lines = replace(layout, skip_lines=0)
    pending: list[pl.DataFrame] = []
    held = 0
    for block in text_blocks(text, block_bytes, layout.skip_lines, quoted):
        try:
            df = scan_edges(block, lines, pl.String).collect()  # type: ignore[arg-type]
        except pl.exceptions.PolarsError as exc:
            raise PolarsFailed(str(exc)) from exc
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
        except PolarsFailed:
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

    Called by :func:`gnncore.io.bounded.text_ingest.ingest_edgelist_external`
    inside its scratch directory ``scratch`` (removed by it), with its
    :class:`~gnncore.io.bounded.phases.Phases` and checked ``budget``;
    ``fallback``: ``id_type="auto"`` found ids that are not integers (warned
    and recorded as ``details["id_type_reason"]``, as in memory).
    """
    stage("reading edges")
    phases.start("parse")
    text = source
    if is_gzip(source):
        text = scratch / "input.txt"
        if not text.exists():  # the integer attempt of id_type="auto" may have made it
            decompress(source, text)
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
