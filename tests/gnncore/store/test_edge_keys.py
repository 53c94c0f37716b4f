"""The packed-key kernels of fast ingestion against plain NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import resident_pages
from gnncore.typing import require_csrc

require_csrc()
from gnncore import _C  # noqa: E402

SHIFT = np.uint64(32)
MASK = np.uint64(0xFFFFFFFF)


def keys_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint64) << SHIFT) | b.astype(np.uint64)


def split(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (keys >> SHIFT).astype(np.int64), (keys & MASK).astype(np.int64)


@pytest.mark.parametrize("unordered", [True, False])
def test_pack_edge_keys_drops_self_loops_and_orders_pairs(unordered: bool) -> None:
    rng = np.random.default_rng(1)
    src = rng.integers(0, 50, 5000)
    dst = rng.integers(0, 50, 5000)
    src[:3] = [0, (1 << 32) - 1, 7]
    dst[:3] = [(1 << 32) - 1, 3, 7]
    out = np.empty(len(src), dtype=np.uint64)
    kept = _C.pack_edge_keys(src, dst, unordered, out)
    keep = src != dst
    a, b = src[keep], dst[keep]
    if unordered:
        a, b = np.minimum(a, b), np.maximum(a, b)
    np.testing.assert_array_equal(out[:kept], keys_of(a, b))


@pytest.mark.parametrize("bad", [-1, 1 << 32])
def test_pack_edge_keys_names_the_edge_with_an_id_too_wide(bad: int) -> None:
    src = np.array([1, 2, bad], dtype=np.int64)
    dst = np.array([2, 3, 4], dtype=np.int64)
    with pytest.raises(ValueError, match=r"edge 2 .* outside \[0, 2\^32\)"):
        _C.pack_edge_keys(src, dst, True, np.empty(3, dtype=np.uint64))


@pytest.mark.parametrize(
    ("n", "high", "threads"),
    [(0, 10, 1), (1, 10, 2), (5000, 3, 2), (300_000, 2_000_000, 2), (300_000, 1 << 32, 1),
     (200_000, 1 << 32, 2)],
)  # fmt: skip
def test_sort_unique_keys_matches_numpy_unique(n: int, high: int, threads: int) -> None:
    rng = np.random.default_rng(n)
    keys = keys_of(rng.integers(0, high, n), rng.integers(0, high, n))
    keys = np.concatenate([keys, keys[: n // 3]])  # repeats
    expected = np.unique(keys)
    tmp = np.empty_like(keys)
    count = _C.sort_unique_keys(keys, tmp, threads)
    np.testing.assert_array_equal(keys[:count], expected)


def _bucketed_cases() -> dict[str, np.ndarray]:
    """Key sets of at least 2^18 keys (the bucketed sort) shaped to reach its
    corners: a hub whose bucket is far past the cache-sized aim, buckets of a
    few keys (insertion sort), ids of 32 bits (nothing to compact), ids in a
    few bits (few buckets, most keys repeated) and a bucket whose keys share
    every digit but one (skipped passes)."""
    rng = np.random.default_rng(7)
    n = 1 << 19
    hub = np.where(rng.random(n) < 0.4, 12_345, rng.integers(0, 2_000_000, n))
    sparse_major = np.concatenate([np.zeros(n - 600, np.int64), rng.integers(1, 1 << 31, 600)])
    return {
        "hub": keys_of(hub, rng.integers(0, 2_000_000, n)),
        "tiny buckets": keys_of(sparse_major, rng.integers(0, 1 << 20, n)),
        "32-bit ids": keys_of(rng.integers(0, 1 << 32, n), rng.integers(0, 1 << 32, n)),
        "few bits": keys_of(rng.integers(0, 8, n), rng.integers(0, 1 << 9, n)),
        "one digit varies": keys_of(np.full(n, 77), rng.integers(0, 1 << 30, n) & ~0x7FF),
    }


@pytest.mark.parametrize("case", list(_bucketed_cases()))
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bucketed_sort_unique_keys_matches_numpy_unique(case: str, threads: int) -> None:
    keys = _bucketed_cases()[case]
    keys = np.concatenate([keys, keys[::5]])  # repeats, some in other threads' runs
    np.random.default_rng(3).shuffle(keys)
    expected = np.unique(keys)
    count = _C.sort_unique_keys(keys, np.empty_like(keys), threads)
    np.testing.assert_array_equal(keys[:count], expected)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_remap_keys_maps_both_ids(dtype: type) -> None:
    lut = np.cumsum(np.random.default_rng(2).integers(0, 3, 1000)).astype(dtype)
    a = np.random.default_rng(3).integers(0, 1000, 4000)
    b = np.random.default_rng(4).integers(0, 1000, 4000)
    keys = keys_of(a, b)
    _C.remap_keys(keys, lut)
    np.testing.assert_array_equal(keys, keys_of(lut[a].astype(np.int64), lut[b].astype(np.int64)))
    with pytest.raises(ValueError, match="outside the lookup table of 1000 ids"):
        _C.remap_keys(keys_of(np.array([1000]), np.array([0])), lut)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_remap_keys_on_threads_maps_all_and_names_the_first_bad_key(threads: int) -> None:
    lut = np.cumsum(np.random.default_rng(5).integers(0, 3, 1000)).astype(np.int32)
    rng = np.random.default_rng(6)
    a, b = rng.integers(0, 1000, 200_000), rng.integers(0, 1000, 200_000)
    keys = keys_of(a, b)
    _C.remap_keys(keys, lut, threads)
    np.testing.assert_array_equal(keys, keys_of(lut[a].astype(np.int64), lut[b].astype(np.int64)))
    a[[150_000, 70_000, 190_000]] = 1000  # the first bad key is in the middle piece of 3
    with pytest.raises(ValueError, match=r"^key 70000 \(1000, "):
        _C.remap_keys(keys_of(a, b), lut, threads)


def random_canonical(num_nodes: int, m: int, directed: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, num_nodes, m), rng.integers(0, num_nodes, m)
    keep = a != b
    a, b = a[keep], b[keep]
    if not directed:
        a, b = np.minimum(a, b), np.maximum(a, b)
    return np.unique(keys_of(a, b))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_csr_from_keys_matches_build_csr_in_row_ranges_and_blocks(
    directed: bool, index_dtype: type
) -> None:
    num_nodes = 300
    keys = random_canonical(num_nodes, 5000, directed, seed=5)
    src, dst = split(keys)
    # reference: the in-memory writer's construction (GraphDirWriter.write_topology)
    if directed:
        ref_indptr, ref_indices, ref_eid = _C.build_csr(dst, src, num_nodes, True)
    else:
        ref_indptr, ref_indices, ref_eid = _C.build_csr(
            np.concatenate([dst, src]), np.concatenate([src, dst]), num_nodes, True
        )
        ref_eid = ref_eid % len(src)
    counts = np.zeros(num_nodes, dtype=np.int64)
    for block in np.array_split(keys, 3):
        _C.count_key_degrees(block, directed, counts)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    np.testing.assert_array_equal(indptr, ref_indptr)
    indices, eid = [], []
    for row_begin, row_end in [(0, 17), (17, 200), (200, num_nodes)]:
        base = indptr[row_begin]
        cursor = indptr[row_begin:row_end] - base
        size = int(indptr[row_end] - base)
        part = np.empty(size, dtype=index_dtype)
        part_eid = np.empty(size, dtype=np.int64)
        rank = 0
        for block in np.array_split(keys, 4):
            _C.fill_csr_rows(block, rank, directed, num_nodes, row_begin, cursor, part, part_eid)
            rank += len(block)
        np.testing.assert_array_equal(cursor, indptr[row_begin + 1 : row_end + 1] - base)
        indices.append(part)
        eid.append(part_eid)
    np.testing.assert_array_equal(np.concatenate(indices), ref_indices)
    np.testing.assert_array_equal(np.concatenate(eid), ref_eid)


def test_fill_csr_rows_refuses_a_slot_outside_the_range() -> None:
    keys = keys_of(np.array([0, 0]), np.array([1, 2]))
    cursor = np.ones(3, dtype=np.int64)  # row 0's second entry overflows
    with pytest.raises(ValueError, match="fills slot 2 of row 0, outside the 2 slots"):
        _C.fill_csr_rows(keys, 0, False, 3, 0, cursor, np.empty(2, np.int32), np.empty(2, np.int64))


def shuffle_state(seed: int) -> tuple[int, int, int, int, bool, int]:
    state = np.random.PCG64(seed).state
    s, inc = state["state"]["state"], state["state"]["inc"]
    low = (1 << 64) - 1
    return s >> 64, s & low, inc >> 64, inc & low, bool(state["has_uint32"]), state["uinteger"]


@pytest.mark.parametrize(("seed", "n"), [(0, 0), (0, 1), (0, 2), (7, 1000), (12345, 1_000_003)])
def test_pcg64_shuffle_is_numpys_permutation(seed: int, n: int) -> None:
    values = np.arange(n, dtype=np.uint64) * np.uint64(3) + np.uint64(1 << 40)
    expected = values[np.random.default_rng(seed).permutation(n)]
    _C.pcg64_shuffle(values, *shuffle_state(seed))
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_merge_csr_rows_matches_build_csr(directed: bool, index_dtype: type) -> None:
    num_nodes = 300
    keys = random_canonical(num_nodes, 5000, directed, seed=6)
    src, dst = split(keys)
    if directed:
        ref_indptr, ref_indices, ref_eid = _C.build_csr(dst, src, num_nodes, True)
    else:
        ref_indptr, ref_indices, ref_eid = _C.build_csr(
            np.concatenate([dst, src]), np.concatenate([src, dst]), num_nodes, True
        )
        ref_eid = ref_eid % len(src)
    transposed = np.empty_like(keys)
    _C.transpose_keys(keys, transposed)
    np.testing.assert_array_equal(transposed, keys_of(dst, src))
    by_numpy = np.sort(transposed)
    count = _C.sort_unique_keys(transposed, np.empty_like(transposed), 2, minor_sorted=True)
    assert count == len(keys)
    np.testing.assert_array_equal(transposed, by_numpy)
    starts = keys_of(np.arange(num_nodes + 1), np.zeros(num_nodes + 1, int))
    offsets = np.empty(num_nodes + 1, dtype=np.int64)
    _C.key_offsets(keys, offsets)
    np.testing.assert_array_equal(offsets, np.searchsorted(keys, starts))
    next_rank = offsets[:-1].copy()
    cursor = np.zeros(2, dtype=np.int64)
    indices, eid = [], []
    for row_begin, row_end in [(0, 17), (17, 17), (17, 200), (200, num_nodes)]:
        size = int(ref_indptr[row_end] - ref_indptr[row_begin])
        part, part_eid = np.empty(size, dtype=index_dtype), np.empty(size, dtype=np.int64)
        _C.merge_csr_rows(
            keys, transposed, directed, row_begin, row_end, cursor, next_rank, part, part_eid
        )
        indices.append(part)
        eid.append(part_eid)
    np.testing.assert_array_equal(np.concatenate(indices), ref_indices)
    np.testing.assert_array_equal(np.concatenate(eid), ref_eid)
    with pytest.raises(ValueError, match="entries, not the 1 slots given"):
        _C.merge_csr_rows(keys, transposed, directed, 0, 0, np.zeros(2, np.int64), next_rank,
                          np.empty(1, index_dtype), np.empty(1, np.int64))  # fmt: skip


def test_key_offsets_refuses_unsorted_keys_and_majors_past_the_rows() -> None:
    offsets = np.empty(4, dtype=np.int64)
    with pytest.raises(ValueError, match="not sorted at position 1"):
        _C.key_offsets(keys_of(np.array([2, 1]), np.array([0, 0])), offsets)
    with pytest.raises(ValueError, match=r"major id outside \[0, 3\)"):
        _C.key_offsets(keys_of(np.array([1, 3]), np.array([0, 0])), offsets)


@pytest.mark.parametrize("threads", [1, 2])
def test_sort_by_major_of_the_transpose_of_sorted_keys(threads: int) -> None:
    keys = random_canonical(1 << 20, 300_000, directed=True, seed=threads)
    transposed = np.empty_like(keys)
    _C.transpose_keys(keys, transposed)
    expected = np.sort(transposed)
    count = _C.sort_unique_keys(transposed, np.empty_like(keys), threads, minor_sorted=True)
    np.testing.assert_array_equal(transposed[:count], expected)


@pytest.mark.parametrize(("threads", "directed"), [(1, True), (2, True), (2, False), (3, False)])
def test_transpose_sorted_keys_is_the_sorted_transpose_and_its_offsets(
    threads: int, directed: bool
) -> None:
    num_nodes = 5000
    keys = random_canonical(num_nodes, 300_000, directed, seed=threads)
    src, dst = split(keys)
    out = np.zeros(len(keys) + 3, dtype=np.uint64)  # longer than needed: the tail is kept
    offsets = np.full(num_nodes + 1, -7, dtype=np.int64)
    _C.transpose_sorted_keys(keys, out, offsets, threads)
    np.testing.assert_array_equal(out[: len(keys)], np.sort(keys_of(dst, src)))
    np.testing.assert_array_equal(out[len(keys) :], 0)
    np.testing.assert_array_equal(offsets[1:], np.cumsum(np.bincount(dst, minlength=num_nodes)))
    assert offsets[0] == 0


def test_transpose_sorted_keys_of_a_hub_past_the_range_buffer_is_the_sorted_transpose() -> None:
    # one row with more keys than the one-thread path's range buffer (2^21):
    # the keys are scattered in one pass instead, to the same result
    hub = (1 << 21) + 10
    src = np.arange(hub + 5)
    dst = np.full(len(src), hub + 7)
    dst[-5:] = np.arange(5) + hub + 8  # a few rows after the hub
    keys = keys_of(src, dst)
    out = np.zeros(len(keys), dtype=np.uint64)
    offsets = np.empty(hub + 14, dtype=np.int64)
    _C.transpose_sorted_keys(keys, out, offsets)
    np.testing.assert_array_equal(out, np.sort(keys_of(dst, src)))
    np.testing.assert_array_equal(offsets[1:], np.cumsum(np.bincount(dst, minlength=hub + 13)))


def test_transpose_sorted_keys_refuses_unsorted_repeated_or_outside_keys() -> None:
    out, offsets = np.empty(3, dtype=np.uint64), np.empty(4, dtype=np.int64)
    with pytest.raises(ValueError, match="not sorted and distinct at position 2"):
        _C.transpose_sorted_keys(keys_of(np.array([0, 1, 1]), np.array([1, 2, 2])), out, offsets)
    with pytest.raises(ValueError, match="not sorted and distinct at position 1"):
        _C.transpose_sorted_keys(keys_of(np.array([1, 0]), np.array([2, 1])), out, offsets)
    with pytest.raises(ValueError, match=r"minor id outside \[0, 3\)"):
        _C.transpose_sorted_keys(keys_of(np.array([0, 1]), np.array([1, 3])), out, offsets)
    with pytest.raises(ValueError, match="fewer keys"):
        _C.transpose_sorted_keys(keys_of(np.arange(4), np.ones(4, int)), out, offsets)


def test_mark_present_sets_the_ids_bits_and_refuses_ids_outside() -> None:
    from gnncore.io.bounded.ids import present_ids

    rng = np.random.default_rng(3)
    ids = rng.integers(0, 1000, 5000)
    bits = np.zeros(-(-1200 // 64), dtype=np.uint64)
    _C.mark_present(bits, ids, 1200)
    _C.mark_present(bits, np.array([0, 63, 64, 1199]), 1200)  # a word's both ends, the last id
    expected = np.zeros(1200, dtype=bool)
    expected[ids] = True
    expected[[0, 63, 64, 1199]] = True
    np.testing.assert_array_equal(present_ids(bits, 1200), expected)
    # the reference: each id's bit, one at a time
    for i in range(1200):
        assert bool(int(bits[i // 64]) >> (i % 64) & 1) == expected[i]
    for bad in (1200, -1):
        with pytest.raises(ValueError, match=r"outside \[0, 1200\)"):
            _C.mark_present(bits, np.array([5, bad]), 1200)
    with pytest.raises(ValueError, match="fewer than 1281 ids"):
        _C.mark_present(bits, np.array([5]), 1281)


# Key runs (delta-coded sorted keys) and the bounded bucket shuffle ------------------------


def sorted_keys(rng: np.random.Generator, n: int, spread: int) -> np.ndarray:
    """``n`` or fewer distinct sorted keys: graph-like (gaps of every size,
    consecutive keys, key 0 and the largest key)."""
    keys = np.unique(rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) >> spread)
    return np.unique(np.concatenate([keys, np.array([0, 1, 2, (1 << 64) - 1], np.uint64)]))


def write_keys(path, blocks, buffer: int = 4096) -> int:
    writer = _C.KeyRunWriter(str(path), buffer)
    for block in blocks:
        writer.append(block)
    return writer.commit()


@pytest.mark.parametrize("spread", [0, 20, 40, 60])
def test_key_run_round_trip_in_any_blocks_and_its_size(tmp_path, spread: int) -> None:
    from gnncore.store.edge_keys import read_key_run

    keys = sorted_keys(np.random.default_rng(spread), 20_000, spread)
    cuts = [0, 1, 1, 777, 5000, len(keys)]
    blocks = [keys[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    assert write_keys(tmp_path / "r.keys", blocks) == len(keys)
    # LEB128 of the gaps: seven bits a byte, first key against 0
    gaps = np.diff(keys, prepend=np.uint64(0))
    sizes = np.ones(len(gaps), dtype=np.int64)
    for bits in range(7, 64, 7):
        sizes += gaps >= (np.uint64(1) << np.uint64(bits))
    assert (tmp_path / "r.keys").stat().st_size == 32 + int(sizes.sum())
    for rows in (1, 999, 1 << 20):
        got = list(read_key_run(tmp_path / "r.keys", rows))
        assert all(0 < len(b) <= rows for b in got)
        np.testing.assert_array_equal(np.concatenate(got), keys)
    reader = _C.KeyRunReader(str(tmp_path / "r.keys"), 4096)
    out = np.empty(len(keys) + 5, dtype=np.uint64)
    assert (reader.count, reader.read(out), reader.remaining, reader.read(out)) == (
        len(keys), len(keys), 0, 0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("n", "buffer", "spread"),
    [(3, 4096, 40), (1000, 4096, 40), (60_000, 4096, 40), (20_000, 4096, 0), (60_000, 1 << 20, 40)],
)
def test_key_run_written_direct_has_the_bytes_of_a_buffered_one(
    tmp_path, monkeypatch, n, buffer, spread
):
    """Past the page cache (two aligned buffers, the last partial block and the
    header through the page cache) or not, the same file: a run shorter than a
    block, runs of many buffers of the smallest size (gaps of 9-byte varints
    among them, which must fit beside the partial block a buffer keeps),
    blocks appended at odd sizes; and with ``GNNCORE_DIRECT_WRITE=0`` as well."""
    keys = sorted_keys(np.random.default_rng(n), n, spread)
    blocks = np.array_split(keys, [1, 2, 777, 5001])

    def write(name: str, direct: bool) -> bytes:
        writer = _C.KeyRunWriter(str(tmp_path / name), buffer, direct=direct)
        for block in blocks:
            writer.append(block)
        assert writer.commit() == len(keys)
        return (tmp_path / name).read_bytes()

    buffered = write("buffered.keys", False)
    assert write("direct.keys", True) == buffered
    monkeypatch.setenv("GNNCORE_DIRECT_WRITE", "0")
    assert write("switched-off.keys", True) == buffered
    reader = _C.KeyRunReader(str(tmp_path / "direct.keys"))
    out = np.empty(reader.count, dtype=np.uint64)
    reader.read(out)
    np.testing.assert_array_equal(out, keys)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "buffered.keys", "direct.keys", "switched-off.keys",
    ]  # fmt: skip


@pytest.mark.usefixtures("direct_io")
def test_key_run_written_direct_leaves_its_pages_out_of_the_cache(tmp_path) -> None:
    """What ``direct`` is for: a run of many blocks leaves at most its first and
    last pages cached (the header and the partial block), a buffered one all of
    them; and a writer dropped uncommitted leaves no file."""
    keys = sorted_keys(np.random.default_rng(9), 400_000, 30)
    for name, direct in (("buffered.keys", False), ("direct.keys", True)):
        writer = _C.KeyRunWriter(str(tmp_path / name), 1 << 16, direct=direct)
        writer.append(keys)
        writer.commit()
    pages = -(-(tmp_path / "direct.keys").stat().st_size // 4096)
    assert pages > 100
    assert resident_pages(tmp_path / "buffered.keys") == pages
    assert resident_pages(tmp_path / "direct.keys") <= 2
    dropped = _C.KeyRunWriter(str(tmp_path / "dropped.keys"), 1 << 16, direct=True)
    dropped.append(keys)
    del dropped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buffered.keys", "direct.keys"]


def merged_key_runs(tmp_path, runs: list[np.ndarray]) -> np.ndarray:
    """``runs`` written as key runs and merged by ``_C.merge_key_runs``, checked
    against numpy's sorted union; the merged keys."""
    paths = []
    for i, keys in enumerate(runs):
        paths.append(str(tmp_path / f"{i}.keys"))
        write_keys(paths[-1], [keys])
    expected = np.unique(np.concatenate(runs))
    assert _C.merge_key_runs(paths, str(tmp_path / "m.keys"), 4096) == len(expected)
    reader = _C.KeyRunReader(str(tmp_path / "m.keys"))
    out = np.empty(reader.count, dtype=np.uint64)
    reader.read(out)
    np.testing.assert_array_equal(out, expected)
    return out


