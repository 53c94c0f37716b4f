"""The canonical edge table (``gnncore.store.edge_table``): delta-coded integer
columns in row groups of a fixed size, the same bytes however the rows are
handed over, read back by Polars and pyarrow as written."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from gnncore.store.edge_table import EdgeTableWriter, write_edge_table

COLUMNS = [("src", np.int64), ("rel", np.int32), ("dst", np.int64)]


def _table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = np.sort(rng.integers(0, 5_000, n))
    return {
        "src": src,
        "rel": rng.integers(0, 7, n).astype(np.int32),
        "dst": rng.integers(0, 2**40, n),  # past 32 bits: int64 kept
    }


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_blocks_of_any_size_give_the_bytes_of_the_whole_table(tmp_path):
    n, group = 10_000, 1_000
    columns = _table(n)
    whole = tmp_path / "whole.parquet"
    with EdgeTableWriter(whole, COLUMNS, row_group=group) as writer:
        writer.write(columns)
    digest = _digest(whole)
    meta = pq.ParquetFile(whole).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [group] * 10
    for cuts in ([1, 2, 999, 1000, 1001, 2500, 7777, 9999], list(range(0, n, 333)), [5000]):
        bounds = sorted({0, *cuts, n})
        out = tmp_path / "blocks.parquet"
        with EdgeTableWriter(out, COLUMNS, row_group=group) as writer:
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                block = {name: column[a:b].copy() for name, column in columns.items()}
                writer.write(block)
                for column in block.values():  # the caller reuses its block
                    column[:] = 0
            assert writer.rows == n
        assert _digest(out) == digest


def test_columns_read_back_as_written_and_delta_coded(tmp_path):
    columns = _table(3_001, seed=4)
    path = tmp_path / "edges.parquet"
    write_edge_table(path, columns)
    frame = pl.read_parquet(path)
    assert frame.schema == {"src": pl.Int64, "rel": pl.Int32, "dst": pl.Int64}
    for name, column in columns.items():
        np.testing.assert_array_equal(frame[name].to_numpy(), column)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert "DELTA_BINARY_PACKED" in chunk.encodings and chunk.compression == "UNCOMPRESSED"
    assert chunk.statistics.min == columns["src"].min()
    assert chunk.statistics.max == columns["src"].max()


def test_an_empty_table_keeps_its_schema(tmp_path):
    path = tmp_path / "empty.parquet"
    write_edge_table(path, {"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64)})
    frame = pl.read_parquet(path)
    assert frame.height == 0 and frame.schema == {"src": pl.Int64, "dst": pl.Int64}


def test_blocks_of_unequal_columns_are_refused(tmp_path):
    with EdgeTableWriter(tmp_path / "x.parquet", COLUMNS[::2]) as writer:
        with pytest.raises(ValueError, match="one length"):
            writer.write({"src": np.zeros(3, np.int64), "dst": np.zeros(2, np.int64)})
        writer.write({"src": np.zeros(2, np.int64), "dst": np.ones(2, np.int64)})
    assert pl.read_parquet(tmp_path / "x.parquet").height == 2
