"""Reshuffling the partition stream of a graph directory."""

from __future__ import annotations

import os

import numpy as np

from gnncore.io import ingest
from gnncore.store import GraphDir
from gnncore.store.reshuffle import reshuffle_edges


def test_reshuffle_matches_ingesting_with_that_seed(tmp_path):
    edges = tmp_path / "edges.txt"
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 60, size=(300, 2))
    edges.write_text("".join(f"{u} {v}\n" for u, v in pairs))
    ingest(edges, tmp_path / "s0", seed=0)
    ingest(edges, tmp_path / "s7", seed=7)
    copy = reshuffle_edges(tmp_path / "s0", tmp_path / "r7", seed=7)
    copy.validate(checksums=True)
    want = np.asarray(GraphDir.open(tmp_path / "s7").array("edges_shuffled"))
    got = np.asarray(copy.array("edges_shuffled"))
    assert np.array_equal(got, want)
    assert not np.array_equal(
        got, np.asarray(GraphDir.open(tmp_path / "s0").array("edges_shuffled"))
    )
    assert copy.manifest.stats["shuffle_seed"] == 7
    # Everything but the stream is shared, not copied.
    assert (
        os.stat(tmp_path / "r7" / "indices.npy").st_ino
        == os.stat(tmp_path / "s0" / "indices.npy").st_ino
    )


def test_reshuffling_a_bucket_shuffled_graph_drops_the_mark(tmp_path, monkeypatch):
    """A copy reshuffled from a bounded ingestion's bucket order is numpy's
    permutation: the in-memory order of that seed, without stats.shuffle_buckets."""
    from gnncore.io.bounded import shuffle

    monkeypatch.setattr(shuffle, "EXACT_SHUFFLE_BYTES", 0)
    edges = tmp_path / "edges.txt"
    rng = np.random.default_rng(1)
    edges.write_text("".join(f"{u} {v}\n" for u, v in rng.integers(0, 3000, size=(9000, 2))))
    ingest(edges, tmp_path / "bounded", seed=0, memory_budget=64 << 10)
    assert GraphDir.open(tmp_path / "bounded").manifest.stats["shuffle_buckets"] > 1
    ingest(edges, tmp_path / "s5", seed=5)
    copy = reshuffle_edges(tmp_path / "bounded", tmp_path / "r5", seed=5)
    assert "shuffle_buckets" not in copy.manifest.stats
    want = np.asarray(GraphDir.open(tmp_path / "s5").array("edges_shuffled"))
    assert np.array_equal(np.asarray(copy.array("edges_shuffled")), want)