def test_merge_key_runs_is_the_sorted_union(tmp_path) -> None:
    rng = np.random.default_rng(5)
    runs = [sorted_keys(rng, n, 30) for n in (0, 1, 3000, 3000, 10_000)]
    runs.append(runs[3][::3].copy())  # keys repeated across runs
    merged_key_runs(tmp_path, runs)


@pytest.mark.parametrize("num_runs", [1, 2, 3, 7, 64])
def test_merge_key_runs_over_any_number_of_runs_and_the_largest_key(tmp_path, num_runs) -> None:
    """The loser tree of the merge (any number of runs, not a power of two),
    runs longer than a decoded block (512 keys) and empty ones, keys shared by
    several runs, and 0 and 2**64 - 1 (the tree's mark of a run at its end) as
    keys, against numpy's sorted union."""
    rng = np.random.default_rng(num_runs)
    top = np.uint64(2**64 - 1)
    runs = []
    for i in range(num_runs):
        size = [0, 1, 511, 512, 513, 2000][i % 6] if num_runs > 1 else 3000
        keys = np.unique(rng.integers(0, 50_000, size, dtype=np.uint64))
        if i % 4 == 1:
            keys = np.union1d(keys, np.array([0, top], dtype=np.uint64))
        runs.append(keys)
    out = merged_key_runs(tmp_path, runs)
    assert (num_runs > 1) == (out[-1] == top)


