"""Row counts from a Parquet footer (``gnncore.store.parquet_footer``) are what
pyarrow reads, for files of every shape the project writes and more."""

from __future__ import annotations

import io

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnncore.store.parquet_footer import parquet_num_rows, row_group_rows
from gnncore.store.writer import PARQUET_OPTIONS


def pyarrow_rows(path) -> tuple[int, list[int]]:
    meta = pq.ParquetFile(path).metadata
    return meta.num_rows, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def test_polars_files_of_many_row_groups_and_none(tmp_path):
    for rows in (0, 1, 10, 300_000):
        path = tmp_path / f"edges-{rows}.parquet"
        frame = pl.DataFrame(
            {"src": pl.arange(0, rows, eager=True), "dst": pl.repeat(3, rows, eager=True)}
        )
        frame.write_parquet(path, **PARQUET_OPTIONS)
        total, groups = pyarrow_rows(path)
        assert row_group_rows(path) == groups
        assert parquet_num_rows(path) == total == rows
        assert row_group_rows(path.read_bytes()) == groups  # the whole file as bytes
    assert len(row_group_rows(tmp_path / "edges-300000.parquet")) > 1


def test_nested_types_statistics_and_key_value_metadata_are_skipped(tmp_path):
    # lists, structs, maps, strings, booleans, doubles and the file's key-value
    # metadata all sit in the footer before or inside the row groups
    table = pa.table(
        {
            "ids": pa.array([[1, 2], [], None, [4]] * 50, type=pa.list_(pa.int64())),
            "point": pa.array([{"x": 1.5, "ok": True}, None, {"x": -2.0, "ok": False}, None] * 50),
            "tags": pa.array(
                [[("a", 1)], [], None, [("b", 2), ("c", 3)]] * 50,
                type=pa.map_(pa.string(), pa.int32()),
            ),
            "name": pa.array(["x" * 300, "y", None, ""] * 50),
        }
    ).replace_schema_metadata({"origin": "test", "blob": "z" * 1000})
    path = tmp_path / "nested.parquet"
    pq.write_table(table, path, row_group_size=37, write_statistics=True)
    total, groups = pyarrow_rows(path)
    assert row_group_rows(path) == groups and len(groups) == 6
    assert parquet_num_rows(path) == total == 200


def test_not_parquet_is_refused(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n1,2\n" * 10)
    with pytest.raises(ValueError, match="not a Parquet file"):
        row_group_rows(path)
    with pytest.raises(ValueError, match="not a Parquet file"):
        row_group_rows(b"PAR1")
    with pytest.raises(ValueError, match="not a Parquet file"):
        row_group_rows(b"PAR1" + bytes(20))
    buffer = io.BytesIO()
    pl.DataFrame({"a": [1]}).write_parquet(buffer)
    assert row_group_rows(buffer.getvalue()) == [1]
