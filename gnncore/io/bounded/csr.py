"""``indptr``, ``indices`` and ``eid`` of a graph directory from sorted
canonical keys, within the memory budget."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from gnncore.io.bounded.npy_stream import npy_writer
from gnncore.store.edge_keys import SORT_THREADS, KeySorter
from gnncore.store.writer import GraphDirWriter, index_dtype


def write_key_csr(
    canon: KeySorter, writer: GraphDirWriter, num_nodes: int, directed: bool, budget: int,
    rows: int,
) -> int:  # fmt: skip
    """``indptr``, ``indices`` and ``eid`` from the canonical keys; returns the
    number of entries. Keys held in memory with room for a transposed copy and
    its sort scratch (16 bytes a key within half the budget) are merged with
    their sorted transpose, both read sequentially
    (:func:`_write_key_csr_merged`); otherwise row ranges that fill half the
    budget are filled by a pass over the keys each (random writes)."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    int_dtype = index_dtype(num_nodes)
    if canon.keys is not None and 16 * canon.count <= budget // 2:
        return _write_key_csr_merged(canon, writer, num_nodes, directed, int_dtype)
    counts = np.zeros(num_nodes, dtype=np.int64)
    for block in canon.blocks(rows):
        _C.count_key_degrees(block, directed, counts)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    num_edges = int(indptr[-1])
    _write_indptr(writer, indptr)
    per_pass = max(budget // 2 // (int_dtype.itemsize + 8), 1)
    indices_fh = npy_writer(writer.file_path("indices.npy", "npy"), int_dtype, (num_edges,))
    eid_fh = npy_writer(writer.file_path("eid.npy", "npy"), np.int64, (num_edges,))
    with indices_fh, eid_fh:
        for row, end in _row_ranges(indptr, per_pass):
            base = int(indptr[row])
            cursor = indptr[row:end] - base
            indices = np.empty(int(indptr[end]) - base, dtype=int_dtype)
            eid = np.empty(len(indices), dtype=np.int64)
            rank = 0
            for block in canon.blocks(rows):
                _C.fill_csr_rows(block, rank, directed, num_nodes, row, cursor, indices, eid)
                rank += len(block)
            indices.tofile(indices_fh)
            eid.tofile(eid_fh)
            del indices, eid
    writer.hash_in_background("indices.npy")
    writer.hash_in_background("eid.npy")
    return num_edges


def _write_key_csr_merged(
    canon: KeySorter, writer: GraphDirWriter, num_nodes: int, directed: bool,
    int_dtype: np.dtype,
) -> int:  # fmt: skip
    """The CSR of sorted canonical keys held in memory, merged with their sorted
    transpose (``gnncore._C.merge_csr_rows``). The transpose goes into the
    key sort's scratch and is sorted with one more buffer of as many keys, which
    then holds the output row ranges (fresh pages are costly: nothing else is
    allocated)."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    keys = canon.keys
    assert keys is not None
    n = len(keys)
    transposed = canon.scratch[:n] if canon.scratch is not None else np.empty_like(keys)
    _C.transpose_keys(keys, transposed)
    scratch = np.empty(max(n, 1), dtype=np.uint64)
    _C.sort_unique_keys(transposed, scratch[:n], SORT_THREADS, minor_sorted=True)
    indptr = np.empty(num_nodes + 1, dtype=np.int64)
    _C.key_offsets(transposed, indptr)
    next_rank = np.empty(num_nodes + 1, dtype=np.int64)
    _C.key_offsets(keys, next_rank)
    if not directed:
        indptr += next_rank
    next_rank = next_rank[:-1]
    num_edges = int(indptr[-1])
    _write_indptr(writer, indptr)
    cursor = np.zeros(2, dtype=np.int64)
    per_range = max(scratch.nbytes // (int_dtype.itemsize + 8), 1)
    indices_fh = npy_writer(writer.file_path("indices.npy", "npy"), int_dtype, (num_edges,))
    eid_fh = npy_writer(writer.file_path("eid.npy", "npy"), np.int64, (num_edges,))
    ranges = list(_row_ranges(indptr, per_range))
    largest = max((int(indptr[end] - indptr[row]) for row, end in ranges), default=0)
    if largest * (int_dtype.itemsize + 8) > scratch.nbytes:  # a row longer than that
        scratch = np.empty(largest * (int_dtype.itemsize + 8), dtype=np.uint8)
    raw = scratch.view(np.uint8)
    eid_buffer = raw[: 8 * largest].view(np.int64)
    indices_buffer = raw[8 * largest : (8 + int_dtype.itemsize) * largest].view(int_dtype)
    with indices_fh, eid_fh:
        for row, end in ranges:
            size = int(indptr[end] - indptr[row])
            indices, eid = indices_buffer[:size], eid_buffer[:size]
            _C.merge_csr_rows(keys, transposed, directed, row, end, cursor, next_rank, indices, eid)
            indices.tofile(indices_fh)
            eid.tofile(eid_fh)
    writer.hash_in_background("indices.npy")
    writer.hash_in_background("eid.npy")
    return num_edges


def _write_indptr(writer: GraphDirWriter, indptr: np.ndarray) -> None:
    with npy_writer(writer.file_path("indptr.npy", "npy"), np.int64, indptr.shape) as fh:
        indptr.tofile(fh)
    writer.hash_in_background("indptr.npy")


def _row_ranges(indptr: np.ndarray, entries: int) -> Iterator[tuple[int, int]]:
    """Consecutive row ranges ``[row, end)`` of at most ``entries`` CSR entries
    each (a longer row alone)."""
    num_nodes = len(indptr) - 1
    row = 0
    while row < num_nodes:
        base = int(indptr[row])
        end = int(np.searchsorted(indptr, base + entries, side="right")) - 1
        end = min(max(end, row + 1), num_nodes)
        yield row, end
        row = end
