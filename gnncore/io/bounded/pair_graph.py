"""The edges of a graph whose node ids pass ``2**32`` (they do not fit a packed
key), in bounded memory: the edges sorted as int64 pair runs, the CSR by
:class:`~gnncore.store.external_sort.ExternalEdgeSorter`, ``eid`` from the
canonical run, the shuffled stream by numpy's permutation of the seed (on a
memory map past half the budget) and ``edges.parquet`` from the canonical run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnncore.io.bounded.edges_parquet import write_edges_parquet
from gnncore.io.bounded.graph_job import EdgeCounts, StreamJob
from gnncore.io.bounded.npy_stream import npy_reader, npy_writer
from gnncore.io.bounded.pair_runs import RunSorter, run_pairs
from gnncore.progress import stage
from gnncore.store.edge_keys import iter_run, pack_keys, run_count
from gnncore.store.external_sort import ExternalEdgeSorter
from gnncore.store.writer import GraphDirWriter, index_dtype


@dataclass(frozen=True)
class _SortedPairs:
    """The sorted runs of the edges and what sorting them counted."""

    canon_path: Path | None
    pairs_path: Path | None
    num_input: int
    loops: int
    num_canonical: int
    num_edges: int


def write_pair_edges(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]], job: StreamJob, writer: GraphDirWriter
) -> EdgeCounts:
    """Write the edge files of ``chunks`` (node ids past ``2**32``) into ``writer``."""
    rows = job.rows
    sorted_pairs = _sort_pairs(chunks, job, writer)
    _write_eid(writer, job, sorted_pairs, rows)
    stage("shuffled edge stream")
    job.phases.start("shuffle")
    num_pairs = _write_shuffled_pairs(writer, job, sorted_pairs, rows)
    stage("writing edges")
    job.phases.start("write")
    canon_path = sorted_pairs.canon_path
    run_keys = (pack_keys(b[:, 0], b[:, 1]) for b in iter_run(canon_path, rows))
    write_edges_parquet(
        writer.file_path("edges.parquet", "parquet"), sorted_pairs.num_canonical, run_keys
    )
    return EdgeCounts(
        num_input=sorted_pairs.num_input,
        loops=sorted_pairs.loops,
        num_canonical=sorted_pairs.num_canonical,
        num_edges=sorted_pairs.num_edges,
        num_pairs=num_pairs,
    )


def _sort_pairs(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]], job: StreamJob, writer: GraphDirWriter
) -> _SortedPairs:
    """Self-loops dropped, the edges sorted into the canonical run (and the
    directed graph's unordered pairs), ``indptr`` and ``indices`` written."""
    phases, scratch, budget, directed = job.phases, job.scratch, job.budget, job.directed
    num_input = loops = 0
    canon = RunSorter(scratch, "canon", budget // 4, "src_dst", job.max_fan_in)
    pairs_sorter = (
        RunSorter(scratch, "pairs", budget // 4, "src_dst", job.max_fan_in) if directed else None
    )
    with ExternalEdgeSorter(
        scratch, budget // 4, directed=directed, max_fan_in=job.max_fan_in
    ) as adjacency:
        for s, d in chunks:
            s = np.asarray(s, dtype=np.int64)
            d = np.asarray(d, dtype=np.int64)
            num_input += len(s)
            keep = s != d
            kept = int(np.count_nonzero(keep))
            if kept < len(s):
                loops += len(s) - kept
                s, d = s[keep], d[keep]
            del keep
            phases.start("sort/dedup")
            lo, hi = np.minimum(s, d), np.maximum(s, d)
            if directed:
                canon.add(s, d)
                assert pairs_sorter is not None
                pairs_sorter.add(lo, hi)
            else:
                canon.add(lo, hi)
            adjacency.add(s, d)
            del s, d, lo, hi
        phases.start("sort/dedup")
        canon_path = canon.finish()
        num_canonical = 0 if canon_path is None else run_count(canon_path)
        pairs_path = None if pairs_sorter is None else pairs_sorter.finish()

        stage("writing CSR")
        phases.start("csr")
        int_dtype = index_dtype(job.num_nodes)
        writer.file_path("indptr.npy", "npy")
        writer.file_path("indices.npy", "npy")
        _, _, num_edges = adjacency.finish(job.num_nodes, writer.root, index_dtype=int_dtype)
    return _SortedPairs(canon_path, pairs_path, num_input, loops, num_canonical, num_edges)


def _write_eid(
    writer: GraphDirWriter, job: StreamJob, sorted_pairs: _SortedPairs, rows: int
) -> None:
    """``eid``: the canonical edges' src-major offsets, then the rows block by block."""
    from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

    num_nodes = job.num_nodes
    next_edge = np.zeros(num_nodes, dtype=np.int64)
    for block in iter_run(sorted_pairs.canon_path, rows):
        first = block[:, 0]
        low = int(first[0])
        counts = np.bincount(first - low)
        next_edge[low : low + len(counts)] += counts
    total = np.cumsum(next_edge)
    next_edge[1:] = total[:-1]
    if num_nodes:
        next_edge[0] = 0
    del total
    indptr = np.load(writer.root / "indptr.npy", mmap_mode="r")
    indices_fh, indices_dtype, _ = npy_reader(writer.root / "indices.npy")
    eid_fh = npy_writer(writer.file_path("eid.npy", "npy"), np.int64, (sorted_pairs.num_edges,))
    with indices_fh, eid_fh:
        row = 0
        while row < num_nodes:
            end_row = int(np.searchsorted(indptr, int(indptr[row]) + rows, side="right")) - 1
            end_row = min(max(end_row, row + 1), num_nodes)
            ptr = np.array(indptr[row : end_row + 1])
            count = int(ptr[-1] - ptr[0])
            block_indices = np.fromfile(indices_fh, dtype=indices_dtype, count=count)
            block_eid = np.empty(count, dtype=np.int64)
            _C.csr_edge_ids(ptr, block_indices, row, next_edge, block_eid, job.directed)
            block_eid.tofile(eid_fh)
            row = end_row
    del indptr, next_edge


def _write_shuffled_pairs(
    writer: GraphDirWriter, job: StreamJob, sorted_pairs: _SortedPairs, rows: int
) -> int:
    """``edges_shuffled.npy``: numpy's permutation of the seed over the unordered
    pairs (``arange`` shuffled in place on a memory map past half the budget);
    returns the pair count."""
    num_nodes, budget = job.num_nodes, job.budget
    pairs_path = sorted_pairs.pairs_path
    pairs_file = sorted_pairs.canon_path if pairs_path is None else pairs_path
    num_pairs = sorted_pairs.num_canonical if pairs_path is None else run_count(pairs_path)
    rng = np.random.default_rng(job.seed)
    packed = num_nodes <= 1 << 32 and num_pairs * 16 <= budget // 2
    pairs: np.ndarray
    if packed:  # u << 32 | v, read sequentially: 8 bytes a pair, gathered in memory
        pairs = np.empty(num_pairs, dtype=np.uint64)
        at = 0
        for block in iter_run(pairs_file, rows):
            key = block[:, 0].astype(np.uint64)
            key <<= np.uint64(32)
            key |= block[:, 1].astype(np.uint64)
            pairs[at : at + len(key)] = key
            at += len(key)
    else:
        pairs = run_pairs(pairs_file)
    if num_pairs * 8 <= budget // 2:
        perm = rng.permutation(num_pairs)
    else:  # numpy's permutation is arange shuffled in place: the same on a memmap
        perm = np.lib.format.open_memmap(
            job.scratch / "perm.npy", mode="w+", dtype=np.int64, shape=(num_pairs,)
        )
        for start in range(0, num_pairs, rows):
            stop = min(start + rows, num_pairs)
            perm[start:stop] = np.arange(start, stop, dtype=np.int64)
        rng.shuffle(perm)
    int_dtype = index_dtype(num_nodes)
    out_fh = npy_writer(writer.file_path("edges_shuffled.npy", "npy"), int_dtype, (num_pairs, 2))
    with out_fh:
        for start in range(0, num_pairs, rows):
            picked = pairs[np.asarray(perm[start : start + rows])]
            rows_out = np.empty((len(picked), 2), dtype=int_dtype)
            if packed:
                rows_out[:, 0] = picked >> np.uint64(32)
                rows_out[:, 1] = picked & np.uint64(0xFFFFFFFF)
            else:
                rows_out[:] = picked
            rows_out.tofile(out_fh)
    del perm, pairs
    return num_pairs
