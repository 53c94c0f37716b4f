"""Row counts of a Parquet file read from its footer, without pyarrow.

A Parquet file ends with its ``FileMetaData`` (Thrift compact protocol), the
metadata's length (4 bytes, little-endian) and ``PAR1``. Of the metadata only
the row groups' ``num_rows`` are read here (field 4 of ``FileMetaData``, field
3 of each ``RowGroup``); every other field is skipped by its type. Ingestion
and the graph directory's writer need no more than that, and importing pyarrow
for it cost every ``gnncore ingest`` 0.065 CPU s of start-up.
"""

from __future__ import annotations

import os
import struct

MAGIC = b"PAR1"

_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT, _UUID = 9, 10, 11, 12, 13
_FIXED = {_TRUE: 0, _FALSE: 0, _BYTE: 1, _DOUBLE: 8, _UUID: 16}
_ROW_GROUPS = 4  # FileMetaData.row_groups: list<RowGroup>
_NUM_ROWS = 3  # FileMetaData.num_rows and RowGroup.num_rows: i64


class _Compact:
    """A cursor over Thrift compact-protocol bytes (the subset Parquet uses)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            value = self.byte()
            result |= (value & 0x7F) << shift
            if value < 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def field(self, last: int) -> tuple[int, int]:
        """``(field id, type)`` of the next field of a struct (type 0: its end)."""
        header = self.byte()
        kind = header & 0x0F
        if kind == _STOP:
            return 0, _STOP
        delta = header >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_header(self) -> tuple[int, int]:
        """``(size, element type)`` of a list or set."""
        header = self.byte()
        size = header >> 4
        return (self.varint() if size == 15 else size), header & 0x0F

    def skip(self, kind: int) -> None:
        """Skip one value of type ``kind``."""
        if kind in _FIXED:
            self.at += _FIXED[kind]
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _BINARY:
            size = self.varint()
            self.at += size
        elif kind in (_LIST, _SET):
            size, element = self.list_header()
            for _ in range(size):
                self.skip(_BYTE if element in (_TRUE, _FALSE) else element)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4)
                    self.skip(types & 0x0F)
        elif kind == _STRUCT:
            last = 0
            while True:
                last, field_kind = self.field(last)
                if field_kind == _STOP:
                    return
                self.skip(field_kind)
        else:
            raise ValueError(f"unknown Thrift compact type {kind}")


def _metadata(path: str | os.PathLike[str] | bytes) -> bytes:
    """The footer's ``FileMetaData`` bytes of the file at ``path`` (or of the
    whole file given as ``bytes``)."""
    if isinstance(path, bytes):
        if len(path) < 12:
            raise ValueError("not a Parquet file (too short)")
        tail = path[-8:]
        size = struct.unpack("<I", tail[:4])[0]
        if tail[4:] != MAGIC or size + 8 > len(path):
            raise ValueError("not a Parquet file (no PAR1 footer)")
        return path[-8 - size : -8]
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        length = fh.tell()
        if length < 12:
            raise ValueError(f"{os.fspath(path)}: not a Parquet file (too short)")
        fh.seek(length - 8)
        tail = fh.read(8)
        size = struct.unpack("<I", tail[:4])[0]
        if tail[4:] != MAGIC or size + 8 > length:
            raise ValueError(f"{os.fspath(path)}: not a Parquet file (no PAR1 footer)")
        fh.seek(length - 8 - size)
        return fh.read(size)


def _footer_rows(path: str | os.PathLike[str] | bytes) -> tuple[int, list[int]]:
    """``FileMetaData.num_rows`` and each row group's ``num_rows``, in order."""
    reader = _Compact(_metadata(path))
    total, rows = 0, list[int]()
    last = 0
    while True:
        last, kind = reader.field(last)
        if kind == _STOP:
            return total, rows
        if last == _NUM_ROWS and kind == _I64:
            total = reader.zigzag()
        elif last == _ROW_GROUPS and kind == _LIST:
            size, _ = reader.list_header()
            rows += [_group_rows(reader) for _ in range(size)]
        else:
            reader.skip(kind)


def _group_rows(reader: _Compact) -> int:
    """``num_rows`` of the ``RowGroup`` struct at the cursor (read to its end)."""
    last, count = 0, 0
    while True:
        last, kind = reader.field(last)
        if kind == _STOP:
            return count
        if last == _NUM_ROWS and kind == _I64:
            count = reader.zigzag()
        else:
            reader.skip(kind)


def row_group_rows(path: str | os.PathLike[str] | bytes) -> list[int]:
    """The number of rows of each row group of a Parquet file, in order (the
    file's path, or its whole contents as ``bytes``)."""
    return _footer_rows(path)[1]


def parquet_num_rows(path: str | os.PathLike[str] | bytes) -> int:
    """The number of rows of a Parquet file (``FileMetaData.num_rows``, what
    pyarrow's ``ParquetFile(path).metadata.num_rows`` gives)."""
    return _footer_rows(path)[0]
