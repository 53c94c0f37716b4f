"""Text edge lists: CSV, TSV or whitespace-separated, plain or gzipped.

The layout is sniffed from the first lines (see :func:`sniff`):

* lines starting with ``#`` are comments (SNAP style) and blank lines are
  skipped, anywhere in the file; line ends may be ``\\n`` or ``\\r\\n``;
* a UTF-8 byte order mark opening the file is skipped;
* the separator is sniffed per file from its first data lines
  (:func:`sniff_separator`): each votes for a comma (it holds a comma and no
  tab) or for whitespace, the majority wins (a tie: the first line's); whitespace
  is a tab if one of its lines holds one, else a space (single spaces are
  parsed natively, irregular runs of spaces/tabs by a regex pass). A line that
  does not split into the layout's columns is an error naming it, and saying
  when it holds another separator;
* a header is assumed when the first data line holds a non-numeric token while
  the following lines are all numeric and it splits into as many columns as the
  second line, or when every token of the first data
  line is a usual column name (:data:`HEADER_NAMES`: ``src``, ``dst``,
  ``source``, ``target``, ...), which is how a header of string-id edge lists is
  told (``header=True/False`` overrides);
* 2 columns are ``src dst``; 3 columns are ``src dst weight`` (or a SNAP
  timestamp): the third column must be numeric and is ignored, since the graph
  format stores unweighted edges. Other column counts are an error.

Ids (``id_type``): ``"int"`` requires non-negative integers; ``"string"``
takes every token as a string; ``"auto"`` uses integers when every id parses
as a 64-bit integer and strings otherwise, with a :class:`StringIdsWarning`
naming the file and the first line whose id is not one (also the report's
``details["id_type_reason"]``). Either way ids are remapped to
``0..N-1`` in sorted raw-id order (numeric order for integers, lexicographic
for strings) and the map is written as ``node_ids.parquet``.

Only ``.gz`` compression is read (detected by its magic bytes); a file named
``*.gz`` without them is an error (:func:`check_gzip_name`).

Integer ids of a plain file are parsed by the C++ reader of
:mod:`gnncore.io.edge_text`, which accepts a strict subset of what Polars
accepts (same values) and declines the rest to Polars. Polars' parsing is one
lazy scan (``collect(engine="streaming")``). Only when
it fails, or a vectorised check finds a bad value, does :func:`locate_problem`
find the exact line: a second Polars pass over the raw lines with their line
numbers flags the lines a regex does not accept, and a Python check words the
problem of the first truly bad one (a Python pass over every line is only the
fallback when Polars cannot split the file into lines).
"""

from __future__ import annotations

import gzip
import os
import re
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from gnncore.errors import InputError
from gnncore.io.canonical import (
    canonicalize,
    node_id_table,
    remap_int_ids,
    remap_str_ids,
    write_graph,
)
from gnncore.io.compression import check_gzip_name, gzip_error, is_gzip
from gnncore.io.edge_text import Declined, read_int_edges
from gnncore.io.node_table import (
    NodeTable,
    align_node_table,
    node_table_details,
    table_ids_as,
    write_node_data,
)
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter
from gnncore.typing import WITH_CSRC

COMMENT = "#"
INT_RE = re.compile(r"[+-]?\d+")
NUMBER_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.IGNORECASE)
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
REPLACEMENT = "\ufffd"  # what a lossy decoding makes of bytes that are not UTF-8
NOT_UTF8 = "bytes that are not UTF-8 text (binary data, or another encoding)"
SNIFF_DATA_LINES = 50
#: Column names that make a first line a header even when the ids are strings.
HEADER_NAMES = frozenset(
    {
        "src", "dst", "source", "target", "from", "to", "u", "v", "head", "tail",
        "node1", "node2", "src_id", "dst_id", "source_id", "target_id", "weight", "w",
        "time", "timestamp",
    }
)  # fmt: skip
SNIFF_MAX_LINES = 100_000
ID_TYPES = ("auto", "int", "string")