def test_key_runs_refuse_unsorted_keys_and_corrupt_files(tmp_path) -> None:
    from gnncore.errors import InputError

    writer = _C.KeyRunWriter(str(tmp_path / "a.keys"))
    writer.append(np.array([5, 9], np.uint64))
    with pytest.raises(ValueError, match=r"key 0 of the block \(9\) does not exceed"):
        writer.append(np.array([9, 10], np.uint64))
    with pytest.raises(ValueError, match="key 2 of the block"):
        writer.append(np.array([10, 11, 11], np.uint64))
    assert writer.commit() == 2  # the refused calls wrote nothing
    del writer
    dropped = _C.KeyRunWriter(str(tmp_path / "b.keys"))
    dropped.append(np.array([1], np.uint64))
    del dropped  # never committed: no file, no temporary
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.keys"]
    data = (tmp_path / "a.keys").read_bytes()
    (tmp_path / "short.keys").write_bytes(data[:-1])
    with pytest.raises(InputError, match=r"short\.keys: corrupt key run header"):
        _C.KeyRunReader(str(tmp_path / "short.keys"))
    (tmp_path / "magic.keys").write_bytes(b"X" + data[1:])
    with pytest.raises(InputError, match="bad magic"):
        _C.KeyRunReader(str(tmp_path / "magic.keys"))
    (tmp_path / "zero.keys").write_bytes(data[:-1] + b"\x00")  # a gap of 0: a repeat
    reader = _C.KeyRunReader(str(tmp_path / "zero.keys"))
    with pytest.raises(InputError, match="not strictly sorted at key 1"):
        reader.read(np.empty(2, np.uint64))
    with pytest.raises(FileNotFoundError):
        _C.KeyRunReader(str(tmp_path / "missing.keys"))


