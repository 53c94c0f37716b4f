"""The shared canonicalisation: remapping, self-loops, duplicates, both key paths."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import gnncore.io.canonical as canonical
from gnncore.io.canonical import canonicalize, remap_int_ids, remap_str_ids


def brute(src, dst, directed, rel=None):
    rows = set()
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        if s == d:
            continue
        if not directed:
            s, d = min(s, d), max(s, d)
        rows.add((s, d) if rel is None else (s, int(rel[i]), d))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]) if rel is not None else r)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("force_lexsort", [False, True])
def test_canonicalize_matches_brute_force(directed, force_lexsort, monkeypatch):
    if force_lexsort:
        monkeypatch.setattr(canonical, "INT64_MAX", 0)
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 30, 500), rng.integers(0, 30, 500)
    out = canonicalize(src, dst, 30, directed=directed)
    expected = brute(src, dst, directed)
    assert list(zip(out.src.tolist(), out.dst.tolist())) == expected
    loops = int((src == dst).sum())
    assert out.self_loops_removed == loops
    assert out.duplicates_removed == 500 - loops - len(expected)
    assert out.num_input_edges == 500


@pytest.mark.parametrize("force_lexsort", [False, True])
def test_canonicalize_relations(force_lexsort, monkeypatch):
    if force_lexsort:
        monkeypatch.setattr(canonical, "INT64_MAX", 0)
    rng = np.random.default_rng(2)
    src, dst, rel = (rng.integers(0, 12, 400), rng.integers(0, 12, 400), rng.integers(0, 4, 400))
    out = canonicalize(src, dst, 12, directed=True, rel=rel, num_relations=4)
    assert out.rel.dtype == np.int32
    got = sorted(zip(out.src.tolist(), out.rel.tolist(), out.dst.tolist()))
    assert got == brute(src, dst, True, rel)


def test_remap_int_dense_and_sparse():
    src, dst = np.array([10, 3, 3]), np.array([3, 7, 10])
    s, d, raw = remap_int_ids(src, dst)
    assert raw.tolist() == [3, 7, 10] and s.tolist() == [2, 0, 0] and d.tolist() == [0, 1, 2]
    big = np.array([2**40, 5, 2**50]), np.array([5, 2**40, 2**40])
    s, d, raw = remap_int_ids(*big)
    assert raw.tolist() == [5, 2**40, 2**50] and s.tolist() == [1, 0, 2]
    assert d.tolist() == [0, 1, 1]


def test_remap_str():
    s, d, raw = remap_str_ids(pl.Series(["b", "a"]), pl.Series(["c", "b"]))
    assert raw.to_list() == ["a", "b", "c"] and s.tolist() == [1, 0] and d.tolist() == [2, 1]