# Reading lines (sniffing and the error path) -----------------------------------------


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` (1-based, without the line end nor a UTF-8
    byte order mark opening the file; bytes that are not UTF-8 become U+FFFD)."""
    for number, raw in iter_raw_lines(path):
        yield number, raw.decode("utf-8", errors="replace")


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, bytes)`` as :func:`iter_lines` does, undecoded."""
    gz = is_gzip(path)
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                if number == 1 and raw.startswith(UTF8_BOM):
                    raw = raw[len(UTF8_BOM) :]
                elif number == 1 and raw.startswith(UTF16_BOMS):
                    raise InputError(
                        "UTF-16 text (it starts with a UTF-16 byte order mark): save it as "
                        "UTF-8 (or ASCII)",
                        path,
                        line=1,
                    )
                yield number, raw.rstrip(b"\r\n")
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise gzip_error(path, exc) from exc
    except OSError as exc:
        if gz:
            raise gzip_error(path, exc) from exc
        raise


def is_skipped(text: str) -> bool:
    """Comment and blank lines carry no data."""
    return text.startswith(COMMENT) or not text.strip()


def is_number(token: str) -> bool:
    return NUMBER_RE.fullmatch(token) is not None


# Layout --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How a text edge list is laid out.

    Attributes:
        separator: ``","``, ``"\\t"`` or ``" "`` (parsed natively by Polars), or
            ``None`` for runs of whitespace (parsed by a regex pass).
        header: Whether the first data line is a header.
        ncols: 2 (``src dst``) or 3 (``src dst weight``; the weight is ignored).
        skip_lines: Physical lines before the first edge (leading comments,
            blank lines and the header).
    """

    separator: str | None
    header: bool
    ncols: int
    skip_lines: int

    def tokens(self, text: str) -> list[str]:
        """Split one line the way the parser does (for sniffing and errors)."""
        if self.separator is None or self.separator == " ":
            return text.split()
        return [t.strip() for t in text.split(self.separator)]

    @property
    def separator_name(self) -> str:
        return {",": "comma", "\t": "tab", " ": "space", None: "whitespace"}[self.separator]

    def separator_hint(self, text: str) -> str:
        """Words for a line that does not split into the layout's columns when it
        holds another separator than the file's ("" otherwise)."""
        if self.separator == ",":
            other = "a tab" if "\t" in text else "a space" if " " in text.strip() else ""
        else:
            other = "a comma" if "," in text else ""
        if not other:
            return ""
        sep = {",": "a comma", "\t": "a tab", " ": "a space", None: "whitespace"}[self.separator]
        return (
            f" (the line holds {other}, but the file's separator, sniffed from its first "
            f"lines, is {sep})"
        )


def sniff_separator(texts: list[str]) -> str:
    """The separator of a file whose first data lines are ``texts`` (``","``,
    ``"\t"`` or ``" "``): each line votes for a comma (it holds a comma and no
    tab) or whitespace; the majority wins, a tie goes to the first line's vote.
    Whitespace is a tab when each of its lines holds one, else a space (runs
    of whitespace when some lines hold tabs: :func:`sniff`). So one odd line
    does not decide the separator of the file: it is the line the parse blames."""
    comma = ["," in t and "\t" not in t for t in texts]
    votes = sum(comma)
    if 2 * votes > len(texts) or (2 * votes == len(texts) and comma[0]):
        return ","
    tabs = ["\t" in t for t, c in zip(texts, comma) if not c]
    if all(tabs):
        return "\t"
    # Spaces, or tabs on some lines and spaces on others: runs of whitespace
    # (the caller tells single spaces from irregular runs).
    return " "


def sniff(path: Path, header: bool | None = None) -> Layout:
    """Work out the separator, header and column count from the first lines."""
    data: list[tuple[int, str]] = []
    for number, raw in iter_raw_lines(path):
        text = raw.decode("utf-8", errors="replace")
        if not is_skipped(text):
            if REPLACEMENT in text and raw.decode("utf-8", errors="ignore") != text:
                # not UTF-8: no reader takes it (and it must not pass for a header)
                raise InputError(NOT_UTF8, path, line=number)
            data.append((number, text))
            if len(data) >= SNIFF_DATA_LINES:
                break
        if number >= SNIFF_MAX_LINES:
            break
    if not data:
        raise InputError("empty file: no edges (only comments or blank lines)", path)
    texts = [t for _, t in data]
    separator: str | None = sniff_separator(texts)
    if separator in ("\t", " ") and any(
        "" in t.split(separator) or any(s.strip() != s for s in t.split(separator)) for t in texts
    ):
        separator = None  # irregular whitespace: the regex pass handles it
    elif separator == " " and any("\t" in t for t in texts):
        separator = None  # tabs on some lines, spaces on others: runs of whitespace
    probe = Layout(separator, False, 2, 0)
    rows = [probe.tokens(t) for t in texts]
    if header is None:
        names = [t.lower() for t in rows[0]]
        # A header splits into as many columns as the data, none empty and no
        # quote unbalanced: a first line that does not (a tab line in a comma
        # file, "1,", a stray '"') is an error to report, not a header to drop.
        header = (
            len(rows) > 1
            and len(rows[0]) == len(rows[1])
            and all(rows[0])
            and texts[0].count('"') % 2 == 0
            and not all(is_number(t) for t in rows[0])
            and all(is_number(t) for row in rows[1:] for t in row)
        ) or (
            len(names) >= 2
            and len(set(names)) == len(names)
            and all(t in HEADER_NAMES for t in names)
        )
    first = 1 if header else 0
    if first >= len(data):
        raise InputError("empty file: no edges after the header", path)
    ncols = len(rows[first])
    if ncols not in (2, 3):
        raise InputError(
            f"expected 2 columns (src dst) or 3 (src dst weight), found {ncols}"
            + probe.separator_hint(data[first][1]),
            path,
            line=data[first][0],
        )
    if ncols == 3:
        for (number, _), row in zip(data[first:], rows[first:]):
            if len(row) == 3 and not is_number(row[2]):
                raise InputError(
                    f"third column {row[2]!r} is not a number: 3-column edge lists are "
                    "'src dst weight' (the weight is ignored); for head/relation/tail "
                    "triples use --format kg",
                    path,
                    line=number,
                )
    return Layout(separator, bool(header), ncols, data[first][0] - 1)


# Locating a bad line (error path only) -----------------------------------------------

MAX_SUSPECTS = 1000


def find_bad_line(
    path: Path,
    check: Callable[[str], str | None],
    suspect: Callable[[pl.Expr], pl.Expr] | None = None,
    *,
    skip_lines: int = 0,
    skip_comments: bool = True,
    skip_blank: bool = True,
) -> None:
    """Raise an :class:`InputError` at the first line for which ``check`` names a
    problem (:func:`first_bad_line`)."""
    found = first_bad_line(
        path, check, suspect,
        skip_lines=skip_lines, skip_comments=skip_comments, skip_blank=skip_blank,
    )  # fmt: skip
    if found is not None:
        raise InputError(found[1], path, line=found[0])


def first_bad_line(
    path: Path,
    check: Callable[[str], str | None],
    suspect: Callable[[pl.Expr], pl.Expr] | None = None,
    *,
    skip_lines: int = 0,
    skip_comments: bool = True,
    skip_blank: bool = True,
) -> tuple[int, str] | None:
    """The first line for which ``check`` names a problem, as ``(line, problem)``
    (``None``: no line has one).

    ``check(text)`` is the exact per-line rule (it words the message). A
    vectorised Polars pass over the raw lines (with their line numbers) first
    picks the lines that ``suspect(line_expr)`` flags -- a superset of the bad
    ones -- and only those are checked in Python; a Python pass over every line
    is the fallback when Polars cannot split the file into lines.
    """
    if suspect is not None:
        line = pl.col("line").fill_null("")
        keep = pl.col("n") > skip_lines
        if skip_comments:
            keep = keep & ~line.str.starts_with(COMMENT)
        if skip_blank:
            keep = keep & (line.str.strip_chars() != "")
        lf = pl.scan_csv(
            path,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            schema={"line": pl.String},
            encoding="utf8-lossy",
            row_index_name="n",
            row_index_offset=1,
        )
        try:
            found = lf.filter(keep & suspect(line)).head(MAX_SUSPECTS).collect(engine="streaming")
        except pl.exceptions.PolarsError:
            found = None
        except OSError as exc:
            if is_gzip(path):
                raise gzip_error(path, exc) from exc
            raise
        if found is not None:
            for number, text in found.select("n", "line").iter_rows():
                problem = check(text or "")
                if problem:
                    return int(number), problem
            if found.height < MAX_SUSPECTS:
                return None  # every suspect line was checked: none is bad
    for number, text in iter_lines(path):
        if number <= skip_lines:
            continue
        if (skip_comments and text.startswith(COMMENT)) or (skip_blank and not text.strip()):
            continue
        problem = check(text)
        if problem:
            return number, problem
    return None


def split_expr(line: pl.Expr, separator: str | None) -> pl.Expr:
    """The tokens of each line, split as :meth:`Layout.tokens` splits them."""
    if separator is None or separator == " ":
        return line.str.extract_all(r"\S+")
    return line.str.split(separator).list.eval(pl.element().str.strip_chars())


INT_TOKEN = r"\+?\d{1,18}"  # surely a non-negative int64; longer ones are only suspects


def token_regex(separator: str | None, integer: bool) -> tuple[str, str]:
    """Regexes for one token and for the gap between tokens of a layout."""
    if separator is None or separator == " ":
        return (INT_TOKEN if integer else r"\S+"), r"\s+"
    sep = re.escape(separator)
    pad = r"[^\S\t]*" if separator == "\t" else r"\s*"
    token = rf"{pad}{INT_TOKEN}{pad}" if integer else rf"[^{sep}]*[^{sep}\s][^{sep}]*"
    return token, sep


def line_regex(separator: str | None, columns: list[bool]) -> str:
    """A regex matching the lines that surely pass the per-line check.

    ``columns`` holds one flag per column: whether it must be an integer (a
    column that is ``False`` must merely be non-empty).
    """
    parts = [f"(?:{token_regex(separator, integer)[0]})" for integer in columns]
    gap = token_regex(separator, False)[1]
    edge = r"\s*" if separator in (None, " ") else ""
    return f"^{edge}" + gap.join(parts) + f"{edge}$"


def int_token_problem(
    token: str, what: str, max_value: int | None, max_hint: str = ""
) -> str | None:
    """Why ``token`` is not a non-negative integer ``<= max_value`` (None if it is)."""
    if INT_RE.fullmatch(token) is None:
        return f"{what} {token!r} is not an integer{max_hint}"
    value = int(token)
    if value < 0:
        return f"negative {what} {value}"
    if value > INT64_MAX:
        return f"{what} {value} does not fit in 64 bits"
    if max_value is not None and value > max_value:
        return f"{what} {value} is out of range (at most {max_value})"
    return None


def locate_problem(
    path: Path,
    layout: Layout,
    *,
    as_int: bool,
    max_id: int | None = None,
    what: str = "node id",
    parse_failed: bool = False,
) -> None:
    """Raise an :class:`InputError` for the first bad edge line, if there is one.

    Checks the column count, empty ids, and (``as_int``) that ids are
    non-negative 64-bit integers no larger than ``max_id``. ``parse_failed``
    (Polars could not read the file as strings): bytes that are not UTF-8 and
    an unbalanced ``"`` in a comma-separated line are bad too (a quoted field
    spanning lines is no edge list's).
    """
    expected = "src dst" if layout.ncols == 2 else "src dst weight"
    quoted = parse_failed and layout.separator == ","

    def check(text: str) -> str | None:
        if parse_failed and REPLACEMENT in text:
            return NOT_UTF8
        if quoted and text.count('"') % 2:
            return "an unbalanced '\"' (a quoted id must end on its line)"
        tokens = layout.tokens(text)
        if len(tokens) != layout.ncols:
            return (
                f"expected {layout.ncols} columns ({expected}), found {len(tokens)}"
                + layout.separator_hint(text)
            )
        for token in tokens[:2]:
            if not token:
                return f"empty {what}"
            if as_int:
                problem = int_token_problem(token, what, max_id, " (ids are declared integers)")
                if problem:
                    return problem
        return None

    columns = [as_int, as_int] + [False] * (layout.ncols - 2)
    valid = line_regex(layout.separator, columns)

    def suspect(line: pl.Expr) -> pl.Expr:
        bad = ~line.str.contains(valid)
        if parse_failed:
            bad = bad | line.str.contains(REPLACEMENT, literal=True)
        if quoted:
            bad = bad | line.str.contains('"', literal=True)
        if as_int and max_id is not None:
            tokens = split_expr(line, layout.separator)
            for i in (0, 1):
                value = tokens.list.get(i, null_on_oob=True).str.to_integer(strict=False)
                bad = bad | (value > max_id).fill_null(False)
        return bad

    find_bad_line(path, check, suspect, skip_lines=layout.skip_lines)


# Why auto reads strings (warned) -----------------------------------------------------


REASON_PREFIX_LINES = 1000
"""Lines :func:`string_ids_reason` checks in Python before a Polars pass over the file."""


class StringIdsWarning(UserWarning):
    """``id_type="auto"`` reads the ids of a file as strings: not every one is a
    64-bit integer (the message names the file and the first line whose id is not)."""


def polars_int_problem(field: str, what: str = "node id") -> str | None:
    """Why Polars' CSV reader does not read the raw (unstripped) ``field`` as an
    int64, or ``None`` when it does (blanks before the digits and a sign are
    read, blanks after them are not)."""
    token = field.strip()
    if INT_RE.fullmatch(token) is None:
        return f"{what} {token!r} is not an integer"
    if field.rstrip() != field:
        return f"{what} {field!r} is not an integer (blanks after the digits)"
    if not INT64_MIN <= int(token) <= INT64_MAX:
        return f"{what} {token} does not fit in 64 bits"
    return None


def string_ids_reason(path: Path, layout: Layout, source: Path | None = None) -> str:
    """Why ``id_type="auto"`` reads the ids of ``path`` (laid out as ``layout``) as
    strings: ``"NAME:LINE: problem"`` for the first line whose id Polars does not
    read as a 64-bit integer, also warned (:class:`StringIdsWarning`) naming the
    file and line. ``source``: the file to name (``path`` is its decompressed
    copy). Costs a pass over the file up to that line (only when auto falls back)."""
    source = path if source is None else source
    sep = layout.separator

    def check(text: str) -> str | None:
        text = text.rstrip("\r")
        fields = text.split(sep) if sep in (",", "\t") else text.split()
        for field in fields[:2]:
            quoted = field.strip()
            if sep == "," and len(quoted) >= 2 and quoted[0] == quoted[-1] == '"':
                field = quoted[1:-1]
            problem = polars_int_problem(field)
            if problem:
                return problem
        return None

    digits = r"\+?\d{1,18}"
    if sep in (",", "\t"):
        pad = "[ \t]*" if sep == "," else " *"
        valid = rf"^{pad}{digits}{sep}{pad}{digits}({sep}.*)?\r?$"
    else:
        valid = rf"^\s*{digits}\s+{digits}(\s.*)?$"
    found = None
    for number, text in iter_lines(path):  # usually the first data line (a string-id file)
        if number > REASON_PREFIX_LINES:
            found = first_bad_line(
                path, check, lambda line: ~line.str.contains(valid), skip_lines=layout.skip_lines
            )
            break
        if number > layout.skip_lines and not is_skipped(text):
            problem = check(text)
            if problem:
                found = number, problem
                break
    if found is None:  # not expected: the check follows Polars' rule
        where, problem = f"{source}", "Polars does not read every node id as a 64-bit integer"
        reason = f"{source.name}: {problem}"
    else:
        where, problem = f"{source}:{found[0]}", found[1]
        reason = f"{source.name}:{found[0]}: {problem}"
    warnings.warn(
        f"{where}: {problem}: --id-type auto reads every id of the file as a string "
        "(nodes numbered in string order, not by their integer values); pass --id-type "
        "string to read strings without this warning, or --id-type int to make it an error",
        StringIdsWarning,
        stacklevel=3,
    )
    return reason


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


def _scan(path: Path, layout: Layout, dtype: pl.DataType | type[pl.DataType]) -> pl.LazyFrame:
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
        df = _collect(_scan(path, layout, dtype), path)
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
            (:mod:`gnncore.io.edge_text`) first, Polars taking over where it
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
    labels and splits (:mod:`gnncore.io.node_table`)."""
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
