"""The layout of a text edge list: its lines, separator, header and columns.

:func:`sniff` works the layout out from the first lines (the rules are listed
in :mod:`gnncore.io.readers.edgelist`); :class:`Layout` splits a line as the
parsers do. Only ``.gz`` compression is read (detected by its magic bytes).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnncore.errors import InputError
from gnncore.io.compression import gzip_error, is_gzip

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
