"""The first bad line of a text edge list (the error path only), and why
``id_type="auto"`` reads a file's ids as strings (:class:`StringIdsWarning`).

A vectorised Polars pass over the raw lines flags the lines a regex does not
accept; a Python check words the problem of the first truly bad one (a Python
pass over every line is only the fallback when Polars cannot split the file
into lines).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gnncore.errors import InputError
from gnncore.io.compression import gzip_error, is_gzip
from gnncore.io.readers.edge_layout import (
    COMMENT,
    INT64_MAX,
    INT64_MIN,
    INT_RE,
    NOT_UTF8,
    REPLACEMENT,
    Layout,
    is_skipped,
    iter_lines,
)
from gnncore.lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

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
