"""``edges.parquet`` streamed from packed keys (``gnncore.io.bounded.edges_parquet``):
the same bytes as Polars' ``write_parquet`` of the whole frame, whatever the
key blocks' sizes."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from gnncore.io.bounded.edges_parquet import key_columns, parquet_row_groups, write_edges_parquet
from gnncore.store.edge_keys import pack_keys, split_keys
from gnncore.store.writer import PARQUET_OPTIONS


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


def test_streamed_blocks_of_any_size_give_polars_bytes(tmp_path):
    rng = np.random.default_rng(1)
    n = 300_000
    keys = np.sort(pack_keys(rng.integers(0, 50_000, n), rng.integers(0, 50_000, n)))
    groups = parquet_row_groups(n)
    assert len(groups) > 1  # blocks cross the row groups' bounds
    src, dst = split_keys(keys)
    expected = tmp_path / "whole.parquet"
    pl.DataFrame({"src": src, "dst": dst}).write_parquet(expected, **PARQUET_OPTIONS)
    digest = hashlib.sha256(expected.read_bytes()).hexdigest()
    cuts = [1, 7, groups[0] - 8, groups[0], 2 * groups[0] + 5, n - 3, n]  # irregular blocks
    for sizes in (cuts, list(range(0, n, 1 << 17)) + [n], [n]):
        bounds = sorted(set([0, *sizes]))
        blocks = [keys[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        out = tmp_path / "streamed.parquet"
        write_edges_parquet(out, n, iter(blocks))
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digest


def test_no_edges_give_an_empty_frame(tmp_path):
    out = tmp_path / "empty.parquet"
    write_edges_parquet(out, 0, iter([]))
    frame = pl.read_parquet(out)
    assert frame.height == 0 and frame.schema == {"src": pl.Int64, "dst": pl.Int64}
