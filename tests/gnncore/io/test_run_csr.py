"""Bounded ingestion's CSR of keys on disk (:mod:`gnncore.io.bounded.csr`): the
ids are mapped once, then the row ranges come from one split of the mapped run
and one fill per range -- never a pass over all keys per range -- and the graph
directory is the in-memory path's, byte for byte."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gnncore import _C
from gnncore.io import ingest
from gnncore.store import GraphDir
from gnncore.store.edge_keys import split_keys

TINY = 64 << 10  # keys spill to disk; ranges of ~2,700 CSR entries


@pytest.fixture
def passes(monkeypatch) -> Counter:
    """Calls of the CSR kernels, counted (the real kernels still run)."""
    calls: Counter = Counter()
    names = ("split_key_run", "fill_csr_range", "fill_csr_rows", "count_key_ends")
    for name in (*names, "merge_map_key_runs"):
        real = getattr(_C, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(_C, name, spy)
    return calls


def write_csv(path: Path, src: np.ndarray, dst: np.ndarray) -> Path:
    path.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    return path


def assert_same_dir(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def graph_edges(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "random":  # sparse ids (mapped by binary search), repeats, loops
        ids = rng.choice(1 << 40, 2500, replace=False)
        src, dst = ids[rng.integers(0, 2500, 12000)], ids[rng.integers(0, 2500, 12000)]
        return src, dst
    # a hub joined to and from every node (a row longer than a range alone)
    # among dense ids with gaps (mapped through the lookup table)
    ids = np.sort(rng.choice(9000, 4000, replace=False))
    hubs = np.full(len(ids), ids[1234])
    others = ids[rng.integers(0, 4000, (2, 3000))]
    src = np.concatenate([hubs, ids, others[0]])
    dst = np.concatenate([ids, hubs, others[1]])
    return src, dst


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("kind", ["random", "hub"])
def test_many_row_ranges_one_split_same_directory(tmp_path, passes, directed, kind):
    src, dst = graph_edges(kind, seed=11)
    source = write_csv(tmp_path / "g.csv", src, dst)
    mem = ingest(source, tmp_path / "mem", memory_budget=None, directed=directed, seed=5)
    passes.clear()
    ext = ingest(source, tmp_path / "ext", memory_budget=TINY, directed=directed, seed=5)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")
    GraphDir.open(tmp_path / "ext").validate(checksums=True)
    assert ext.num_edges == mem.num_edges
    # several row ranges, filled from one split of the mapped run: no range
    # reads all keys (fill_csr_rows), the ids are mapped and counted once
    ranges = passes["fill_csr_range"]
    assert ranges >= 3, passes
    assert passes["split_key_run"] == 1
    assert passes["fill_csr_rows"] == 0
    if kind == "hub":  # dense ids: mapped and counted in the keys' last merge
        assert passes["merge_map_key_runs"] == 1 and passes["count_key_ends"] == 0
    else:  # sparse ids: the merged run mapped by binary search, then counted
        assert passes["merge_map_key_runs"] == 0 and passes["count_key_ends"] >= 1
    # nothing left beside the outputs: the range runs are removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "g.csv", "mem"]


def test_one_range_reads_the_run_itself(tmp_path, passes):
    """When all rows fit one range the mapped run is the range's own sub-run:
    nothing is split. (Directed, ~2,360 distinct edges among 300 nodes: past the
    2,048 keys the sorter holds under this budget, within the ~2,520 entries of
    a range: half of what the budget leaves beside 16 bytes a node.)"""
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 300, (2, 2400))
    source = write_csv(tmp_path / "g.csv", src, dst)
    ingest(source, tmp_path / "mem", memory_budget=None, directed=True)
    passes.clear()
    ingest(source, tmp_path / "ext", memory_budget=TINY, directed=True)
    assert_same_dir(tmp_path / "mem", tmp_path / "ext")
    assert passes["merge_map_key_runs"] == 1  # the keys went to disk
    assert passes["split_key_run"] == 0
    assert passes["fill_csr_range"] == 1


def test_fill_csr_range_refuses_keys_that_do_not_match_the_offsets(tmp_path):
    writer = _C.KeyRunWriter(str(tmp_path / "run.keys"))
    writer.append(np.array([0 << 32 | 1, 0 << 32 | 2, 1 << 32 | 2], dtype=np.uint64))
    writer.commit()
    indptr = np.array([0, 0, 1, 2], dtype=np.int64)  # claims 2 entries, the keys give 3
    next_rank = np.array([0, 2, 3], dtype=np.int64)
    indices = np.empty(2, dtype=np.int32)
    eid = np.empty(2, dtype=np.int64)
    cursor = np.empty(3, dtype=np.int64)
    with pytest.raises(ValueError, match="offsets|outside"):
        _C.fill_csr_range(str(tmp_path / "run.keys"), None, 0, 3, indptr, next_rank, cursor,
                          indices, eid)  # fmt: skip


def read_run(path: Path) -> np.ndarray:
    reader = _C.KeyRunReader(str(path))
    out = np.empty(reader.count, dtype=np.uint64)
    assert reader.read(out) == reader.count
    return out


def write_runs(tmp_path: Path, pairs: list[np.ndarray]) -> list[str]:
    """One key run per ``(2, m)`` array of ``(a, b)`` ids: its distinct keys, sorted."""
    paths = []
    for r, (a, b) in enumerate(pairs):
        keys = np.unique((a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64))
        writer = _C.KeyRunWriter(str(tmp_path / f"r{r}.keys"))
        writer.append(keys)
        writer.commit()
        paths.append(str(tmp_path / f"r{r}.keys"))
    return paths


@pytest.mark.parametrize("lut_dtype", [np.int32, np.int64])
def test_merge_map_key_runs_is_the_merge_then_the_map_and_the_counts(tmp_path, lut_dtype):
    """Against NumPy: the distinct keys of every run, ids mapped through the
    table (monotone, with gaps), and each node's ends counted one slot up."""
    rng = np.random.default_rng(7)
    raw = np.sort(rng.choice(5000, 700, replace=False))  # the raw ids in use
    lut = np.full(5000, -1, dtype=lut_dtype)
    lut[raw] = np.arange(len(raw))
    # overlapping runs: keys repeated across them come once
    paths = write_runs(tmp_path, [raw[rng.integers(0, len(raw), (2, 3000))] for _ in range(5)])
    every = np.unique(np.concatenate([read_run(Path(p)) for p in paths]))
    a, b = split_keys(every)
    want = (lut[a].astype(np.uint64) << np.uint64(32)) | lut[b].astype(np.uint64)
    major = np.zeros(len(raw) + 1, dtype=np.int64)
    minor = np.zeros(len(raw) + 1, dtype=np.int64)
    count = _C.merge_map_key_runs(paths, str(tmp_path / "out.keys"), 4096, lut, major, minor)
    assert count == len(every)
    np.testing.assert_array_equal(read_run(tmp_path / "out.keys"), want)
    n = len(raw)
    np.testing.assert_array_equal(major[1:], np.bincount(lut[a], minlength=n))
    np.testing.assert_array_equal(minor[1:], np.bincount(lut[b], minlength=n))
    assert major[0] == minor[0] == 0
    # a table that is not monotone would break the run's order: refused
    shuffled = lut.copy()
    shuffled[raw] = rng.permutation(len(raw))
    with pytest.raises(ValueError, match="increase strictly"):
        _C.merge_map_key_runs(paths, str(tmp_path / "bad.keys"), 4096, shuffled, major, minor)
    with pytest.raises(ValueError, match="outside the lookup table"):
        _C.merge_map_key_runs(paths, str(tmp_path / "bad.keys"), 4096, lut[:100], major, minor)


