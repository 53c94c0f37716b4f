"""``edges.parquet`` streamed from sorted packed keys, byte-identical to
Polars' ``write_parquet`` of the whole frame."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
from polars.io.plugins import register_io_source

from gnncore.store.edge_keys import split_keys
from gnncore.store.writer import PARQUET_OPTIONS


def parquet_row_groups(num_rows: int) -> list[int]:
    """The row-group sizes Polars' ``write_parquet`` (default settings) cuts a
    frame of ``num_rows`` rows into, probed on a column of nulls (which takes no
    memory): a stream fed in these batches gets the same file, byte for byte."""
    buffer = io.BytesIO()
    frame = pl.DataFrame({"x": pl.repeat(None, num_rows, eager=True)})
    frame.write_parquet(buffer, **PARQUET_OPTIONS)
    buffer.seek(0)
    meta = pq.ParquetFile(buffer).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def write_edges_parquet(path: Path, num_rows: int, key_blocks: Iterable[np.ndarray]) -> None:
    """Write ``num_rows`` sorted edges, given as blocks of packed keys ``src << 32 |
    dst`` of any sizes, as ``edges.parquet`` (``src``, ``dst``), streamed in the
    row groups Polars would cut: byte-identical to ``DataFrame.write_parquet``
    of the whole frame."""
    groups = parquet_row_groups(num_rows)
    schema = {"src": pl.Int64, "dst": pl.Int64}

    def source(*_: Any) -> Iterator[pl.DataFrame]:
        blocks = iter(key_blocks)
        held, at = np.zeros(0, dtype=np.uint64), 0
        for size in groups:
            while len(held) - at < size:
                held, at = np.concatenate([held[at:], next(blocks)]), 0
            src, dst = split_keys(held[at : at + size])
            at += size
            yield pl.DataFrame({"src": src, "dst": dst})

    if not groups:
        pl.DataFrame(schema=schema).write_parquet(path, **PARQUET_OPTIONS)
        return
    register_io_source(source, schema=schema).sink_parquet(path, **PARQUET_OPTIONS)
