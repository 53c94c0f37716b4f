"""What the DENSE kernel keeps between batches must not leak into their results.

The kernel keeps per-thread state across calls (the direct id table, whose
entries carry a batch stamp instead of being reset, and is cleared when the
stamps run out) and recycles output buffers of freed batches; the CSR may be
copied into huge-page memory. None of it may change a sample.
"""

from __future__ import annotations

import numpy as np

from gnncore import _C
from gnncore.sampler import DenseSampler
from gnncore.testing.graphs import node_input, random_csr


def test_stamped_id_table_agrees_with_the_hash_map_across_a_stamp_wrap() -> None:
    # 2^21 + 1 nodes: the table has 2^22 entries (2 MiB-rounded), leaving 9
    # stamp bits: 511 batches per stamp cycle. 600 batches cross the clear.
    # Edges only among the first 3,000 nodes; the other rows are empty.
    small_indptr, indices = random_csr(3000, 24000, seed=3)
    num_nodes = (1 << 21) + 1
    indptr = np.full(num_nodes + 1, small_indptr[-1], dtype=np.int64)
    indptr[: len(small_indptr)] = small_indptr
    rng = np.random.default_rng(4)
    batches = [rng.choice(3000, 8, replace=False) for _ in range(600)]
    direct = [_C.sample_dense_pyg(indptr, indices, s, [3, 2], b) for b, s in enumerate(batches)]
    previous = _C.set_sampler_direct_map_limit(0)  # the hash map
    try:
        for b, seeds in enumerate(batches):
            want = _C.sample_dense_pyg(indptr, indices, seeds, [3, 2], b)
            for got, expected in zip(direct[b], want):
                np.testing.assert_array_equal(got, expected)
    finally:
        _C.set_sampler_direct_map_limit(previous)


def test_recycled_output_buffers_leave_live_batches_intact() -> None:
    # 1,000 targets, fanouts 15,10,5 on ~200,000 edges: each output reserves
    # one entry per graph edge (1.6 MB), over the 1 MiB the kernel recycles
    # once a batch's arrays are freed.
    indptr, indices = random_csr(20000, 200000, seed=11)
    rng = np.random.default_rng(12)
    seeds = [np.sort(rng.choice(20000, 1000, replace=False)) for _ in range(6)]
    kept = _C.sample_dense_pyg(indptr, indices, seeds[0], [15, 10, 5], 1)
    snapshot = [np.array(a, copy=True) for a in kept[:4]]
    for b, s in enumerate(seeds[1:]):  # each freed at once: its buffers go back
        first = _C.sample_dense_pyg(indptr, indices, s, [15, 10, 5], b)
        del first
        again = _C.sample_dense_pyg(indptr, indices, s, [15, 10, 5], b)
        layout = _C.sample_dense(indptr, indices, s, [15, 10, 5], b)
        np.testing.assert_array_equal(_C.dense_to_pyg(*layout)[1], again[1])
    for got, want in zip(kept[:4], snapshot):
        np.testing.assert_array_equal(got, want)


def test_a_recycled_buffer_of_a_larger_batch_is_cut_to_the_sample() -> None:
    # A recycled buffer keeps the size of its last batch (so the hops grow it
    # without writing zeros); a smaller batch must still get exactly its edges.
    indptr, indices = random_csr(20000, 200000, seed=14)
    rng = np.random.default_rng(15)
    small = np.sort(rng.choice(20000, 400, replace=False))
    large = np.sort(rng.choice(20000, 2000, replace=False))
    for threads in (1, 2):
        first = [
            np.array(a, copy=True)
            for a in _C.sample_dense_pyg(
                indptr, indices, small, [15, 10, 5], 7, num_threads=threads
            )
        ]
        big = _C.sample_dense_pyg(indptr, indices, large, [15, 10, 5], 8, num_threads=threads)
        assert len(big[1]) > len(first[1])
        del big  # its buffers, larger than the small batch's, go back to the pool
        again = _C.sample_dense_pyg(indptr, indices, small, [15, 10, 5], 7, num_threads=threads)
        assert len(again[1]) == len(again[2]) == len(again[3]) == sum(again[5])
        for got, want in zip(again, first):
            np.testing.assert_array_equal(got, want)


def test_huge_page_copy_is_an_equal_array() -> None:
    for dtype in (np.int32, np.int64):
        a = np.arange(-5, 1_000_003, dtype=dtype)
        copy = _C.huge_page_copy(a)
        assert copy.dtype == dtype and copy.ctypes.data % (2 << 20) == 0
        np.testing.assert_array_equal(copy, a)
    assert len(_C.huge_page_copy(np.zeros(0, dtype=np.int64))) == 0


def test_huge_pages_option_samples_the_same() -> None:
    indptr, indices = random_csr(3000, 30000, seed=13)
    seeds = node_input(np.arange(0, 3000, 5))
    plain = DenseSampler((indptr, indices), [5, 3], seed=2)
    huge = DenseSampler((indptr, indices), [5, 3], seed=2, huge_pages=True)
    assert huge.indices.ctypes.data % (2 << 20) == 0
    a, b = plain.sample_from_nodes(seeds), huge.sample_from_nodes(seeds)
    for name in ("node", "row", "col", "edge"):
        assert getattr(a, name).equal(getattr(b, name))
