"""Parquet edge tables: column choice, id kinds, row-numbered errors."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from gnncore.errors import InputError
from gnncore.io import ingest
from gnncore.store import GraphDir


def check(out: Path) -> GraphDir:
    graph = GraphDir.open(out)
    graph.validate(checksums=True)
    return graph


def test_src_dst_columns_win(tmp_path):
    path = tmp_path / "e.parquet"
    pl.DataFrame(
        {"weight": [1.0, 2.0, 3.0, 4.0], "dst": [20, 10, 30, 30], "src": [10, 20, 30, 10]}
    ).write_parquet(path)
    report = ingest(path, tmp_path / "out")
    assert report.format == "parquet" and report.details["columns"] == ["src", "dst"]
    assert (
        report.num_input_edges,
        report.self_loops_removed,
        report.duplicates_removed,
        report.num_canonical_edges,
    ) == (4, 1, 1, 2)
    graph = check(tmp_path / "out")
    assert graph.node_ids()["raw_id"].to_list() == [10, 20, 30]
    assert graph.edges().select("src", "dst").rows() == [(0, 1), (0, 2)]


def test_first_two_columns_and_string_ids(tmp_path):
    path = tmp_path / "e.parquet"
    pl.DataFrame({"from": ["x", "y", "z"], "to": ["y", "z", "x"], "t": [1, 2, 3]}).write_parquet(
        path
    )
    report = ingest(path, tmp_path / "out", directed=True)
    assert report.details["columns"] == ["from", "to"] and report.details["id_type"] == "string"
    assert report.num_canonical_edges == 3 and report.directed
    assert check(tmp_path / "out").node_ids()["raw_id"].to_list() == ["x", "y", "z"]


def test_string_column_as_int(tmp_path):
    path = tmp_path / "e.parquet"
    pl.DataFrame({"src": ["1", "2"], "dst": ["2", "3"]}).write_parquet(path)
    assert ingest(path, tmp_path / "a", id_type="int").details["id_type"] == "int"
    pl.DataFrame({"src": ["1", "2", "q"], "dst": ["2", "3", "1"]}).write_parquet(path)
    with pytest.raises(InputError) as info:
        ingest(path, tmp_path / "b", id_type="int")
    assert str(info.value) == (
        f"{path}: row 2: node id 'q' in column 'src' is not an integer (ids are declared integers)"
    )
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("frame", "row", "problem"),
    [
        ({"src": [1, 2, -3], "dst": [2, 3, 1]}, 2, "negative node id -3 in column 'src'"),
        ({"src": [1, 2, 3], "dst": [2, None, 1]}, 1, "missing node id in column 'dst'"),
    ],
)
def test_bad_rows(tmp_path, frame, row, problem):
    path = tmp_path / "e.parquet"
    pl.DataFrame(frame).write_parquet(path)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        ingest(path, out)
    assert str(info.value) == f"{path}: row {row}: {problem}"
    assert not out.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_float_ids_and_empty_and_garbage(tmp_path):
    path = tmp_path / "e.parquet"
    pl.DataFrame({"src": [1.0], "dst": [2.0]}).write_parquet(path)
    with pytest.raises(InputError, match="node ids must be integers or strings"):
        ingest(path, tmp_path / "out")
    pl.DataFrame({"src": [], "dst": []}, schema={"src": pl.Int64, "dst": pl.Int64}).write_parquet(
        path
    )
    with pytest.raises(InputError, match="empty table: no edges"):
        ingest(path, tmp_path / "out")
    path.write_bytes(b"this is not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        ingest(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
