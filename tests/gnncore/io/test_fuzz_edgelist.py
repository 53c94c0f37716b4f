"""Fuzzing the edge-list readers with Hypothesis (issue 25, item 8).

* **Valid files** (text: comma, tab, space or irregular whitespace, integer,
  string or mixed ids, a header, a weight column, comments, blank lines, CRLF,
  a BOM, gzip; Parquet: integer or string columns) give the graph a plain
  Polars reading of the same file gives once canonicalised as docs/FORMAT.md
  defines it: ids numbered in sorted order (numeric for integers, byte order
  for strings; ``auto`` reads strings as soon as one id is not a 64-bit
  integer), self loops dropped, duplicates removed, each undirected edge once.
  Text is ingested in memory and on the bounded path, whose graph directories
  must also match file for file (the sha256 of every file).
* **Corrupt files** (a bad token, a truncated line, a wrong separator, extra
  columns, bytes that are not UTF-8, a BOM inside the file, an unbalanced
  quote, a ``.gz`` that is not gzip, truncated or junk gzip, binary junk, a
  Parquet file cut short) make ``gnncore ingest`` exit 1 with one line on
  stderr naming the file -- and the corrupted line, for text -- and leave
  nothing in the output's parent directory.

Parquet has one ingestion path (in memory: ``memory_budget="auto"`` takes it
too), which both runs check. Examples are bounded and derandomised (the same
examples on every run, no example database), so CI is reproducible; the file
runs in about 15 s on the two cores at load 4 (files of thousands of edges make
their per-edge choices from a seeded generator: :class:`Choices`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gnncore.cli.main import main
from gnncore.io import ingest
from gnncore.io.readers.edge_layout import HEADER_NAMES, is_number
from gnncore.io.readers.edge_problems import StringIdsWarning
from gnncore.store import GraphDir

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)
INT64_MAX = 2**63 - 1
T = TypeVar("T")
BOM = b"\xef\xbb\xbf"


# Generating valid text edge lists -------------------------------------------------------------


def _is_plain_name(token: str) -> bool:
    return token.lower() not in HEADER_NAMES and not is_number(token)


NAMES = st.from_regex(r"[a-zA-Zé漢][a-zA-Z0-9_.é漢-]{0,5}", fullmatch=True).filter(_is_plain_name)
FAR_RANGES = {  # besides small ids: none, ids past 2**32 (the wide path), int64's top
    "small": (0, 40),
    "wide": (2**32, 2**40),
    "top": (2**62, INT64_MAX),
}
FAR_IDS = {name: st.integers(lo, hi) for name, (lo, hi) in FAR_RANGES.items()}
NAME_FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZé漢"
NAME_REST = NAME_FIRST + "0123456789_.-"
KINDS = ("int", "string", "mixed")  # mixed: integers and one id that is not an int64


@dataclass
class TextFile:
    """A generated text edge list and what it means."""

    data: bytes
    name: str
    edges: list[tuple[str, str]]  # the ids as written, in file order
    edge_lines: list[int]  # the physical line of each edge
    separator: str | None  # ",", "\t", " " or None (irregular runs of whitespace)
    header: bool
    ncols: int
    lines: list[str] = field(default_factory=list)  # the lines without their ends
    line_tokens: list[list[str]] = field(default_factory=list)  # each edge line's tokens
    newline: str = "\n"
    bom: bool = False
    gz: bool = False


class Choices:
    """Where a generated file's many small choices (each id, gap, weight, blank
    line) come from: Hypothesis draws, which it can shrink, or -- for files of
    thousands of edges -- a ``random.Random`` seeded by one draw. Drawing every
    id of a 2,500-edge file through Hypothesis cost 30 of the 31 s of
    :func:`test_valid_text_past_a_parse_batch_gives_the_polars_graph`."""

    def __init__(self, draw: st.DrawFn, seeded: bool) -> None:
        self.draw = draw
        self.rng = random.Random(draw(st.integers(0, 2**32 - 1))) if seeded else None

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        if self.rng is None:
            return self.draw(st.sampled_from(options))
        return self.rng.choice(options)

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""
        if self.rng is None:
            return self.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)

    def pool(self, kind: str, far: str, max_size: int) -> list:
        """The distinct names (``string``) or the integers, small or ``far``, ids are
        drawn from."""
        if self.rng is None:
            if kind == "string":
                return self.draw(st.lists(NAMES, min_size=1, max_size=max_size, unique=True))
            ints = st.one_of(st.integers(0, 40), FAR_IDS[far])
            return self.draw(st.lists(ints, min_size=1, max_size=max_size))
        rng, size = self.rng, self.rng.randint(1, max_size)
        if kind != "string":
            ranges = (FAR_RANGES["small"], FAR_RANGES[far])
            return [rng.randint(*rng.choice(ranges)) for _ in range(size)]
        names: set[str] = set()
        while len(names) < size:  # what NAMES matches
            name = rng.choice(NAME_FIRST)
            name += "".join(rng.choice(NAME_REST) for _ in range(rng.randint(0, 5)))
            if _is_plain_name(name):
                names.add(name)
        return sorted(names)


@st.composite
def ids_of(draw: st.DrawFn, kind: str, count: int, seeded: bool = False) -> list[str]:
    choices = Choices(draw, seeded)
    far = "small" if kind == "string" else draw(st.sampled_from(sorted(FAR_IDS)))
    pool = choices.pool(kind, far, max(2, count // 2))
    values = [str(choices.pick(pool)) for _ in range(count)]
    if kind == "mixed":  # one id that is not an integer (never on the first line: a header)
        at = draw(st.integers(2, count - 1)) if count > 2 else count - 1
        values[at] = draw(st.one_of(NAMES, st.just(str(INT64_MAX + 1))))
    return values


@st.composite
def text_files(
    draw: st.DrawFn,
    min_edges: int = 1,
    separators: tuple = (",", "\t", " ", None),
    kinds: tuple = ("int", "int", "string", "mixed"),
    max_edges: int = 60,
    seeded: bool = False,
) -> TextFile:
    """A valid text edge list (module docstring) with ids of one of ``kinds``;
    ``seeded`` makes the per-edge choices from a seeded generator (:class:`Choices`)."""
    kind = draw(st.sampled_from(kinds))
    count = draw(st.integers(min_edges, max_edges))
    if kind == "mixed":
        count = max(count, 2)
    ids = draw(ids_of(kind, 2 * count, seeded))
    choices = Choices(draw, seeded)
    edges = list(zip(ids[0::2], ids[1::2]))
    separator = draw(st.sampled_from(separators))
    ncols = draw(st.sampled_from([2, 2, 3]))
    header = draw(st.booleans())
    newline = draw(st.sampled_from(["\n", "\r\n"]))

    def join(tokens: list[str]) -> str:
        if separator is not None:
            return separator.join(tokens)
        gaps = [choices.pick([" ", "  ", "\t", " \t "]) for _ in tokens]
        lead = choices.pick(["", " ", "\t"])
        return lead + "".join(t + g for t, g in zip(tokens, gaps)).rstrip(" \t")

    lines: list[str] = []
    edge_lines: list[int] = []
    line_tokens: list[list[str]] = []
    if draw(st.booleans()):
        lines.append("# " + draw(st.from_regex(r"[a-z ,0-9]{0,12}", fullmatch=True)))
    if header:
        lines.append(join(["src", "dst", "weight"][:ncols]))
    for u, v in edges:
        while choices.integer(0, 9) == 9:  # comments and blank lines between edges
            lines.append(choices.pick(["", "# note", "#"]))
        weight = [choices.pick(["1", "0.5", "2e3", "7"])] if ncols == 3 else []
        lines.append(join([u, v, *weight]))
        edge_lines.append(len(lines))
        line_tokens.append([u, v, *weight])
    end = draw(st.sampled_from([newline, newline, ""]))
    bom = draw(st.integers(0, 4)) == 4
    gz = draw(st.integers(0, 4)) == 4
    data = (BOM if bom else b"") + (newline.join(lines) + end).encode()
    suffix = {",": ".csv", "\t": ".tsv"}.get(separator, ".txt") + (".gz" if gz else "")
    return TextFile(
        data=gzip.compress(data, mtime=0) if gz else data,
        name="edges" + suffix,
        edges=edges,
        edge_lines=edge_lines,
        separator=separator,
        header=header,
        ncols=ncols,
        lines=lines,
        line_tokens=line_tokens,
        newline=newline,
        bom=bom,
        gz=gz,
    )


# The reference: plain Polars, canonicalised ------------------------------------------------------


def polars_edges(path: Path, f: TextFile) -> tuple[pl.Series, pl.Series]:
    """The raw ids of ``path`` as plain Polars reads them (strings), knowing its
    layout: its lines (Polars decompresses gzip, drops a BOM and ``\\r\\n``
    ends), less comments, blank lines and the header, split at the separator."""
    lines = pl.read_csv(
        path, has_header=False, separator="\x1f", quote_char=None,
        schema={"line": pl.String}, comment_prefix="#",
    )["line"]  # fmt: skip
    lines = lines.filter(lines.fill_null("").str.strip_chars() != "")
    if f.separator is None:  # runs of whitespace
        tokens = lines.str.extract_all(r"\S+")
    else:
        tokens = lines.str.split(f.separator)
    tokens = tokens.slice(1) if f.header else tokens
    return tokens.list.get(0).alias("src"), tokens.list.get(1).alias("dst")


def canonical(src: pl.Series, dst: pl.Series, directed: bool, id_type: str = "auto") -> dict:
    """docs/FORMAT.md's graph of raw ids: the id type (``auto``: integers when every
    id is a 64-bit integer), ids numbered in sorted order, canonical edges."""
    ints_src = src.cast(pl.Int64, strict=False)
    ints_dst = dst.cast(pl.Int64, strict=False)
    as_int = id_type != "string" and ints_src.null_count() == 0 and ints_dst.null_count() == 0
    a = ints_src.to_list() if as_int else src.to_list()
    b = ints_dst.to_list() if as_int else dst.to_list()
    raw_ids = sorted(set(a) | set(b))
    code = {raw: i for i, raw in enumerate(raw_ids)}
    loops = sum(1 for u, v in zip(a, b) if u == v)
    pairs = {(code[u], code[v]) for u, v in zip(a, b) if u != v}
    if not directed:
        pairs = {(min(p), max(p)) for p in pairs}
    return {
        "id_type": "int" if as_int else "string",
        "raw_ids": raw_ids,
        "edges": pairs,
        "num_input_edges": len(a),
        "self_loops_removed": loops,
    }


def graph_of(out: Path) -> dict:
    """The graph directory as the same dict (plus its manifest's file digests)."""
    graph = GraphDir.open(out)
    graph.validate()
    manifest = graph.manifest
    edges = pl.read_parquet(out / "edges.parquet")
    ids = pl.read_parquet(out / "node_ids.parquet").sort("node_id")
    assert ids["node_id"].to_list() == list(range(manifest.num_nodes))
    expected_entries = manifest.num_canonical_edges * (1 if manifest.directed else 2)
    assert manifest.num_edges == expected_entries
    return {
        "id_type": "int" if ids["raw_id"].dtype == pl.Int64 else "string",
        "raw_ids": ids["raw_id"].to_list(),
        "edges": set(edges.select("src", "dst").iter_rows()),
        "num_input_edges": manifest.stats["num_input_edges"],
        "self_loops_removed": manifest.stats["self_loops_removed"],
        "sha256": {name: entry.sha256 for name, entry in manifest.files.items()},
    }


def truth(f: TextFile, directed: bool, id_type: str) -> dict:
    """What the generator wrote, canonicalised the same way."""
    return canonical(
        pl.Series([u for u, _ in f.edges], dtype=pl.String),
        pl.Series([v for _, v in f.edges], dtype=pl.String),
        directed,
        id_type,
    )


@pytest.mark.parametrize("kind", KINDS)
@settings(FUZZ, max_examples=15)
@given(
    data=st.data(),
    directed=st.booleans(),
    id_type=st.sampled_from(["auto", "auto", "string"]),
    bounded=st.sampled_from(["auto", 65536]),
)
def test_valid_text_gives_the_polars_graph(
    kind: str, data: st.DataObject, directed: bool, id_type: str, bounded: str | int
) -> None:
    check_valid_text(data.draw(text_files(kinds=(kind,))), directed, id_type, bounded)


@settings(FUZZ, max_examples=4)
@given(
    f=text_files(min_edges=1100, max_edges=2500, seeded=True),
    directed=st.booleans(),
    id_type=st.sampled_from(["auto", "string"]),
)
def test_valid_text_past_a_parse_batch_gives_the_polars_graph(
    f: TextFile, directed: bool, id_type: str
) -> None:
    """Files of more edges than a parse batch of the bounded path holds at the
    small budget (1,024 rows) and than a text block of its string path (16 KiB)."""
    check_valid_text(f, directed, id_type, 65536)


def check_valid_text(f: TextFile, directed: bool, id_type: str, bounded: str | int) -> None:
    """The property of the valid text files (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f.name
        path.write_bytes(f.data)
        expected = canonical(*polars_edges(path, f), directed, id_type)
        assert expected == truth(f, directed, id_type)  # the reference reads what was written
        for label, present in (
            ("bom", f.bom), ("gzip", f.gz), ("header", f.header), ("weight", f.ncols == 3),
            ("crlf", f.newline == "\r\n"), (f"separator {f.separator!r}", True),
            (f"{id_type} read as {expected['id_type']}", True),
            ("ids past 2**32", expected["id_type"] == "int" and expected["raw_ids"][-1] >= 2**32),
        ):  # fmt: skip
            if present:
                event(label)  # --hypothesis-show-statistics tells how often
        graphs = []
        for budget in (None, bounded):
            out = Path(tmp) / f"out-{budget}"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                report = ingest(path, out, directed=directed, id_type=id_type, memory_budget=budget)
            assert (report.memory_budget is None) == (budget is None)
            warned = [w for w in caught if issubclass(w.category, StringIdsWarning)]
            fell_back = id_type == "auto" and expected["id_type"] == "string"
            assert len(warned) == fell_back
            assert ("id_type_reason" in report.details) == fell_back
            assert report.details["header"] is f.header
            graph = graph_of(out)
            assert {k: graph[k] for k in expected} == expected
            graphs.append(graph)
        assert graphs[0]["sha256"] == graphs[1]["sha256"]  # byte for byte


@st.composite
def parquet_tables(draw: st.DrawFn) -> tuple[pl.DataFrame, str]:
    kind = draw(st.sampled_from(["int", "string", "numeric strings"]))
    count = draw(st.integers(1, 60))
    ids = draw(ids_of("string" if kind == "string" else "int", 2 * count))
    dtype: type[pl.DataType] = pl.Int64 if kind == "int" else pl.String
    table = pl.DataFrame({"src": ids[0::2], "dst": ids[1::2]}).cast(dtype)
    if kind == "int" and draw(st.booleans()):
        small = table.filter((pl.col("src") < 2**31) & (pl.col("dst") < 2**31))
        if small.height:
            table = small.cast(pl.Int32)
    if draw(st.booleans()):
        table = table.with_columns(weight=pl.lit(0.5))
    return table, kind


@settings(FUZZ, max_examples=20)
@given(drawn=parquet_tables(), directed=st.booleans())
def test_valid_parquet_gives_the_polars_graph(
    drawn: tuple[pl.DataFrame, str], directed: bool
) -> None:
    table, _ = drawn
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "edges.parquet"
        table.write_parquet(path)
        back = pl.read_parquet(path)
        src, dst = back["src"], back["dst"]
        # auto reads a string column as string ids (even of digits), an integer one as ints
        id_type = "string" if src.dtype == pl.String else "auto"
        expected = canonical(src.cast(pl.String), dst.cast(pl.String), directed, id_type)
        graphs = []
        for budget in (None, "auto"):  # Parquet is ingested in memory either way
            out = Path(tmp) / f"out-{budget}"
            ingest(path, out, directed=directed, memory_budget=budget)
            graph = graph_of(out)
            assert {k: graph[k] for k in expected} == expected
            graphs.append(graph)
        assert graphs[0]["sha256"] == graphs[1]["sha256"]


# Corruptions ----------------------------------------------------------------------------------

LINE_CORRUPTIONS = (
    "word", "negative", "empty", "truncated", "separator", "extra", "not utf-8",
    "bom inside", "quote",
)  # fmt: skip
FILE_CORRUPTIONS = ("fake gzip", "truncated gzip", "junk gzip", "binary")
INT_ONLY = ("word", "negative", "bom inside")  # errors only where the ids are integers


@dataclass
class Corrupt:
    data: bytes
    name: str
    line: int | None  # the line the error must name (None: the file alone)
    id_type: str


def _int_ids(f: TextFile) -> bool:
    return all(t.isdigit() and int(t) <= INT64_MAX for edge in f.edges for t in edge)


@st.composite
def corrupt_files(draw: st.DrawFn, what: str) -> Corrupt:
    """A valid file with one corruption ``what``: a data line made bad
    (:data:`LINE_CORRUPTIONS`) or the whole file (:data:`FILE_CORRUPTIONS`)."""
    files = text_files(
        min_edges=3, separators=(",",) if what == "quote" else (",", "\t", " ", None)
    )
    f = draw(files.filter(_int_ids) if what in INT_ONLY else files)
    plain = (BOM if f.bom else b"") + (f.newline.join(f.lines) + f.newline).encode()
    if what == "fake gzip":
        return Corrupt(plain, "edges.csv.gz", None, "auto")
    if what == "truncated gzip":
        packed = gzip.compress(plain, mtime=0)
        return Corrupt(
            packed[: draw(st.integers(10, len(packed) - 1))], "edges.csv.gz", None, "auto"
        )
    if what == "junk gzip":
        return Corrupt(b"\x1f\x8b" + draw(st.binary(min_size=1, max_size=64)), "e.gz", None, "auto")
    if what == "binary":  # a first line that is not UTF-8, then anything
        return Corrupt(b"\x80" + draw(st.binary(max_size=200)), "edges.bin", 1, "auto")
    # One data line goes bad; a word or a BOM on the first one would make a header.
    k = draw(st.integers(1 if what in ("word", "bom inside") else 0, len(f.edges) - 1))
    number = f.edge_lines[k]
    sep = f.separator if f.separator is not None else " "
    tokens = f.line_tokens[k]
    u, v, rest = tokens[0], tokens[1], tokens[2:]
    id_type = "auto"
    if what == "word":
        bad, id_type = sep.join(["x" + u, v, *rest]), "int"
    elif what == "negative":
        bad = sep.join([u, f"-{int(v) % 10**17 + 1}", *rest])  # not -0, and an int64
    elif what == "empty":
        bad = u + sep
    elif what == "truncated":
        bad = u
    elif what == "separator":
        other = draw(st.sampled_from(["\t", ";", " "])) if sep == "," else ","
        bad = other.join(tokens)
    elif what == "extra":
        bad = sep.join([*tokens, "9", "9"])
    elif what == "not utf-8":
        junk = draw(st.binary(max_size=6))
        bad = (
            (u.encode() + b"\xff" + junk.replace(b"\n", b"").replace(b"\r", b"")).decode(
                "utf-8", errors="surrogateescape"
            )
            + sep
            + sep.join([v, *rest])
        )
    elif what == "bom inside":
        bad, id_type = "\ufeff" + sep.join(tokens), "int"
    else:  # "quote": one unbalanced quote
        bad = '"' + sep.join(tokens)
    lines = list(f.lines)
    lines[number - 1] = bad
    body = f.newline.join(lines) + f.newline
    data = (BOM if f.bom else b"") + body.encode("utf-8", errors="surrogateescape")
    return Corrupt(gzip.compress(data, mtime=0) if f.gz else data, f.name, number, id_type)


def ingest_fails(path: Path, line: int | None, *args: str) -> None:
    """``gnncore ingest`` on ``path`` in memory and on the bounded path: exit 1, one
    line on stderr naming the file (and ``line``), nothing left beside the output."""
    parent = path.parent / "outputs"
    for budget in ("none", "auto"):
        parent.mkdir()
        err = io.StringIO()
        with contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore", StringIdsWarning)
            code = main(["ingest", str(path), str(parent / "graph"), "--no-progress",
                         "--memory-budget", budget, *args])  # fmt: skip
        lines = err.getvalue().splitlines()
        where = f"{path}:{line}: " if line is not None else f"{path}: "
        assert code == 1, (budget, lines)
        assert len(lines) == 1 and lines[0].startswith(f"gnncore ingest: error: {where}"), (
            budget,
            lines,
        )
        assert list(parent.iterdir()) == []
        parent.rmdir()


@pytest.mark.parametrize("what", LINE_CORRUPTIONS + FILE_CORRUPTIONS)
@settings(FUZZ, max_examples=6)
@given(data=st.data())
def test_corrupt_text_fails_with_one_line_and_leaves_nothing(
    what: str, data: st.DataObject
) -> None:
    c = data.draw(corrupt_files(what))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / c.name
        path.write_bytes(c.data)
        ingest_fails(path, c.line, "--id-type", c.id_type)


@settings(FUZZ, max_examples=10)
@given(drawn=parquet_tables(), cut=st.floats(0.05, 0.95), junk=st.binary(max_size=32))
def test_corrupt_parquet_fails_with_one_line_and_leaves_nothing(
    drawn: tuple[pl.DataFrame, str], cut: float, junk: bytes
) -> None:
    table, _ = drawn
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "edges.parquet"
        table.write_parquet(path)
        data = path.read_bytes()
        path.write_bytes(data[: max(1, int(len(data) * cut))] + junk)
        ingest_fails(path, None)
