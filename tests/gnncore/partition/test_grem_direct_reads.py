"""GREM's edge files read past the page cache (``EdgeFile.direct``, O_DIRECT with the
next chunk read ahead on a thread) give the same rows, and so the same partition,
as reads through it; files larger than half the process's memory are read so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_graph
from gnncore import _C
from gnncore.partition import PartitionOptions, edge_stream
from gnncore.partition.edge_stream import EdgeFile, read_uncached
from gnncore.partition.grem import GremPartitioner
from gnncore.store import GraphDir


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_direct_reads_give_the_rows_at_any_offset_and_length(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, 1 << 30, (3001, 2)).astype(dtype)  # not a whole number of pages
    np.save(tmp_path / "e.npy", pairs)
    cached = EdgeFile.from_npy(tmp_path / "e.npy")
    direct = dataclasses.replace(cached, direct=True)
    assert direct.spec().direct and not cached.spec().direct
    for begin, count in [(0, 3001), (0, 1), (1, 511), (512, 1000), (2999, 10), (3001, 5)]:
        np.testing.assert_array_equal(direct.read(begin, count), pairs[begin : begin + count])


def test_a_partition_read_past_the_page_cache_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pass of the recursion (plan, GREM passes, restreams, splits into the
    sub-problems' files, final refinement) reads through the direct path when the
    share is 0: the labels are those of cached reads."""
    graph = GraphDir.open(
        planted_graph(tmp_path / "g", num_nodes=6000, communities=4, degree=8, features=2)
    )

    def partition(share: float) -> np.ndarray:
        monkeypatch.setattr(edge_stream, "UNCACHED_SHARE", share)
        work = tmp_path / f"work-{share}"
        work.mkdir()
        grem = GremPartitioner(chunk=0.05, seed_method="clusters", tmp_dir=work)
        return grem.assign(graph, PartitionOptions(parts=4, seed=3))

    specs: list[bool] = []
    real_spec = EdgeFile.spec

    def spy(self: EdgeFile) -> _C.EdgeFileSpec:
        specs.append(self.direct)
        return real_spec(self)

    monkeypatch.setattr(EdgeFile, "spec", spy)
    cached = partition(float("inf"))
    assert specs and not any(specs)
    specs.clear()
    direct = partition(0.0)
    assert specs and all(specs)
    np.testing.assert_array_equal(direct, cached)


def test_only_files_past_half_the_process_memory_are_read_direct(monkeypatch) -> None:
    monkeypatch.setattr("gnncore.usage.process_budget", lambda: 8 << 30)
    assert not read_uncached(4 << 30)
    assert read_uncached((4 << 30) + 1)
    big = EdgeFile.raw("/nonexistent", "int32", (4 << 30) // 8 + 1)
    small = EdgeFile.raw("/nonexistent", "int64", (4 << 30) // 16)
    assert big.direct and not small.direct