@pytest.mark.parametrize("direct", [False, True])
def test_merge_map_key_runs_hands_many_blocks_to_its_second_thread(tmp_path, direct):
    """Past one block (65,536 keys) the merge, the mapping and the counting run
    on three threads: the same keys and counts, written past the page cache or
    not, and a failure in a late block still reaches the caller and leaves no
    file behind."""
    rng = np.random.default_rng(3)
    n = 40_000
    lut = np.arange(n, dtype=np.int64) * 2  # monotone, with gaps
    paths = write_runs(tmp_path, [rng.integers(0, n, (2, 90_000)) for _ in range(3)])
    every = np.unique(np.concatenate([read_run(Path(p)) for p in paths]))
    assert len(every) > 4 * (1 << 16)
    a, b = split_keys(every)
    major = np.zeros(2 * n, dtype=np.int64)
    minor = np.zeros(2 * n, dtype=np.int64)
    out = str(tmp_path / "out.keys")
    count = _C.merge_map_key_runs(paths, out, 1 << 16, lut, major, minor, direct=direct)
    assert count == len(every)
    want = (lut[a].astype(np.uint64) << np.uint64(32)) | lut[b].astype(np.uint64)
    np.testing.assert_array_equal(read_run(tmp_path / "out.keys"), want)
    np.testing.assert_array_equal(major[1:], np.bincount(lut[a], minlength=2 * n - 1))
    np.testing.assert_array_equal(minor[1:], np.bincount(lut[b], minlength=2 * n - 1))
    late = lut.copy()
    late[n - 10] = late[n - 20]  # the order breaks among the last nodes' keys only
    with pytest.raises(ValueError, match="increase strictly"):
        _C.merge_map_key_runs(paths, str(tmp_path / "bad.keys"), 1 << 16, late, major, minor,
                              direct=direct)  # fmt: skip
    assert not list(tmp_path.glob("bad.keys*"))


@pytest.mark.parametrize("span", [1_000, 3 << 20, (1 << 32) - 1])
def test_split_key_run_puts_each_key_in_the_range_of_its_minor_id(tmp_path, span):
    """Against NumPy's searchsorted of the bounds: ranges of every width,
    empty ones among them, over a span of minor ids below and far above the
    split's 2^16-block table (one row a block, or many)."""
    rng = np.random.default_rng(span % 1000)
    a = rng.integers(0, 1 << 20, 40_000).astype(np.uint64)
    b = rng.integers(0, span, 40_000).astype(np.uint64)
    keys = np.unique((a << np.uint64(32)) | b)
    run = tmp_path / "run.keys"
    writer = _C.KeyRunWriter(str(run))
    writer.append(keys)
    writer.commit()
    inner = np.sort(rng.choice(span - 1, 9, replace=False) + 1)
    bounds = np.concatenate([[0], inner[:4], inner[3:4], inner[4:], [span]]).astype(np.int64)
    paths = [tmp_path / f"rows-{i}" for i in range(len(bounds) - 1)]
    assert _C.split_key_run(str(run), bounds, [str(p) for p in paths], 4096) == len(keys)
    minor = (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    bucket = np.searchsorted(bounds, minor, side="right") - 1
    for i, path in enumerate(paths):
        np.testing.assert_array_equal(read_run(path), keys[bucket == i])
    assert len(read_run(paths[4])) == 0  # bounds[4] == bounds[5]: an empty range
    with pytest.raises(ValueError, match="minor id outside"):
        _C.split_key_run(str(run), bounds[:-1], [str(p) for p in paths[:-1]], 4096)
