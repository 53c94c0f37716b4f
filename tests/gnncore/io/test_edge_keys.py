"""The packed-key kernels of fast ingestion against plain NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

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
