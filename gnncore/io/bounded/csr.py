"""``indptr``, ``indices`` and ``eid`` of a graph directory from sorted
canonical keys, within the memory budget.

Keys in memory are merged with their sorted transpose
(:func:`_write_key_csr_merged`). Keys in a run on disk take a fixed number of
sequential passes, whatever the number of row ranges (``gnncore._C``,
``io/run_csr.h``): :func:`map_key_run` maps their ids once, writing the mapped
run in place of the raw one, and counts each node's ends; then one pass splits
the mapped run into a sub-run per row range (the keys whose minor id is in it)
and each range is filled from its sub-run and the next keys of the mapped run,
read once in step with the ranges (:func:`_write_run_csr`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

from gnncore.io.bounded.csr_sink import CsrSink, RangeWritten
from gnncore.prefault import huge_page_array
from gnncore.store.edge_keys import KEY_RUN_BUFFER, KeySorter
from gnncore.store.writer import GraphDirWriter, index_dtype

MERGE_BUFFER_BYTES = 32 << 20
"""The output buffers of the in-memory CSR merge (``indices`` and ``eid`` of a row
range; a longer row gets its own): two of half this size take turns, one
merged while the other is checked, written and hashed on the
:class:`~gnncore.io.bounded.csr_sink.CsrSink`'s thread; reused, so their pages
are touched once and stay warm."""

MAX_ROW_RANGES = 256
"""The most row ranges :func:`_write_run_csr` splits the run into (a file open
for each while it splits): under a budget that the per-node arrays nearly
fill, ranges grow past half of what is left rather than multiply."""

KeyEnds = tuple[np.ndarray, np.ndarray]
"""Per node, one entry up (``[0]`` is 0): its count as the major and as the minor
id of a key (:func:`map_key_run`)."""


def map_key_run(
    canon: KeySorter, remap: Callable[[np.ndarray], None] | None, num_nodes: int, rows: int
) -> KeyEnds:
    """One sequential pass over the finished keys' run on disk (``canon.run``):
    maps their ids by ``remap`` (when given), writes the mapped run in place of
    the raw one (so every later reader, the CSR, ``edges.parquet`` and the
    shuffle, reads node ids without mapping again) and counts each node's ends
    (:data:`KeyEnds`), in blocks of ``rows`` keys."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    assert canon.run is not None
    major = np.zeros(num_nodes + 1, dtype=np.int64)
    minor = np.zeros(num_nodes + 1, dtype=np.int64)
    reader = _C.KeyRunReader(str(canon.run), KEY_RUN_BUFFER)
    block = np.empty(max(min(rows, reader.remaining), 1), dtype=np.uint64)
    mapped = canon.run.with_name(canon.run.name + ".mapped")
    writer = _C.KeyRunWriter(str(mapped), KEY_RUN_BUFFER) if remap is not None else None
    while reader.remaining:
        keys = block[: reader.read(block)]
        if remap is not None:
            remap(keys)
        _C.count_key_ends(keys, major, minor)
        if writer is not None:
            writer.append(keys)  # checks that the mapped keys still increase
    del reader
    if writer is not None:
        writer.commit()
        os.replace(mapped, canon.run)
    return major, minor


def merge_map_key_runs(canon: KeySorter, lut: np.ndarray, num_nodes: int) -> KeyEnds:
    """:func:`map_key_run` fused with the keys' last merge: the runs that
    :meth:`~gnncore.store.edge_keys.KeySorter.finish_runs` left are merged,
    mapped through the lookup table ``lut`` and counted in one pass
    (:meth:`~gnncore.store.edge_keys.KeySorter.merge_mapped`), so the run is
    written once instead of merged, then read and written again. The same
    mapped run and counts."""
    major = np.zeros(num_nodes + 1, dtype=np.int64)
    minor = np.zeros(num_nodes + 1, dtype=np.int64)
    canon.merge_mapped(lut, major, minor)
    return major, minor


