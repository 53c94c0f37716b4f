"""The edge stream to a graph directory, in bounded memory: :func:`write_edge_stream`
(any stream of ``(src, dst)`` chunks over node ids, both id widths) and
:func:`write_key_graph` (canonical keys already sorted, as ingestion fills them)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.io.bounded.csr import KeyEnds, map_key_run, merge_map_key_runs, write_key_csr
from gnncore.io.bounded.edges_parquet import write_edges_parquet
from gnncore.io.bounded.graph_job import EdgeCounts, StreamJob, write_graph_dir
from gnncore.io.bounded.pair_graph import write_pair_edges
from gnncore.io.bounded.parse import KeyRemap
from gnncore.io.bounded.phases import Phases
from gnncore.io.bounded.shuffle import Shuffle, scatters_from_run, shuffle_pairs, write_shuffled
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.edge_keys import MAX_KEY_ID, KeySorter
from gnncore.store.writer import GraphDirWriter


def write_edge_stream(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]],
    out_dir: str | os.PathLike[str],
    scratch: Path,
    phases: Phases,
    *,
    num_nodes: int,
    directed: bool,
    name: str,
    seed: int,
    budget: int,
    fmt: str,
    source: str | os.PathLike[str],
    before: Callable[[GraphDirWriter], None] | None = None,
    details: Mapping[str, Any] | None = None,
    started: float | None = None,
    max_fan_in: int = 64,
    before_phase: str = "write",
) -> IngestReport:
    """Write a graph directory from a stream of edge chunks, in bounded memory.

    The bounded-memory counterpart of :func:`gnncore.io.canonical.write_graph`
    (same files, byte for byte, and the same manifest for the same edges):
    steps 2 and 4-6 of :mod:`gnncore.io.bounded`, for ids of both widths
    (past ``2**32``: :mod:`~gnncore.io.bounded.pair_graph`). Ingestion feeds it the parsed, remapped
    edges; :func:`gnncore.synth.generate_graph` the generator's chunks.

    Args:
        chunks: ``(src, dst)`` int64 arrays over node ids ``0..num_nodes-1``,
            self-loops and repeats allowed (dropped and counted here); read
            once, one chunk at a time (time inside the iterator counts in the
            phase it starts).
        out_dir: The graph directory to create or replace (atomically).
        scratch (Path): An existing directory for the sort runs
            (:func:`~gnncore.io.bounded.scratch.scratch_directory`); the caller removes it.
        phases (Phases): Accumulates the phase times (``sort/dedup``, ``csr``,
            ``shuffle``, ``write``, ``checksums`` and ``before_phase``).
        num_nodes, directed, name, seed: The graph's node count, direction,
            manifest name and the seed of the shuffled edge stream.
        budget (int): Bytes for the sort runs, merge buffers and the shuffle.
        fmt, source, details: Recorded in the report and the manifest's
            ``stats``, as :func:`~gnncore.io.canonical.write_graph` records them.
        before (callable): Called with the writer before the edges are written
            (node data: features, labels, splits, tables); raising in it
            removes the partial output.
        started (float): ``time.perf_counter()`` when the whole run began.
        max_fan_in (int): Most runs merged at once.
        before_phase (str): The phase ``before`` is timed in.
    """
    job = StreamJob(
        out_dir, scratch, phases, num_nodes, directed, name, seed, budget, fmt, source,
        before, details, max_fan_in=max_fan_in, before_phase=before_phase,
    )  # fmt: skip
    if started is not None:
        job.started = started
    if job.num_nodes - 1 > MAX_KEY_ID:  # ids do not fit a packed key: int64 pairs
        return write_graph_dir(job, partial(write_pair_edges, chunks, job))
    canon = KeySorter(scratch, "canon", budget // 2, max_fan_in)
    num_input = kept = 0
    for s, d in chunks:
        phases.start("sort/dedup")
        num_input += len(s)
        kept += canon.add_edges(s, d, unordered=not directed)
    phases.start("sort/dedup")
    canon.finish()
    return write_key_graph(canon, job, num_input=num_input, loops=num_input - kept)


def write_key_graph(
    canon: KeySorter,
    job: StreamJob,
    *,
    num_input: int,
    loops: int,
    remap: KeyRemap | None = None,
) -> IngestReport:
    """Write a graph directory from the finished canonical keys of ``canon``.

    ``canon`` holds the distinct canonical edges as keys ``src << 32 | dst``
    (undirected: ``min << 32 | max``), finished (:meth:`KeySorter.finish`, or
    :meth:`KeySorter.finish_runs`: the last merge is then made here, in the
    same pass as the id mapping when ``remap`` has a lookup table);
    ``remap``, when given, maps their ids to node ids in place (monotone:
    ingestion sorts raw ids and maps them afterwards). ``num_input`` and
    ``loops`` are the edges read and the self-loops dropped. ``job``: the
    other arguments of :func:`write_edge_stream`. Writes ``edges.parquet``,
    ``indptr``/``indices``/``eid`` (keys on disk mapped once, then row
    ranges of half the budget filled in two sequential passes:
    :mod:`gnncore.io.bounded.csr`), ``edges_shuffled`` and the manifest.
    """
    return write_graph_dir(job, partial(_write_key_edges, canon, job, num_input, loops, remap))


def _write_key_edges(
    canon: KeySorter,
    job: StreamJob,
    num_input: int,
    loops: int,
    remap: KeyRemap | None,
    writer: GraphDirWriter,
) -> EdgeCounts:
    """The edge files of :func:`write_key_graph`."""
    phases, rows, num_nodes = job.phases, job.rows, job.num_nodes
    ends = None
    if canon.keys is None:  # a run on disk: mapped (once) and counted in one pass
        stage("remapping ids" if remap is not None else "counting degrees")
        phases.start("remap" if remap is not None else "csr")
        if canon.run is None and remap is not None and remap.lut is not None:
            ends = merge_map_key_runs(canon, remap.lut, num_nodes)  # with the last merge
        else:
            canon.merge()  # the runs finish_runs left, if any
            ends = map_key_run(canon, remap, num_nodes, rows)
        if remap is not None:
            remap.release()  # the run on disk is mapped: the id arrays are not needed
    elif remap is not None:
        stage("remapping ids")
        phases.start("remap")
        canon.set_remap(remap)

    num_canonical = canon.count
    in_memory = canon.keys is not None
    # edges.parquet (pyarrow, GIL released) is written on a thread while
    # the CSR and the shuffled stream are built: they only read the sorted keys
    # (the shuffle works on a copy)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-parquet") as pool:
        edges_path = writer.file_path("edges.parquet", "parquet")
        edges = pool.submit(_write_parquet, writer, edges_path, num_canonical, canon.blocks(rows))
        try:
            if in_memory:
                # The shuffle first: its draws are one thread, so Polars' writing
                # has the other core, and the CSR runs beside what is left of it.
                # The shuffled copy is written and dropped before the CSR's
                # transpose takes the same scratch.
                shuffle = _draw_shuffle(canon, job)
                shuffled = (write_shuffled(writer, shuffle, num_nodes, rows), shuffle.buckets)
                num_edges = _write_csr(canon, job, writer, None)
            elif scatters_from_run(canon, job.directed, job.budget):
                # the bucket shuffle's scatter, one thread's pass over the run
                # (32 s of one core at a billion edges, the other idle), runs
                # beside the CSR, whose threads leave a core's fifth idle. The
                # run is mapped already (ends): the CSR does not rewrite it. A
                # failed CSR waits for the scatter, whose files go with the scratch.
                assert ends is not None
                with ThreadPoolExecutor(1, thread_name_prefix="gnncore-scatter") as side:
                    drawn = side.submit(_draw_shuffle, canon, job, beside=True)
                    num_edges = _write_csr(canon, job, writer, ends)
                    ends = None
                shuffle = drawn.result()
            else:
                num_edges = _write_csr(canon, job, writer, ends)
                ends = None  # 16 bytes a node, written as indptr: not held through the shuffle
                shuffle = _draw_shuffle(canon, job)
        finally:
            phases.start("write")  # what is left of the Parquet writing
            edges.result()
    canon.release()  # the keys, or their run on disk: the shuffle holds its own copy
    if not in_memory:
        phases.start("shuffle")
        shuffled = (write_shuffled(writer, shuffle, num_nodes, rows), shuffle.buckets)
    return EdgeCounts(num_input, loops, num_canonical, num_edges, *shuffled)


def _write_parquet(
    writer: GraphDirWriter, path: Path, rows: int, key_blocks: Iterable[np.ndarray]
) -> None:
    """``edges.parquet`` (:func:`write_edges_parquet`), its sha256 started once
    written: on the hashing thread while the rest is built, not after it."""
    write_edges_parquet(path, rows, key_blocks)
    writer.hash_in_background(path.name)


def _write_csr(
    canon: KeySorter, job: StreamJob, writer: GraphDirWriter, ends: KeyEnds | None
) -> int:
    """``indptr``/``indices``/``eid`` of the sorted keys (phase ``csr``); the entries."""
    stage("writing edges and CSR")
    job.phases.start("csr")
    return write_key_csr(canon, writer, job.num_nodes, job.directed, job.budget, job.rows, ends)


def _draw_shuffle(canon: KeySorter, job: StreamJob, beside: bool = False) -> Shuffle:
    """The shuffled order of the sorted keys (phase ``shuffle``, or, ``beside``
    another phase on a thread of its own, in that phase), to be written by
    :func:`write_shuffled`."""
    if not beside:
        stage("shuffled edge stream")
        job.phases.start("shuffle")
    return shuffle_pairs(
        canon, job.scratch, job.directed, job.seed, job.budget, job.rows, job.max_fan_in
    )