def test_bucket_shuffle_is_a_reproducible_permutation_in_buckets(tmp_path) -> None:
    from gnncore.store.edge_keys import bucket_shuffle, shuffle_buckets

    keys = sorted_keys(np.random.default_rng(3), 50_000, 24)
    budget = 16 * 8_000  # buckets of 8,000 keys on average

    def run(seed: int) -> list[np.ndarray]:
        blocks = [keys[i : i + 7_000] for i in range(0, len(keys), 7_000)]
        buckets, bases = [], set()
        for bucket in bucket_shuffle(blocks, len(keys), seed, budget, tmp_path):
            bases.add(id(bucket.base))
            buckets.append(bucket.copy())  # a bucket is valid until the next is taken
        assert len(bases) == 1  # one buffer for every bucket
        return buckets

    first = run(11)
    assert len(first) == shuffle_buckets(len(keys), budget) == 7
    assert all(4_000 < len(bucket) < 12_000 for bucket in first)
    order = np.concatenate(first)
    np.testing.assert_array_equal(np.sort(order), keys)
    assert list(tmp_path.iterdir()) == []  # every bucket file removed once read
    np.testing.assert_array_equal(np.concatenate(run(11)), order)
    assert not np.array_equal(np.concatenate(run(12)), order)
    # not sorted within a bucket, nor the buckets' members a contiguous range
    assert not np.array_equal(first[0], np.sort(first[0]))
    assert first[0].max() > np.sort(first[1])[len(first[1]) // 2]
    with pytest.raises(ValueError, match=f"expected {len(keys) + 1} keys, the blocks held"):
        bucket_shuffle([keys], len(keys) + 1, 0, budget, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("draw_dtype", [np.uint8, np.uint32])
def test_scatter_key_buckets_writes_what_a_mask_per_bucket_writes(tmp_path, draw_dtype) -> None:
    """The one-pass scatter of the bounded shuffle: each bucket's run holds the
    keys of that bucket in order, byte for byte what appending
    ``block[bucket == i]`` to each writer wrote, block after block (varints of
    1 to 10 bytes across the write buffers' ends)."""
    rng = np.random.default_rng(5)
    keys = sorted_keys(rng, 30_000, 2)  # gaps up to 2^62: 9- and 10-byte varints
    num_buckets = 5
    draws = rng.integers(0, num_buckets, len(keys)).astype(draw_dtype)
    blocks = [(keys[i : i + 4_001], draws[i : i + 4_001]) for i in range(0, len(keys), 4_001)]
    scattered = [_C.KeyRunWriter(str(tmp_path / f"s{i}.keys"), 4096) for i in range(num_buckets)]
    masked = [_C.KeyRunWriter(str(tmp_path / f"m{i}.keys"), 4096) for i in range(num_buckets)]
    for block, bucket in blocks:
        _C.scatter_key_buckets(block, bucket, scattered)
        for i, writer in enumerate(masked):
            writer.append(block[bucket == i])
    for i in range(num_buckets):
        assert scattered[i].commit() == masked[i].commit() == int((draws == i).sum())
        assert (tmp_path / f"s{i}.keys").read_bytes() == (tmp_path / f"m{i}.keys").read_bytes()


def test_scatter_key_buckets_refuses_a_bad_block_and_writes_none_of_it(tmp_path) -> None:
    writers = [_C.KeyRunWriter(str(tmp_path / f"b{i}.keys"), 4096) for i in range(2)]
    keys = np.array([5, 9, 20], np.uint64)
    with pytest.raises(ValueError, match="key 2 has bucket 2, not one of the 2 writers"):
        _C.scatter_key_buckets(keys, np.array([0, 1, 2], np.uint8), writers)
    with pytest.raises(ValueError, match="key 1 of the block"):
        _C.scatter_key_buckets(keys[::-1].copy(), np.zeros(3, np.uint8), writers)
    with pytest.raises(ValueError, match="3 keys but 2 buckets"):
        _C.scatter_key_buckets(keys, np.zeros(2, np.uint8), writers)
    assert [w.count for w in writers] == [0, 0]
    _C.scatter_key_buckets(keys, np.array([0, 1, 0], np.uint8), writers)
    with pytest.raises(ValueError, match=r"first key \(20\) does not exceed one appended before"):
        _C.scatter_key_buckets(np.array([20, 30], np.uint64), np.array([1, 1], np.uint8), writers)
    assert [w.commit() for w in writers] == [2, 1]
    reader = _C.KeyRunReader(str(tmp_path / "b0.keys"))
    out = np.empty(2, np.uint64)
    assert reader.read(out) == 2 and out.tolist() == [5, 20]


def test_bucket_shuffle_draws_every_order_alike(tmp_path) -> None:
    """Four keys in two buckets (on average), 2,400 seeds: each of the 24 orders
    about 100 times (chi-square, 23 degrees of freedom, p = 1e-4 at 55.5)."""
    from itertools import permutations

    from gnncore.store.edge_keys import bucket_shuffle

    keys = np.array([3, 10, 11, 40], np.uint64)
    index = {p: i for i, p in enumerate(permutations(range(4)))}
    counts = np.zeros(24)
    for seed in range(2400):
        buckets = [b.copy() for b in bucket_shuffle([keys], 4, seed, 32, tmp_path)]
        order = np.concatenate(buckets)
        counts[index[tuple(np.searchsorted(keys, order))]] += 1
    chi2 = float(((counts - 100) ** 2 / 100).sum())
    assert chi2 < 55.5, counts


@pytest.mark.parametrize("block", [1, 7, 999, 4096])
def test_key_run_reads_in_any_block_size_across_its_buffer(tmp_path, block: int) -> None:
    keys = sorted_keys(np.random.default_rng(block), 20_000, 40)  # gaps of 5-6 bytes
    write_keys(tmp_path / "r.keys", [keys])
    reader = _C.KeyRunReader(str(tmp_path / "r.keys"), 4096)  # ~700 keys a buffer
    out = np.empty(block, dtype=np.uint64)
    got = []
    while n := reader.read(out):
        got.append(out[:n].copy())
    np.testing.assert_array_equal(np.concatenate(got), keys)
    assert reader.remaining == 0


@pytest.mark.parametrize("at", [1, 500, 2_980])
def test_key_runs_name_a_repeat_or_a_broken_gap_inside_a_buffer(tmp_path, at: int) -> None:
    """The bulk decoding checks what the key-at-a-time path checks, naming the key."""
    from gnncore.errors import InputError

    write_keys(tmp_path / "a.keys", [np.arange(1, 3_001, dtype=np.uint64)])  # one-byte gaps
    data = bytearray((tmp_path / "a.keys").read_bytes())
    header = len(data) - 3_000
    repeat = data.copy()
    repeat[header + at] = 0  # key `at` equals the one before
    (tmp_path / "repeat.keys").write_bytes(bytes(repeat))
    with pytest.raises(InputError, match=f"not strictly sorted at key {at}$"):
        _C.KeyRunReader(str(tmp_path / "repeat.keys")).read(np.empty(3_000, np.uint64))
    endless = data.copy()
    endless[header + at - 1 : header + at + 10] = b"\x80" * 11  # a varint of 11 bytes
    (tmp_path / "endless.keys").write_bytes(bytes(endless))
    with pytest.raises(InputError, match=f"varint runs past the data at key {at - 1}$"):
        _C.KeyRunReader(str(tmp_path / "endless.keys")).read(np.empty(3_000, np.uint64))