def write_key_csr(
    canon: KeySorter, writer: GraphDirWriter, num_nodes: int, directed: bool, budget: int,
    rows: int, ends: KeyEnds | None = None,
) -> int:  # fmt: skip
    """``indptr``, ``indices`` and ``eid`` from the canonical keys; returns the
    number of entries. Keys held in memory with room for a transposed copy and
    its sort scratch (16 bytes a key within half the budget) are merged with
    their sorted transpose, both read sequentially
    (:func:`_write_key_csr_merged`); keys in a run on disk, mapped and counted
    by :func:`map_key_run` (``ends``), fill row ranges of half the budget in two
    sequential passes over the run (:func:`_write_run_csr`); keys in memory
    past that fill each range by a pass over them (random writes)."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    int_dtype = index_dtype(num_nodes)
    if canon.keys is not None and 16 * canon.count <= budget // 2:
        return _write_key_csr_merged(canon, writer, num_nodes, directed, int_dtype)
    if canon.keys is None:
        if ends is None:
            ends = map_key_run(canon, None, num_nodes, rows)
        return _write_run_csr(canon, writer, directed, budget, int_dtype, ends)
    counts = np.zeros(num_nodes, dtype=np.int64)
    for block in canon.blocks(rows):
        _C.count_key_degrees(block, directed, counts)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    num_edges = int(indptr[-1])
    per_pass = max(budget // 2 // (int_dtype.itemsize + 8), 1)
    with CsrSink(writer, indptr, int_dtype, canon.count) as sink:
        for row, end in _row_ranges(indptr, per_pass):
            base = int(indptr[row])
            cursor = indptr[row:end] - base
            indices = np.empty(int(indptr[end]) - base, dtype=int_dtype)
            eid = np.empty(len(indices), dtype=np.int64)
            rank = 0
            for block in canon.blocks(rows):
                _C.fill_csr_rows(block, rank, directed, num_nodes, row, cursor, indices, eid)
                rank += len(block)
            sink.put(row, end, indices, eid).result()  # one range's arrays at a time
            del indices, eid
    return num_edges


def _write_run_csr(
    canon: KeySorter, writer: GraphDirWriter, directed: bool, budget: int, int_dtype: np.dtype,
    ends: KeyEnds,
) -> int:  # fmt: skip
    """The CSR of the mapped key run ``canon.run`` whose node ends are ``ends``
    (module docstring): all entries in one range when they fit in half of what
    the budget leaves beside the ends (:data:`KeyEnds`, 16 bytes a node), else
    ranges of a quarter of it in two sets of buffers that take turns, a range
    filled while the one before it is written (past the page cache, waiting on
    the device). With more than one range, one pass writes each range's sub-run
    (the keys whose minor id is in it) beside the run, then each range is filled
    from its sub-run (removed once read) and, undirected, the next keys of the
    run."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    run = canon.run
    assert run is not None
    major, minor = ends
    indptr = minor  # in place: counts one entry up -> offsets
    if not directed:
        indptr += major
    np.cumsum(indptr, out=indptr)
    next_rank = np.cumsum(major, out=major)[:-1]  # each node's first rank as a major id
    num_nodes = len(next_rank)
    # the ends (16 bytes a node: indptr and each node's first rank) are held
    # beside the ranges, whose buffers take half of what they leave: one range
    # when all entries fit there, else two sets of buffers taking turns
    room = max(budget - indptr.nbytes - next_rank.nbytes, 0) // 2 // (int_dtype.itemsize + 8)
    entries = int(indptr[-1])
    per_range = entries if entries <= room else max(room // 2, -(-entries // MAX_ROW_RANGES), 1)
    ranges = list(_row_ranges(indptr, per_range))
    if len(ranges) <= 1:  # one range: the run is its own sub-run
        buckets = [run] * len(ranges)
    else:
        buckets = [run.with_name(f"{run.name}.rows-{i:05d}") for i in range(len(ranges))]
        bounds = np.array([row for row, _ in ranges] + [num_nodes], dtype=np.int64)
        buffer = min(KEY_RUN_BUFFER, max(budget // 8 // len(ranges), 1 << 16))
        _C.split_key_run(str(run), bounds, [str(b) for b in buckets], buffer)
    cursor = np.empty(max((end - row for row, end in ranges), default=0), dtype=np.int64)
    forward = None if directed else _C.KeyRunReader(str(run), KEY_RUN_BUFFER)

    def fill(i: int, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> None:
        _C.fill_csr_range(str(buckets[i]), forward, row, end, indptr, next_rank, cursor,
                          indices, eid, KEY_RUN_BUFFER)  # fmt: skip
        if buckets[i] != run:
            buckets[i].unlink()

    # past the page cache; eid hashed afterwards (beside the shuffle), indices
    # as written: csr_sink's docstring
    with CsrSink(writer, indptr, int_dtype, canon.count, hash_later=("eid.npy",)) as sink:
        _fill_in_turns(sink, indptr, ranges, int_dtype, per_range, fill, random_writes=True)
    return int(indptr[-1])


def _write_key_csr_merged(
    canon: KeySorter, writer: GraphDirWriter, num_nodes: int, directed: bool,
    int_dtype: np.dtype,
) -> int:  # fmt: skip
    """The CSR of sorted canonical keys held in memory, merged with their sorted
    transpose (``gnncore._C.merge_csr_rows``). The transpose goes into the key
    sort's scratch, sorted by one counting scatter of the keys (which are in
    order: ``gnncore._C.transpose_sorted_keys``, no sort scratch); the output
    row ranges go through two buffers of :data:`MERGE_BUFFER_BYTES` in all,
    reused (fresh pages are costly), to the :class:`CsrSink`'s thread."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    keys = canon.keys
    assert keys is not None
    n = len(keys)
    transposed = canon.scratch[:n] if canon.scratch is not None else np.empty_like(keys)
    indptr = np.empty(num_nodes + 1, dtype=np.int64)
    _C.transpose_sorted_keys(keys, transposed, indptr)  # 1 thread: Parquet has the other core
    next_rank = np.empty(num_nodes + 1, dtype=np.int64)
    _C.key_offsets(keys, next_rank)
    if not directed:
        indptr += next_rank
    next_rank = next_rank[:-1]
    cursor = np.zeros(2, dtype=np.int64)
    entry_bytes = int_dtype.itemsize + 8
    per_range = max(min(MERGE_BUFFER_BYTES // 2, 8 * n) // entry_bytes, 1)
    ranges = list(_row_ranges(indptr, per_range))

    def merge(i: int, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> None:
        _C.merge_csr_rows(keys, transposed, directed, row, end, cursor, next_rank, indices, eid)

    with CsrSink(writer, indptr, int_dtype, n) as sink:
        _fill_in_turns(sink, indptr, ranges, int_dtype, per_range, merge)
    return int(indptr[-1])


def _fill_in_turns(
    sink: CsrSink, indptr: np.ndarray, ranges: list[tuple[int, int]], int_dtype: np.dtype,
    per_range: int, fill: Callable[[int, int, int, np.ndarray, np.ndarray], None],
    random_writes: bool = False,
) -> None:  # fmt: skip
    """Each row range ``i`` of ``ranges`` filled by ``fill(i, row, end, indices,
    eid)`` and queued on ``sink``, through two sets of buffers taking turns: a
    range is filled while the one before it is written. One set when there is
    one range, or when a row is longer than ``per_range`` entries (the buffers
    are the largest range's size, not what the ranges were planned for).
    ``random_writes``: ``fill`` writes its entries in no order (the run's CSR),
    so the buffers are in huge pages (:func:`~gnncore.prefault.huge_page_array`):
    a TLB miss saved a write, the dearer first touch paid once a buffer."""
    largest = max((int(indptr[end] - indptr[row]) for row, end in ranges), default=0)
    sets = 2 if len(ranges) > 1 and largest <= per_range else 1
    alloc = huge_page_array if random_writes else np.empty
    buffers = [(alloc(largest, dtype=int_dtype), alloc(largest, dtype=np.int64))
               for _ in range(sets)]  # fmt: skip
    written: list[RangeWritten | None] = [None] * sets
    for i, (row, end) in enumerate(ranges):
        turn = i % sets
        if (pending := written[turn]) is not None:
            pending.result()  # its last range is written: the buffers are free
        size = int(indptr[end] - indptr[row])
        indices, eid = buffers[turn][0][:size], buffers[turn][1][:size]
        fill(i, row, end, indices, eid)
        written[turn] = sink.put(row, end, indices, eid)


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
