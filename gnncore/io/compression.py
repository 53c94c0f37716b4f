"""Compressed inputs: gzip is told by its magic bytes, and a ``.gz`` name must hold gzip.

Polars and the readers here decompress by the magic bytes, so a file named
``*.gz`` that is plain text would be read as text without complaint; every text
reader of ingestion (edge lists, node tables, OGB files, KG triples) calls
:func:`check_gzip_name` first, which costs a 2-byte read.
"""

from __future__ import annotations

from pathlib import Path

from gnncore.errors import InputError


def is_gzip(path: Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def check_gzip_name(path: Path) -> bool:
    """Whether ``path`` is gzipped (its magic bytes); raises :class:`InputError` when
    its name ends in ``.gz`` but it is not (reading it as text would misread it)."""
    gz = is_gzip(path)
    if not gz and path.name.lower().endswith(".gz"):
        raise InputError(
            "the name ends in .gz but the file is not gzip data (it does not start with "
            "the gzip magic bytes 1f 8b): compress it with gzip, or drop the .gz suffix",
            path,
        )
    return gz


def gzip_error(path: Path, exc: BaseException) -> InputError:
    """The error for gzip data that ends early or is corrupt (a decompressor's ``exc``)."""
    return InputError(f"truncated or corrupt gzip data ({exc})", path)
