"""``edges.parquet`` streamed from packed keys (``gnncore.io.bounded.edges_parquet``):
the same bytes as the whole table written at once
(:func:`~gnncore.store.edge_table.write_edge_table`), whatever the key blocks' sizes."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest

from gnncore.io.bounded.edges_parquet import key_columns, write_edges_parquet
from gnncore.store.edge_keys import pack_keys, split_keys
from gnncore.store.edge_table import EDGE_TABLE_ROW_GROUP, write_edge_table


def test_key_columns_match_split_keys_up_to_the_largest_ids():
    rng = np.random.default_rng(0)
    src = np.concatenate([[0, 0, 2**32 - 1, 2**32 - 1], rng.integers(0, 2**32, 1000)])
    dst = np.concatenate([[0, 2**32 - 1, 0, 2**32 - 1], rng.integers(0, 2**32, 1000)])
    keys = pack_keys(src, dst)
    got, want = key_columns(keys), split_keys(keys)
    for column, expected in zip(got, want, strict=True):
        assert column.dtype == np.int64
        np.testing.assert_array_equal(column, expected)
    np.testing.assert_array_equal(got[0], src)
    np.testing.assert_array_equal(got[1], dst)
    strided = key_columns(keys[::3])  # a view, not contiguous
    np.testing.assert_array_equal(strided[0], src[::3])


def test_streamed_blocks_of_any_size_give_the_whole_tables_bytes(tmp_path):
    rng = np.random.default_rng(1)
    n = 300_000
    keys = np.sort(pack_keys(rng.integers(0, 50_000, n), rng.integers(0, 50_000, n)))
    src, dst = split_keys(keys)
    expected = tmp_path / "whole.parquet"
    write_edge_table(expected, {"src": src, "dst": dst})
    digest = hashlib.sha256(expected.read_bytes()).hexdigest()
    group = EDGE_TABLE_ROW_GROUP
    assert n < group  # one row group here: the writer's own test crosses their bounds
    cuts = [1, 7, 4095, 65_536, 2 * 65_536 + 5, n - 3, n]  # irregular blocks
    for sizes in (cuts, list(range(0, n, 1 << 17)) + [n], [n]):
        bounds = sorted(set([0, *sizes]))
        blocks = [keys[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        out = tmp_path / "streamed.parquet"
        write_edges_parquet(out, n, iter(blocks))
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    frame = pl.read_parquet(expected)
    np.testing.assert_array_equal(frame["src"].to_numpy(), src)
    np.testing.assert_array_equal(frame["dst"].to_numpy(), dst)


def test_blocks_that_do_not_hold_the_count_are_refused(tmp_path):
    keys = np.arange(10, dtype=np.uint64)
    with pytest.raises(ValueError, match="expected 11 edges, the blocks held 10"):
        write_edges_parquet(tmp_path / "short.parquet", 11, iter([keys]))


def test_no_edges_give_an_empty_frame(tmp_path):
    out = tmp_path / "empty.parquet"
    write_edges_parquet(out, 0, iter([]))
    frame = pl.read_parquet(out)
    assert frame.height == 0 and frame.schema == {"src": pl.Int64, "dst": pl.Int64}
