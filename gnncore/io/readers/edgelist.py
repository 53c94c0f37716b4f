"""Text edge lists: CSV, TSV or whitespace-separated, plain or gzipped.

The layout is sniffed from the first lines
(:func:`~gnncore.io.readers.edge_layout.sniff`):

* lines starting with ``#`` are comments (SNAP style) and blank lines are
  skipped, anywhere in the file; line ends may be ``\\n`` or ``\\r\\n``;
* a UTF-8 byte order mark opening the file is skipped;
* the separator is sniffed per file from its first data lines
  (:func:`~gnncore.io.readers.edge_layout.sniff_separator`): each votes for a
  comma (it holds a comma and no tab) or for whitespace, the majority wins (a
  tie: the first line's); whitespace is a tab if one of its lines holds one,
  else a space (single spaces are parsed natively, irregular runs of
  spaces/tabs by a regex pass). A line that does not split into the layout's
  columns is an error naming it, and saying when it holds another separator;
* a header is assumed when the first data line holds a non-numeric token while
  the following lines are all numeric and it splits into as many columns as the
  second line, or when every token of the first data line is a usual column
  name (:data:`~gnncore.io.readers.edge_layout.HEADER_NAMES`: ``src``, ``dst``,
  ``source``, ``target``, ...), which is how a header of string-id edge lists is
  told (``header=True/False`` overrides);
* 2 columns are ``src dst``; 3 columns are ``src dst weight`` (or a SNAP
  timestamp): the third column must be numeric and is ignored, since the graph
  format stores unweighted edges. Other column counts are an error.

Ids (``id_type``): ``"int"`` requires non-negative integers; ``"string"``
takes every token as a string; ``"auto"`` uses integers when every id parses
as a 64-bit integer and strings otherwise, with a
:class:`~gnncore.io.readers.edge_problems.StringIdsWarning` naming the file and
the first line whose id is not one (also the report's
``details["id_type_reason"]``). Either way ids are remapped to
``0..N-1`` in sorted raw-id order (numeric order for integers, lexicographic
for strings) and the map is written as ``node_ids.parquet``.

Only ``.gz`` compression is read (detected by its magic bytes); a file named
``*.gz`` without them is an error (:func:`~gnncore.io.compression.check_gzip_name`).

Integer ids of a plain file are parsed by the C++ reader of
:mod:`gnncore.io.readers.edge_text`, which accepts a strict subset of what Polars
accepts (same values) and declines the rest to Polars. Polars' parsing is one
lazy scan (``collect(engine="streaming")``). Only when it fails, or a
vectorised check finds a bad value, does
:func:`~gnncore.io.readers.edge_problems.locate_problem` find the exact line: a
second Polars pass over the raw lines with their line numbers flags the lines a
regex does not accept, and a Python check words the problem of the first truly
bad one (a Python pass over every line is only the fallback when Polars cannot
split the file into lines).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore.errors import InputError
from gnncore.io.canonical import (
    canonicalize,
    node_id_table,
    remap_int_ids,
    remap_str_ids,
    write_graph,
)
from gnncore.io.compression import check_gzip_name, gzip_error, is_gzip
from gnncore.io.readers.edge_layout import COMMENT, Layout, sniff
from gnncore.io.readers.edge_problems import locate_problem, string_ids_reason
from gnncore.io.readers.edge_text import Declined, read_int_edges
from gnncore.io.readers.node_table import (
    NodeTable,
    align_node_table,
    node_table_details,
    table_ids_as,
    write_node_data,
)
from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter
from gnncore.typing import WITH_CSRC

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

ID_TYPES = ("auto", "int", "string")


# Parsing -------------------------------------------------------------------------------


def _collect(lf: pl.LazyFrame, path: Path) -> pl.DataFrame | None:
    """Collect a scan; ``None`` when Polars cannot parse the text."""
    try:
        return lf.collect(engine="streaming")
    except pl.exceptions.PolarsError:
        return None
    except OSError as exc:
        if is_gzip(path):
            raise gzip_error(path, exc) from exc
        raise


def scan_edges(path: Path, layout: Layout, dtype: pl.DataType | type[pl.DataType]) -> pl.LazyFrame:
    """A lazy frame of ``src``, ``dst`` and ``missing`` (a row lacks a value).

    Blank lines are dropped here (they parse as all-null rows).
    """
    common: dict[str, Any] = dict(
        has_header=False, comment_prefix=COMMENT, skip_lines=layout.skip_lines
    )
    if layout.separator is None:
        lf = pl.scan_csv(
            path, separator="\x1f", quote_char=None, schema={"line": pl.String}, **common
        )
        pattern = (
            r"^\s*(?P<src>\S+)\s+(?P<dst>\S+)" + (r"\s+\S+" if layout.ncols == 3 else "") + r"\s*$"
        )
        groups = pl.col("line").str.extract_groups(pattern)
        lf = lf.filter(pl.col("line").str.strip_chars().fill_null("") != "").select(
            src=groups.struct.field("src"), dst=groups.struct.field("dst")
        )
        return lf.select(
            src=pl.col("src").cast(dtype, strict=True),
            dst=pl.col("dst").cast(dtype, strict=True),
            missing=pl.col("src").is_null() | pl.col("dst").is_null(),
        )
    schema: dict[str, pl.DataType | type[pl.DataType]] = {"src": dtype, "dst": dtype}
    if layout.ncols == 3:
        schema["weight"] = pl.String
    lf = pl.scan_csv(
        path,
        separator=layout.separator,
        schema=schema,
        quote_char='"' if layout.separator == "," else None,
        **common,
    )
    columns = [pl.col(c) for c in schema]
    blank = pl.all_horizontal([c.is_null() for c in columns])
    missing = pl.any_horizontal([c.is_null() for c in columns])
    lf = lf.filter(~blank).select("src", "dst", missing=missing)
    if dtype == pl.String and layout.separator == ",":
        lf = lf.with_columns(pl.col("src").str.strip_chars(), pl.col("dst").str.strip_chars())
        lf = lf.with_columns(
            missing=pl.col("missing") | (pl.col("src") == "") | (pl.col("dst") == "")
        )
    return lf


def _parse(
    path: Path, layouts: list[Layout], dtype: pl.DataType | type[pl.DataType]
) -> tuple[pl.DataFrame, Layout] | None:
    for layout in layouts:
        df = _collect(scan_edges(path, layout, dtype), path)
        if df is not None:
            return df, layout
    return None


@dataclass(frozen=True)
class ParsedEdges:
    """Raw edge ids as read: ints (numpy) or strings (Polars)."""

    src: np.ndarray | pl.Series
    dst: np.ndarray | pl.Series
    id_type: str  # "int" or "string"
    layout: Layout
    id_type_reason: str | None = None  # why id_type="auto" read strings


def read_edges(
    path: str | os.PathLike[str],
    *,
    id_type: str = "auto",
    header: bool | None = None,
    layout: Layout | None = None,
    native: bool = True,
) -> ParsedEdges:
    """Parse a text edge list (see the module docstring).

    Args:
        path: The file (plain or gzipped).
        id_type (str): ``"auto"``, ``"int"`` or ``"string"``.
        header (bool, optional): Force a header (True) or none (False).
        layout (Layout, optional): Skip sniffing and use this layout.
        native (bool): Integer ids of a plain file are parsed by the C++ reader
            (:mod:`gnncore.io.readers.edge_text`) first, Polars taking over where it
            declines; ``False``: by Polars only (the reference).
    """
    path = Path(path)
    if id_type not in ID_TYPES:
        raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
    if path.is_dir():
        raise InputError(
            "is a directory, not an edge-list file (for a dataset directory "
            "use --format ogb, planetoid or kg)",
            path,
        )
    if not path.is_file():
        raise InputError("no such file", path)
    gz = check_gzip_name(path)
    stage("reading edges")
    if layout is None:
        layout = sniff(path, header)
    layouts = [layout]
    if layout.separator in ("\t", " "):
        layouts.append(replace(layout, separator=None))
    last = layouts[-1]

    if id_type in ("auto", "int"):
        if native and WITH_CSRC and not gz:
            try:
                src, dst = read_int_edges(path, layout)
            except Declined:
                pass  # Polars parses the whole file (or words the error)
            else:
                _require_edges(len(src), path)
                return ParsedEdges(src, dst, "int", layout)
        parsed = _parse(path, layouts, pl.Int64)
        if parsed is not None:
            df, used = parsed
            if df["missing"].any():
                locate_problem(path, used, as_int=True)
            src, dst = df["src"].to_numpy(), df["dst"].to_numpy()
            if len(src) and (src.min() < 0 or dst.min() < 0):
                locate_problem(path, used, as_int=True)
                raise InputError("negative node id", path)
            _require_edges(len(src), path)
            return ParsedEdges(src, dst, "int", used)
        if id_type == "int":
            locate_problem(path, last, as_int=True)
            raise InputError("could not be parsed as an integer edge list", path)

    parsed = _parse(path, layouts, pl.String)
    if parsed is None:
        locate_problem(path, last, as_int=False, parse_failed=True)
        raise InputError("could not be parsed as an edge list", path)
    df, used = parsed
    if df["missing"].any():
        locate_problem(path, used, as_int=False)
        raise InputError("a line lacks a node id", path)
    _require_edges(df.height, path)
    reason = string_ids_reason(path, used) if id_type == "auto" else None
    return ParsedEdges(df["src"], df["dst"], "string", used, reason)


def _require_edges(count: int, path: Path) -> None:
    if count == 0:
        raise InputError("empty file: no edges", path)


# Ingestion -----------------------------------------------------------------------------


def default_name(source: Path) -> str:
    """The dataset name of a file: its name without ``.gz`` and the extension."""
    name = source.name
    for suffix in (".gz", ".bz2", ".zst"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    stem = Path(name).stem
    return stem or "graph"


def ingest_edgelist(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    header: bool | None = None,
    nodes: NodeTable | None = None,
) -> IngestReport:
    """Ingest a text edge list (and its node table) into the graph directory ``out_dir``."""
    started = time.perf_counter()
    source = Path(source)
    parsed = read_edges(source, id_type=id_type, header=header)
    layout = parsed.layout
    details = {
        "separator": layout.separator_name,
        "header": layout.header,
        "ignored_weight_column": layout.ncols == 3,
    }
    if parsed.id_type_reason is not None:
        details["id_type_reason"] = parsed.id_type_reason
    return write_remapped(
        parsed.src,
        parsed.dst,
        parsed.id_type,
        source,
        out_dir,
        directed=directed,
        fmt="edgelist",
        name=name or default_name(source),
        seed=seed,
        started=started,
        details=details,
        nodes=nodes,
    )


def write_remapped(
    src: np.ndarray | pl.Series,
    dst: np.ndarray | pl.Series,
    id_type: str,
    source: Path,
    out_dir: str | os.PathLike[str],
    *,
    directed: bool,
    fmt: str,
    name: str,
    seed: int,
    started: float,
    details: dict | None = None,
    nodes: NodeTable | None = None,
) -> IngestReport:
    """Remap raw ids, canonicalise and write (shared by the edge-list and Parquet
    readers); ``nodes``: the node table whose rows give the nodes' features,
    labels and splits (:mod:`gnncore.io.readers.node_table`)."""
    raw_ids: np.ndarray | pl.Series
    stage("remapping ids")
    extra = None if nodes is None else table_ids_as(nodes, id_type)
    if id_type == "int":
        # remap_int_ids applies np.asarray itself; ints arrive as numpy arrays
        assert extra is None or isinstance(extra, np.ndarray)
        src, dst, raw_ids = remap_int_ids(np.asarray(src), np.asarray(dst), extra)
    else:
        assert isinstance(src, pl.Series) and isinstance(dst, pl.Series)  # string ids
        assert extra is None or isinstance(extra, pl.Series)
        src, dst, raw_ids = remap_str_ids(src, dst, extra)
    edges = canonicalize(src, dst, len(raw_ids), directed=directed)
    del src, dst
    details = dict(details or {})
    details["id_type"] = id_type
    tables = {"node_ids": node_id_table(raw_ids)}
    before = None
    if nodes is not None:
        assert extra is not None
        data = align_node_table(nodes, _positions(raw_ids, extra), raw_ids, seed)
        details.update(node_table_details(nodes, data))
        if data.classes is not None:
            tables["classes"] = pl.DataFrame(
                {"class_id": range(len(data.classes)), "name": data.classes},
                schema={"class_id": pl.Int64, "name": pl.String},
            )

        def before(writer: GraphDirWriter) -> None:
            write_node_data(writer, data)

    return write_graph(
        out_dir,
        fmt=fmt,
        source=source,
        name=name,
        num_nodes=len(raw_ids),
        edges=edges,
        directed=directed,
        seed=seed,
        tables=tables,
        before=before,
        details=details,
        started=started,
    )


def _positions(raw_ids: np.ndarray | pl.Series, ids: np.ndarray | pl.Series) -> np.ndarray:
    """The node id of each of ``ids`` (all present in the sorted ``raw_ids``)."""
    if isinstance(raw_ids, np.ndarray):
        return np.searchsorted(raw_ids, np.asarray(ids))
    codes = pl.int_range(len(raw_ids), eager=True, dtype=pl.Int64)
    assert isinstance(ids, pl.Series)
    return ids.replace_strict(raw_ids, codes, return_dtype=pl.Int64).to_numpy()
