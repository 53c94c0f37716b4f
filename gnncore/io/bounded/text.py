"""The text input of the bounded-memory paths, shared by the integer-id
(:mod:`~gnncore.io.bounded.parse`) and string-id (:mod:`~gnncore.io.bounded.string_ids`)
parsers: a gzipped file decompressed into the scratch directory, and Polars'
streaming reader in batches."""

from __future__ import annotations

import gzip
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gnncore.io.compression import gzip_error
from gnncore.io.readers.edge_layout import Layout
from gnncore.io.readers.edgelist import scan_edges
from gnncore.lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")


class PolarsFailed(Exception):
    """Polars could not parse the text with one layout."""


def decompress(source: Path, out: Path) -> None:
    """Write the decompressed bytes of the gzipped ``source`` to ``out``."""
    try:
        with gzip.open(source, "rb") as fin, open(out, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 22)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise gzip_error(source, exc) from exc


def polars_batches(text: Path, layout: Layout, rows: int) -> Iterator[pl.DataFrame]:
    """Integer edges of ``text`` in batches of ``rows`` by Polars' streaming reader;
    :class:`PolarsFailed` when it cannot parse the text with ``layout``."""
    lf = scan_edges(text, layout, pl.Int64)
    try:
        yield from lf.collect_batches(chunk_size=rows, engine="streaming")
    except pl.exceptions.PolarsError as exc:
        raise PolarsFailed(str(exc)) from exc
