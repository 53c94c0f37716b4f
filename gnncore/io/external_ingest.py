"""Bounded-memory ingestion of text edge lists with integer ids (string ids:
:mod:`gnncore.io.string_ids`, which this module hands them to).

``ingest(..., memory_budget=SIZE)`` / ``gnncore ingest --memory-budget SIZE``
selects this path (only on request: without a budget ingestion runs in memory
as before). It writes the same graph directory as the in-memory path -- the
same files, byte for byte, and the same manifest -- in memory bounded by the
budget plus O(|V|) arrays (below), spilling to disk beside the output:

1. **parse**: the C++ reader of :mod:`gnncore.io.edge_text` hands the file
   over in blocks of int64 ids; it parses a strict subset of what Polars
   accepts and declines the rest, and then the whole file goes to Polars'
   streaming CSV reader in batches (``collect_batches``), each batch checked
   (a bad line is an :class:`~gnncore.errors.InputError` naming the file and
   line, found as the in-memory path finds it). Each block's ids are
   collected (a presence array while the largest id is small -- dense ids --,
   else sorted runs of distinct ids merged from disk) and its edges go
   straight into a
   :class:`~gnncore.store.edge_keys.KeySorter` as packed keys ``min << 32 | max``
   (directed: ``src << 32 | dst``) of the *raw* ids, self-loops dropped.
2. **sort/dedup**: the keys are radix-sorted and deduplicated in C++ (two
   threads, GIL released), spilled as sorted key runs (delta-coded, 3-5 bytes a
   key) and merged k ways when they pass half the budget.
3. **remap**: the distinct ids, sorted, are the node ids (``node_ids``); the
   sorted keys are mapped through a lookup table (dense ids) or a binary search
   of the sorted ids. Node ids are ranks of raw ids, so the keys stay sorted.
4. **csr** (and **write**): ``edges.parquet`` is streamed from the sorted keys
   on a thread, in the row groups Polars' ``write_parquet`` would cut (so the
   bytes match), while ``indptr``/``indices``/``eid`` are built: keys in memory
   are merged with their sorted transpose (``gnncore._C.merge_csr_rows``, both
   read sequentially), keys on disk fill row ranges of half the budget, one pass
   each (``gnncore._C.fill_csr_rows``). ``write`` is the wait for the Parquet
   thread after the CSR.
5. **shuffle**: ``edges_shuffled.npy`` is numpy's seeded permutation of the
   unordered pairs, exactly as the in-memory path draws it, but drawn by a C++
   copy of ``Generator(PCG64).shuffle`` (:func:`~gnncore.store.edge_keys.shuffle_keys`)
   on a copy of the keys in memory, when they are in memory or fit half the
   budget (or :data:`EXACT_SHUFFLE_BYTES`). Past that the order is the bounded
   scatter shuffle of :func:`~gnncore.store.edge_keys.bucket_shuffle` (uniformly
   random and seeded, but another order than numpy's): the keys go to seeded
   random buckets written as key runs, and each bucket is shuffled in memory;
   the manifest then records ``stats.shuffle_buckets``. The buckets are
   written before the canonical keys' run is removed, and each bucket file is
   removed once read.
6. **checksums**: every file is hashed on a background thread once finished;
   the rest, the manifest and validation (which reads the arrays in blocks)
   come last.

Ids of ``2**32`` and more do not fit a key: the file is then parsed again
into two raw id files, mapped chunk by chunk and sorted as int64 pair runs (the
general path, :func:`_write_edge_stream_pairs`).

Steps 2 and 4-6 are :func:`write_edge_stream` / :func:`write_key_graph`:
``write_edge_stream`` takes any stream of ``(src, dst)`` chunks over node ids
``0..N-1`` (bounded-memory generation,
``gnncore.synth.generate_graph(..., memory_budget=)``, feeds it the
generator's); ingestion fills the key sorter itself and calls
``write_key_graph`` with the remap.

The output is written into a temporary sibling renamed into place at the end
(:func:`gnncore.store.create_graph_dir`); the scratch files live in another
sibling, ``.NAME.ingest-PID-XXXXXXXX`` (``.NAME.synth-...`` when generating:
:func:`scratch_directory`), removed on success and on error. A killed run
leaves both behind; the next run into the same output removes those whose
process is gone.

O(|V|) memory, outside the budget: the sorted distinct ids (8 bytes per node;
plus a 5-byte-per-slot lookup table up to the largest id when ids are dense, or a
4-byte one when they fill a quarter of ``0..max`` past the presence array's limit:
:func:`dense_lookup`)
and the CSR's per-node offsets and edge-rank counters (16 bytes per node; 24
while the row ranges of keys on disk are filled). Also outside it: the
Parquet thread's blocks (a few ``batch_rows`` blocks of keys and their
columns) and the interpreter. Nothing of ids below ``2**32`` is read through a
memory map (mapped pages count in the process's memory and its cgroup): runs
are read in blocks, the shuffle's scratch is bucket files read whole, the
validation reads the arrays in blocks (the general path past ``2**32`` nodes
still maps its pair runs). String ids
(``id_type="string"``, or ``"auto"`` when Polars reads no layout's ids as
integers, as the in-memory path decides) go to
:func:`gnncore.io.string_ids.ingest_string_ids` in the same scratch directory;
node tables and Parquet inputs are ingested in memory for now (asking for a
budget with them is an error).
"""

from __future__ import annotations

import gzip
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl

from gnncore.errors import InputError
from gnncore.io.canonical import _plain, node_id_table, sorted_unique
from gnncore.io.compression import check_gzip_name, gzip_error, is_gzip
from gnncore.io.edge_text import Declined, read_int_edge_blocks
from gnncore.io.edgelist import (
    ID_TYPES,
    Layout,
    _scan,
    default_name,
    locate_problem,
    sniff,
)
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.atomic import remove_stale_temporaries, temporary_name
from gnncore.store.edge_keys import (
    KEY_SHIFT,
    MAX_KEY_ID,
    MINOR_MASK,
    SORT_THREADS,
    KeySorter,
    bucket_shuffle,
    iter_run,
    pack_keys,
    run_count,
    shuffle_buckets,
    shuffle_keys,
    split_keys,
)
from gnncore.store.external_sort import BYTES_PER_PAIR, ExternalEdgeSorter, merge_runs_down
from gnncore.store.npy import read_npy_header
from gnncore.store.writer import PARQUET_OPTIONS, GraphDirWriter, create_graph_dir, index_dtype
from gnncore.typing import require_csrc
from gnncore.usage import peak_rss_bytes

PHASES = ("parse", "remap", "sort/dedup", "csr", "shuffle", "write", "checksums")
SCRATCH_KINDS = ("tmp", "ingest", "synth")
"""The temporary siblings of an output that the next run removes when their process is gone."""
MIN_MEMORY_BUDGET = 64 << 10
"""The smallest budget accepted (tests use tiny ones to force many runs)."""
EXACT_SHUFFLE_BYTES = 32 << 20
"""Pairs up to this size (4M) are shuffled by numpy's exact permutation in
memory whatever the budget, as small graphs always were (tests force tiny
budgets and compare with the in-memory path byte for byte); larger ones only
within half the budget, else by the bounded bucket shuffle."""
RUN_HEADER_BYTES = 32
MAX_BATCH_ROWS = 1 << 21
MIN_BATCH_ROWS = 1024


class _PolarsFailed(Exception):
    """Polars could not parse the text with one layout."""


class Phases:
    """Seconds per phase (accumulated), in the order of ``names`` (:data:`PHASES`)."""

    def __init__(self, names: Iterable[str] = PHASES) -> None:
        self.seconds: dict[str, float] = {name: 0.0 for name in names}
        self._name: str | None = None
        self._since = 0.0

    def start(self, name: str) -> None:
        """End the running phase and start ``name``."""
        self.stop()
        self._name, self._since = name, time.perf_counter()

    def stop(self) -> None:
        if self._name is not None:
            self.seconds[self._name] += time.perf_counter() - self._since
            self._name = None

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.seconds.items()}


# Run files -------------------------------------------------------------------------------


def run_pairs(path: Path | None) -> np.ndarray:
    """A run file's pairs as a read-only ``[count, 2]`` int64 memory map."""
    count = 0 if path is None else run_count(path)
    if count == 0 or path is None:
        return np.zeros((0, 2), dtype=np.int64)
    return np.memmap(path, dtype=np.int64, mode="r", offset=RUN_HEADER_BYTES, shape=(count, 2))


def npy_writer(path: Path, dtype: Any, shape: tuple[int, ...]) -> BinaryIO:
    """Open ``path`` for writing a C-ordered ``.npy`` of ``dtype`` and ``shape``
    sequentially: the header is written (as ``numpy.lib.format.open_memmap``
    writes it) and the data follow by ``ndarray.tofile``."""
    fh = open(path, "wb")
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": shape}  # fmt: skip
    np.lib.format.write_array_header_1_0(fh, header)
    return fh


def npy_reader(path: Path) -> tuple[BinaryIO, np.dtype, tuple[int, ...]]:
    """Open a ``.npy`` positioned at its data: ``(file, dtype, shape)``."""
    fh = open(path, "rb")
    shape, _, dtype = read_npy_header(fh)
    return fh, dtype, shape


class RunSorter:
    """Pairs buffered, spilled as sorted deduplicated runs and merged into one run file.

    ``key_order`` is ``"src_dst"`` (sorted by ``(a, b)``) or ``"dst_src"``.
    """

    def __init__(
        self, directory: Path, name: str, budget_bytes: int, key_order: str, max_fan_in: int = 64
    ) -> None:
        self.directory = directory
        self.name = name
        self.budget_bytes = int(budget_bytes)
        self.key_order = key_order
        self.max_fan_in = max(int(max_fan_in), 2)
        self._capacity = max(self.budget_bytes // BYTES_PER_PAIR, 2)
        self._a: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._b: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._fill = 0
        self._serial = 0
        self.runs: list[Path] = []
        self.runs_written = 0

    def _path(self) -> Path:
        path = self.directory / f"{self.name}-{self._serial:06d}.run"
        self._serial += 1
        return path

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        assert self._a is not None and self._b is not None
        start = 0
        while start < len(a):
            room = self._capacity - self._fill
            if room == 0:
                self._spill()
                continue
            n = min(room, len(a) - start)
            self._a[self._fill : self._fill + n] = a[start : start + n]
            self._b[self._fill : self._fill + n] = b[start : start + n]
            self._fill += n
            start += n

    def _spill(self) -> None:
        from gnncore import _C

        if self._fill == 0 or self._a is None or self._b is None:
            return
        path = self._path()
        _C.write_run(self._a[: self._fill], self._b[: self._fill], str(path), self.key_order)
        self.runs.append(path)
        self.runs_written += 1
        self._fill = 0

    def finish(self) -> Path | None:
        """Merge everything into one run file (``None`` when no pair was added)."""
        self._spill()
        self._a = self._b = None
        self.runs = merge_runs_down(self.runs, 1, self.max_fan_in, self.budget_bytes, self._path)
        return self.runs[0] if self.runs else None


# Ids ---------------------------------------------------------------------------------------


class IdCollector:
    """The distinct raw ids of the edges, in bounded memory.

    Dense ids (the largest below ``dense_limit``) are marked in a presence
    array; once an id passes the limit the collector keeps sorted distinct ids
    instead, spilling them as runs when more than ``capacity`` are held.
    """

    def __init__(self, directory: Path, budget_bytes: int, max_fan_in: int) -> None:
        self.dense_limit = max(budget_bytes // 20, 1 << 16)
        self.capacity = max(budget_bytes // 32, 1024)
        self.presence: np.ndarray | None = np.zeros(0, dtype=bool)
        self._parts: list[np.ndarray] = []
        self._held = 0
        self._runs = RunSorter(directory, "ids", budget_bytes, "src_dst", max_fan_in)
        self.max_id = -1

    def add(self, src: np.ndarray, dst: np.ndarray, top: int | None = None) -> None:
        """Collect the ids of ``src`` and ``dst``; ``top``: their largest, when known."""
        if len(src) == 0:
            return
        if top is None:
            top = max(int(src.max()), int(dst.max()))
        self.max_id = max(self.max_id, top)
        if self.presence is not None and top >= self.dense_limit:
            self._keep(np.flatnonzero(self.presence).astype(np.int64))
            self.presence = None
        if self.presence is not None:
            if top >= len(self.presence):
                size = min(max(top + 1, 2 * len(self.presence)), self.dense_limit)
                grown = np.zeros(size, dtype=bool)
                grown[: len(self.presence)] = self.presence
                self.presence = grown
            self.presence[src] = True
            self.presence[dst] = True
            return
        self._keep(sorted_unique(np.concatenate([src, dst])))

    def _keep(self, ids: np.ndarray) -> None:
        if len(ids) == 0:
            return
        self._parts.append(ids)
        self._held += len(ids)
        if self._held > self.capacity:
            merged = sorted_unique(np.concatenate(self._parts))
            self._parts, self._held = [merged], len(merged)
            if self._held > self.capacity // 2:
                self._runs.add(merged, merged)
                self._parts, self._held = [], 0

    def finish(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(raw_ids, lut)``: the sorted distinct ids and, for dense ids, the
        lookup table ``lut[raw_id] = node_id`` (else ``None``: binary search)."""
        if self.presence is not None:
            presence, self.presence = self.presence, None
            raw_ids = np.flatnonzero(presence).astype(np.int64)
            dtype = np.int32 if len(raw_ids) <= np.iinfo(np.int32).max else np.int64
            lut: np.ndarray = np.cumsum(presence, dtype=dtype)
            np.subtract(lut, 1, out=lut)
            return raw_ids, lut
        if self._parts:
            merged = sorted_unique(np.concatenate(self._parts))
            self._parts = []
            if not self._runs.runs and self._runs._fill == 0:
                self._runs.finish()
                return merged, dense_lookup(merged)
            self._runs.add(merged, merged)
        path = self._runs.finish()
        raw_ids = np.empty(0 if path is None else run_count(path), dtype=np.int64)
        at = 0
        for block in iter_run(path, MAX_BATCH_ROWS):  # read, not mapped
            raw_ids[at : at + len(block)] = block[:, 0]
            at += len(block)
        return raw_ids, dense_lookup(raw_ids)


#: The ids passed the presence array's limit, but where they fill at least this
#: share of ``0..max`` a lookup table (4 bytes a slot: at most 16 per node) still
#: beats the binary search, by far: a billion-edge CSV with 100M ids spent most of
#: an hour in ``np.searchsorted``.
DENSE_LOOKUP_FILL = 0.25


def dense_lookup(raw_ids: np.ndarray) -> np.ndarray | None:
    """``lut[raw_id] = node_id`` for sorted distinct ``raw_ids`` filling at
    least :data:`DENSE_LOOKUP_FILL` of ``0..max`` (every id below ``2**32``); else
    ``None`` (remapping then searches ``raw_ids``). Slots of absent ids hold -1."""
    if len(raw_ids) == 0 or raw_ids[0] < 0:
        return None
    top = int(raw_ids[-1])
    if top >= 1 << 32 or top + 1 > len(raw_ids) / DENSE_LOOKUP_FILL:
        return None
    dtype = np.int32 if len(raw_ids) <= np.iinfo(np.int32).max else np.int64
    lut = np.full(top + 1, -1, dtype=dtype)
    lut[raw_ids] = np.arange(len(raw_ids), dtype=dtype)
    return lut


def map_ids(ids: np.ndarray, raw_ids: np.ndarray, lut: np.ndarray | None) -> np.ndarray:
    """Node ids of raw ``ids`` (every one present in ``raw_ids``)."""
    if lut is not None:
        return lut[ids].astype(np.int64, copy=False)
    return np.searchsorted(raw_ids, ids)


# Parquet -----------------------------------------------------------------------------------


def parquet_row_groups(num_rows: int) -> list[int]:
    """The row-group sizes Polars' ``write_parquet`` (default settings) cuts a
    frame of ``num_rows`` rows into, probed on a column of nulls (which takes no
    memory): a stream fed in these batches gets the same file, byte for byte."""
    import io

    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    frame = pl.DataFrame({"x": pl.repeat(None, num_rows, eager=True)})
    frame.write_parquet(buffer, **PARQUET_OPTIONS)
    buffer.seek(0)
    meta = pq.ParquetFile(buffer).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def write_edges_parquet(path: Path, num_rows: int, key_blocks: Iterable[np.ndarray]) -> None:
    """Write ``num_rows`` sorted edges, given as blocks of packed keys ``src << 32 |
    dst`` of any sizes, as ``edges.parquet`` (``src``, ``dst``), streamed in the
    row groups Polars would cut: byte-identical to ``DataFrame.write_parquet``
    of the whole frame."""
    from polars.io.plugins import register_io_source

    groups = parquet_row_groups(num_rows)
    schema = {"src": pl.Int64, "dst": pl.Int64}

    def source(*_: Any) -> Iterator[pl.DataFrame]:
        blocks = iter(key_blocks)
        held, at = np.zeros(0, dtype=np.uint64), 0
        for size in groups:
            while len(held) - at < size:
                held, at = np.concatenate([held[at:], next(blocks)]), 0
            src, dst = split_keys(held[at : at + size])
            at += size
            yield pl.DataFrame({"src": src, "dst": dst})

    if not groups:
        pl.DataFrame(schema=schema).write_parquet(path, **PARQUET_OPTIONS)
        return
    register_io_source(source, schema=schema).sink_parquet(path, **PARQUET_OPTIONS)


# Parsing -----------------------------------------------------------------------------------


def _decompress(source: Path, out: Path) -> None:
    try:
        with gzip.open(source, "rb") as fin, open(out, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 22)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise gzip_error(source, exc) from exc


def _batches(text: Path, layout: Layout, rows: int) -> Iterator[pl.DataFrame]:
    lf = _scan(text, layout, pl.Int64)
    try:
        yield from lf.collect_batches(chunk_size=rows, engine="streaming")
    except pl.exceptions.PolarsError as exc:
        raise _PolarsFailed(str(exc)) from exc


class _StringIds(Exception):
    """``id_type="auto"`` and Polars reads no layout's ids as integers: they are
    strings, as the in-memory path reads them (:mod:`gnncore.io.string_ids`)."""


class _WideIds(Exception):
    """An id does not fit a packed key (``2**32`` or more): the general path takes over."""


class _Parsed:
    """The sink of the general path: the raw ids written to two files, remapped later."""

    def __init__(self, scratch: Path) -> None:
        self.src_path = scratch / "src.i64"
        self.dst_path = scratch / "dst.i64"
        self.count = 0
        self._src_fh: BinaryIO = open(self.src_path, "wb")
        self._dst_fh: BinaryIO = open(self.dst_path, "wb")

    def add(self, src: np.ndarray, dst: np.ndarray, top: int | None = None) -> None:
        src.tofile(self._src_fh)
        dst.tofile(self._dst_fh)
        self.count += len(src)

    def close(self) -> None:
        self._src_fh.close()
        self._dst_fh.close()


class _KeyParsed:
    """The sink of the fast path: the raw edges straight into a :class:`KeySorter` as
    canonical keys (raw ids: node ids are their ranks, so the order holds)."""

    def __init__(self, scratch: Path, budget: int, directed: bool, max_fan_in: int) -> None:
        self.keys = KeySorter(scratch, "canon", budget, max_fan_in)
        self.directed = directed
        self.count = self.kept = 0

    def add(self, src: np.ndarray, dst: np.ndarray, top: int | None = None) -> None:
        if top is None:
            top = max(int(src.max()), int(dst.max()))
        if top > MAX_KEY_ID:
            raise _WideIds
        self.kept += self.keys.add_edges(src, dst, unordered=not self.directed)
        self.count += len(src)

    def close(self) -> None:
        pass


def _parse_pass(
    text: Path, layout: Layout, ids: IdCollector, rows: int, sink: _Parsed | _KeyParsed
) -> None:
    """Parse ``text`` in batches into ``ids`` and ``sink``; a bad line is an
    :class:`InputError` naming the file and line."""
    try:
        for df in _batches(text, layout, rows):
            if df.height == 0:
                continue
            if df["missing"].any():
                locate_problem(text, layout, as_int=True)
                raise InputError("a line lacks a node id", text)
            src = df["src"].to_numpy()
            dst = df["dst"].to_numpy()
            del df
            if src.min() < 0 or dst.min() < 0:
                locate_problem(text, layout, as_int=True)
                raise InputError("negative node id", text)
            ids.add(src, dst)
            sink.add(src, dst)
    finally:
        sink.close()


def _chunks(parsed: _Parsed, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    with open(parsed.src_path, "rb") as sf, open(parsed.dst_path, "rb") as df:
        while True:
            src = np.fromfile(sf, dtype=np.int64, count=rows)
            dst = np.fromfile(df, dtype=np.int64, count=rows)
            if len(src) == 0:
                return
            yield src, dst


# Ingestion ---------------------------------------------------------------------------------


def ingest_edgelist_external(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    memory_budget: int,
    directed: bool = False,
    name: str | None = None,
    id_type: str = "auto",
    seed: int = 0,
    header: bool | None = None,
    max_fan_in: int = 64,
) -> IngestReport:
    """Ingest a text edge list in bounded memory (module docstring).

    Args:
        source, out_dir, directed, name, seed, header: As
            :func:`gnncore.io.edgelist.ingest_edgelist`.
        memory_budget (int): Bytes for buffers (parse batches, sort runs, merge
            buffers, the shuffle's permutation); at least
            :data:`MIN_MEMORY_BUDGET`. The O(|V|) arrays and Polars' reader
            come on top (module docstring).
        id_type (str): ``"auto"``, ``"int"`` or ``"string"``: as the in-memory
            path, ``"auto"`` reads integers when Polars can, else strings
            (:mod:`gnncore.io.string_ids`).
        max_fan_in (int): Most runs merged at once.

    Returns:
        IngestReport: With ``phases`` (seconds per phase), ``peak_rss_bytes``
        and ``memory_budget``.
    """
    require_csrc()
    started = time.perf_counter()
    phases = Phases()
    budget = int(memory_budget)
    if budget < MIN_MEMORY_BUDGET:
        raise ValueError(f"memory_budget must be at least {MIN_MEMORY_BUDGET} bytes, got {budget}")
    if id_type not in ID_TYPES:
        raise ValueError(f"id_type must be one of {ID_TYPES}, not {id_type!r}")
    source = Path(source)
    if source.is_dir():
        raise InputError(
            "is a directory, not an edge-list file (for a dataset directory "
            "use --format ogb, planetoid or kg)",
            source,
        )
    if not source.is_file():
        raise InputError("no such file", source)
    check_gzip_name(source)
    with scratch_directory(Path(out_dir), "ingest") as scratch:
        fallback = False
        if id_type != "string":
            try:
                return _ingest(
                    source, Path(out_dir), scratch, phases, started, budget, directed, name,
                    id_type, seed, header, max_fan_in,
                )  # fmt: skip
            except _StringIds:
                _clear_scratch(scratch)
                fallback = True
        from gnncore.io.string_ids import ingest_string_ids

        return ingest_string_ids(
            source, Path(out_dir), scratch, phases, started, budget, directed=directed,
            name=name, seed=seed, header=header, max_fan_in=max_fan_in, fallback=fallback,
        )  # fmt: skip


def _ingest(
    source: Path,
    out: Path,
    scratch: Path,
    phases: Phases,
    started: float,
    budget: int,
    directed: bool,
    name: str | None,
    id_type: str,
    seed: int,
    header: bool | None,
    max_fan_in: int,
) -> IngestReport:

    stage("reading edges")
    phases.start("parse")
    text = source
    if is_gzip(source):
        text = scratch / "input.txt"
        _decompress(source, text)
    rows = batch_rows(budget)
    try:
        layout = sniff(text, header)
        layouts = [layout]
        if layout.separator in ("\t", " "):
            layouts.append(replace(layout, separator=None))
        try:
            layout, ids, parsed = _parse(text, layouts, scratch, budget, rows, directed,
                                         max_fan_in, wide=False, id_type=id_type)  # fmt: skip
        except _WideIds:  # ids past 2**32: parse again, into the general path's files
            _clear_scratch(scratch)
            layout, ids, parsed = _parse(text, layouts, scratch, budget, rows, directed,
                                         max_fan_in, wide=True, id_type=id_type)  # fmt: skip
        if parsed.count == 0:
            raise InputError("empty file: no edges", text)
    except InputError as exc:
        if exc.path == text and text != source:
            raise InputError(exc.problem, source, line=exc.line, row=exc.row) from None
        raise

    stage("remapping ids")
    phases.start("remap")
    raw_ids, lut = ids.finish()
    del ids
    details: dict[str, Any] = {
        "separator": layout.separator_name,
        "header": layout.header,
        "ignored_weight_column": layout.ncols == 3,
        "id_type": "int",
    }

    def before(writer: GraphDirWriter) -> None:
        writer.write_table("node_ids", node_id_table(raw_ids))

    common: dict[str, Any] = {
        "num_nodes": len(raw_ids), "directed": directed, "name": name or default_name(source),
        "seed": seed, "budget": budget, "fmt": "edgelist", "source": source, "before": before,
        "details": details, "started": started, "max_fan_in": max_fan_in,
    }  # fmt: skip
    if isinstance(parsed, _KeyParsed):
        phases.start("sort/dedup")
        parsed.keys.finish()
        return write_key_graph(
            parsed.keys, out, scratch, phases, num_input=parsed.count,
            loops=parsed.count - parsed.kept, remap=_key_remap(raw_ids, lut), **common,
        )  # fmt: skip
    chunks = _mapped_chunks(parsed, rows, raw_ids, lut, phases)
    del lut
    return write_edge_stream(chunks, out, scratch, phases, **common)


def _parse(
    text: Path, layouts: list[Layout], scratch: Path, budget: int, rows: int, directed: bool,
    max_fan_in: int, wide: bool, id_type: str,
) -> tuple[Layout, IdCollector, _Parsed | _KeyParsed]:  # fmt: skip
    """Parse with the C++ reader, or when it declines, with the first layout Polars
    reads; raises :class:`_WideIds` (fast path, ``wide=False``) at an id past ``2**32``,
    and :class:`_StringIds` (``id_type="auto"``) when no layout reads integers."""

    def sinks() -> tuple[IdCollector, _Parsed | _KeyParsed]:
        ids = IdCollector(scratch, budget // 4, max_fan_in)
        if wide:
            return ids, _Parsed(scratch)
        return ids, _KeyParsed(scratch, budget // 2, directed, max_fan_in)

    ids, sink = sinks()
    try:
        _native_pass(text, layouts[0], ids, rows, sink)
        return layouts[0], ids, sink
    except Declined:
        del ids, sink
        _clear_scratch(scratch)
    for candidate in layouts:
        ids, sink = sinks()
        try:
            _parse_pass(text, candidate, ids, rows, sink)
        except _PolarsFailed:
            continue
        return candidate, ids, sink
    if id_type == "auto":
        raise _StringIds
    locate_problem(text, layouts[-1], as_int=True)
    raise InputError("could not be parsed as an integer edge list", text)


def _native_pass(
    text: Path, layout: Layout, ids: IdCollector, rows: int, sink: _Parsed | _KeyParsed
) -> None:
    """Parse ``text`` in blocks with the C++ reader into ``ids`` and ``sink``;
    raises :class:`Declined` at a line it leaves to Polars (all of the file then)."""
    try:
        for src, dst, top in read_int_edge_blocks(text, layout, rows):
            ids.add(src, dst, top)
            sink.add(src, dst, top)
    finally:
        sink.close()


def _clear_scratch(scratch: Path) -> None:
    """Remove what a parse pass left in the scratch directory (runs, raw id files)."""
    for pattern in ("*.run", "*.i64"):
        for path in scratch.glob(pattern):
            path.unlink()


def _key_remap(raw_ids: np.ndarray, lut: np.ndarray | None) -> Callable[[np.ndarray], None]:
    """Maps raw-id keys to node-id keys in place: through the lookup table of dense
    ids, else by binary search of the sorted raw ids."""
    from gnncore import _C

    def remap(keys: np.ndarray) -> None:
        if lut is not None:
            _C.remap_keys(keys, lut)
            return
        a, b = split_keys(keys)
        keys[:] = pack_keys(np.searchsorted(raw_ids, a), np.searchsorted(raw_ids, b))

    return remap


def _mapped_chunks(
    parsed: _Parsed, rows: int, raw_ids: np.ndarray, lut: np.ndarray | None, phases: Phases
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The parsed edges, mapped to node ids chunk by chunk (phase ``remap``); the
    raw id files are removed once read."""
    for raw_src, raw_dst in _chunks(parsed, rows):
        phases.start("remap")
        s = map_ids(raw_src, raw_ids, lut)
        d = map_ids(raw_dst, raw_ids, lut)
        del raw_src, raw_dst
        yield s, d
    parsed.src_path.unlink()
    parsed.dst_path.unlink()


# The edge stream to a graph directory ------------------------------------------------------


def batch_rows(budget: int) -> int:
    """Rows of a parse batch / edge chunk / block of the later passes under ``budget``."""
    return int(min(max(budget // 96, MIN_BATCH_ROWS), MAX_BATCH_ROWS))


@contextmanager
def scratch_directory(out: Path, kind: str) -> Iterator[Path]:
    """A scratch directory ``.NAME.KIND-PID-XXXXXXXX`` beside ``out``, removed on
    success and on error; first the scratch and temporary siblings of ``out``
    that killed runs left behind (:data:`SCRATCH_KINDS`) are removed."""
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out, SCRATCH_KINDS)
    scratch = out.parent / temporary_name(out, kind)
    scratch.mkdir()
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
    steps 3-7 of the module docstring. Ingestion feeds it the parsed, remapped
    edges; :func:`gnncore.synth.generate_graph` the generator's chunks.

    Args:
        chunks: ``(src, dst)`` int64 arrays over node ids ``0..num_nodes-1``,
            self-loops and repeats allowed (dropped and counted here); read
            once, one chunk at a time (time inside the iterator counts in the
            phase it starts).
        out_dir: The graph directory to create or replace (atomically).
        scratch (Path): An existing directory for the sort runs
            (:func:`scratch_directory`); the caller removes it.
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
    started = time.perf_counter() if started is None else started
    if int(num_nodes) - 1 > MAX_KEY_ID:
        return _write_edge_stream_pairs(
            chunks, out_dir, scratch, phases, num_nodes=num_nodes, directed=directed, name=name,
            seed=seed, budget=budget, fmt=fmt, source=source, before=before, details=details,
            started=started, max_fan_in=max_fan_in, before_phase=before_phase,
        )  # fmt: skip
    canon = KeySorter(scratch, "canon", budget // 2, max_fan_in)
    num_input = kept = 0
    for s, d in chunks:
        phases.start("sort/dedup")
        num_input += len(s)
        kept += canon.add_edges(s, d, unordered=not directed)
    phases.start("sort/dedup")
    canon.finish()
    return write_key_graph(
        canon, out_dir, scratch, phases, num_nodes=num_nodes, directed=directed, name=name,
        seed=seed, budget=budget, fmt=fmt, source=source, num_input=num_input,
        loops=num_input - kept, before=before, details=details, started=started,
        max_fan_in=max_fan_in, before_phase=before_phase,
    )  # fmt: skip


def write_key_graph(
    canon: KeySorter,
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
    num_input: int,
    loops: int,
    remap: Callable[[np.ndarray], None] | None = None,
    before: Callable[[GraphDirWriter], None] | None = None,
    details: Mapping[str, Any] | None = None,
    started: float | None = None,
    max_fan_in: int = 64,
    before_phase: str = "write",
) -> IngestReport:
    """Write a graph directory from the finished canonical keys of ``canon``.

    ``canon`` holds the distinct canonical edges as keys ``src << 32 | dst``
    (undirected: ``min << 32 | max``), finished (:meth:`KeySorter.finish`);
    ``remap``, when given, maps their ids to node ids in place (monotone:
    ingestion sorts raw ids and maps them afterwards). ``num_input`` and
    ``loops`` are the edges read and the self-loops dropped. The other
    arguments as :func:`write_edge_stream`. Writes ``edges.parquet``,
    ``indptr``/``indices``/``eid`` (row ranges filled from the keys in memory
    bounded by half the budget), ``edges_shuffled`` and the manifest.
    """
    started = time.perf_counter() if started is None else started
    out_given, out = out_dir, Path(out_dir).absolute()
    rows = batch_rows(budget)
    num_nodes = int(num_nodes)
    num_canonical = canon.count
    with create_graph_dir(out, name) as writer:
        if before is not None:
            stage("node data")
            phases.start(before_phase)
            before(writer)
            for file in writer.files:
                writer.hash_in_background(file)
        if remap is not None:
            stage("remapping ids")
            phases.start("remap")
            canon.set_remap(remap)

        # edges.parquet (Polars, GIL mostly released) is written on a thread while
        # the CSR and the shuffled stream are built: they only read the sorted keys
        # (the shuffle works on a copy)
        stage("writing edges and CSR")
        phases.start("csr")
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-parquet") as pool:
            edges_path = writer.file_path("edges.parquet", "parquet")
            edges = pool.submit(write_edges_parquet, edges_path, num_canonical, canon.blocks(rows))
            try:
                num_edges = _write_key_csr(canon, writer, num_nodes, directed, budget, rows)
                stage("shuffled edge stream")
                phases.start("shuffle")
                shuffle = _shuffle_pairs(canon, scratch, directed, seed, budget, rows, max_fan_in)
            finally:
                phases.start("write")  # what is left of the Parquet writing
                edges.result()
        canon.release()  # the keys, or their run on disk: the shuffle holds its own copy
        writer.hash_in_background("edges.parquet")
        phases.start("shuffle")
        num_pairs = _write_shuffled(writer, shuffle, num_nodes, rows)
        if shuffle.buckets:
            writer.stats["shuffle_buckets"] = shuffle.buckets
        writer.set_topology(
            num_nodes,
            num_edges=num_edges,
            num_canonical_edges=num_canonical,
            num_undirected_edges=num_pairs,
            directed=directed,
            shuffle_seed=seed,
        )
        duplicates = num_input - loops - num_canonical
        plain_details = _record_stats(writer, fmt, source, details, num_input, loops, duplicates)
        stage("checksums and manifest")
        phases.start("checksums")
    phases.stop()
    return _report(
        fmt, source, out_given, writer, phases, started, budget, plain_details,
        num_nodes=num_nodes, num_input=num_input, loops=loops, duplicates=duplicates,
        num_canonical=num_canonical, num_edges=num_edges, directed=directed,
    )  # fmt: skip


def _write_key_csr(
    canon: KeySorter, writer: GraphDirWriter, num_nodes: int, directed: bool, budget: int,
    rows: int,
) -> int:  # fmt: skip
    """``indptr``, ``indices`` and ``eid`` from the canonical keys; returns the
    number of entries. Keys held in memory with room for a transposed copy and
    its sort scratch (16 bytes a key within half the budget) are merged with
    their sorted transpose, both read sequentially
    (:func:`_write_key_csr_merged`); otherwise row ranges that fill half the
    budget are filled by a pass over the keys each (random writes)."""
    from gnncore import _C

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
    from gnncore import _C

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


@dataclass
class _Shuffle:
    """The distinct unordered pairs as keys in shuffled order, array after array:
    ``buckets`` is 0 for numpy's permutation of the seed, else the number of
    buckets of :func:`~gnncore.store.edge_keys.bucket_shuffle`."""

    count: int
    arrays: Iterator[np.ndarray]
    buckets: int
    pairs: KeySorter | None
    """The directed graph's own pair sorter, released once the arrays are read."""


def _shuffle_pairs(
    canon: KeySorter, scratch: Path, directed: bool, seed: int, budget: int, rows: int,
    max_fan_in: int,
) -> _Shuffle:  # fmt: skip
    """The order of ``edges_shuffled.npy``. Numpy's permutation of ``seed``
    (:func:`shuffle_keys`, the in-memory path's order) when the pairs are in
    memory or fit half the budget (or :data:`EXACT_SHUFFLE_BYTES`): shuffled in
    a copy (edges.parquet may still be reading the canonical keys; the copy goes
    into the sort's scratch, free once the CSR is built). Otherwise the bounded
    scatter shuffle of :func:`bucket_shuffle`, whose buckets are written here
    (the pairs read once, sequentially) and read back as the arrays are taken.
    ``canon`` is left as it is."""
    if directed:
        pairs = KeySorter(scratch, "pairs", budget // 4, max_fan_in)
        for block in canon.blocks(rows):
            a, b = split_keys(block)
            pairs.add_edges(a, b, unordered=True)
        pairs.finish()
    else:
        pairs = canon
    num_pairs = pairs.count
    own = pairs if pairs is not canon else None
    if pairs.keys is None and num_pairs * 8 > max(budget // 2, EXACT_SHUFFLE_BYTES):
        arrays = bucket_shuffle(pairs.blocks(rows), num_pairs, seed, budget, scratch, "shuffle")
        return _Shuffle(num_pairs, arrays, shuffle_buckets(num_pairs, budget), own)
    keys: np.ndarray
    if pairs.keys is not None and own is not None:  # the directed pairs: in place
        keys = pairs.keys
    else:
        spare = canon.scratch
        if spare is not None and len(spare) >= num_pairs:
            keys = spare[:num_pairs]
        else:
            keys = np.empty(num_pairs, dtype=np.uint64)
        at = 0
        for block in pairs.blocks(rows):
            keys[at : at + len(block)] = block
            at += len(block)
    shuffle_keys(keys, seed)
    return _Shuffle(num_pairs, iter([keys]), 0, own)


def _write_shuffled(writer: GraphDirWriter, shuffle: _Shuffle, num_nodes: int, rows: int) -> int:
    """Write ``edges_shuffled.npy`` (``[count, 2]`` pairs) from the shuffled keys
    (rotated in place into int32 pairs when the ids fit); returns the pair count."""
    from gnncore import _C

    int_dtype = index_dtype(num_nodes)
    path = writer.file_path("edges_shuffled.npy", "npy")
    with npy_writer(path, int_dtype, (shuffle.count, 2)) as out_fh:
        for keys in shuffle.arrays:
            for start in range(0, len(keys), rows):
                block = keys[start : start + rows]
                if int_dtype == np.int32 and np.little_endian:
                    # b << 32 | a is the int32 pair (a, b) in memory: rotated in place
                    _C.transpose_keys(block, block)
                    block.view(np.int32).tofile(out_fh)
                    continue
                out = np.empty((len(block), 2), dtype=int_dtype)
                out[:, 0] = block >> KEY_SHIFT
                out[:, 1] = block & MINOR_MASK
                out.tofile(out_fh)
            del keys
    if shuffle.pairs is not None:
        shuffle.pairs.release()
    return shuffle.count


def _record_stats(
    writer: GraphDirWriter, fmt: str, source: str | os.PathLike[str],
    details: Mapping[str, Any] | None, num_input: int, loops: int, duplicates: int,
) -> dict[str, Any]:  # fmt: skip
    """Put the run's details and counts into the manifest's ``stats``; returns the details."""
    plain_details: dict[str, Any] = _plain(dict(details or {}))
    writer.stats.update(plain_details)
    writer.stats.update(
        {
            "format": fmt,
            "source": str(Path(source).absolute()),
            "num_input_edges": num_input,
            "self_loops_removed": loops,
            "duplicates_removed": duplicates,
        }
    )
    return plain_details


def _report(
    fmt: str, source: str | os.PathLike[str], out_given: str | os.PathLike[str],
    writer: GraphDirWriter, phases: Phases, started: float, budget: int,
    plain_details: dict[str, Any], *, num_nodes: int, num_input: int, loops: int,
    duplicates: int, num_canonical: int, num_edges: int, directed: bool,
) -> IngestReport:  # fmt: skip
    return IngestReport(
        format=fmt,
        source=str(source),
        out_dir=str(out_given),
        num_nodes=num_nodes,
        num_input_edges=num_input,
        self_loops_removed=loops,
        duplicates_removed=duplicates,
        num_canonical_edges=num_canonical,
        num_edges=int(num_edges),
        directed=directed,
        num_features=writer.num_features,
        num_classes=writer.num_classes,
        seconds=round(time.perf_counter() - started, 3),
        details=plain_details,
        phases=phases.rounded(),
        peak_rss_bytes=peak_rss_bytes(),
        memory_budget=budget,
    )


def _write_edge_stream_pairs(
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
    """:func:`write_edge_stream` for node ids past ``2**32`` (two int64 columns a pair)."""
    from gnncore import _C

    started = time.perf_counter() if started is None else started
    out_given, out = out_dir, Path(out_dir).absolute()
    rows = batch_rows(budget)
    num_nodes = int(num_nodes)
    num_input = loops = 0
    adj_budget = budget // 4
    with create_graph_dir(out, name) as writer:
        if before is not None:
            stage("node data")
            phases.start(before_phase)
            before(writer)
        canon = RunSorter(scratch, "canon", budget // 4, "src_dst", max_fan_in)
        pairs_sorter = (
            RunSorter(scratch, "pairs", budget // 4, "src_dst", max_fan_in) if directed else None
        )
        with ExternalEdgeSorter(
            scratch, adj_budget, directed=directed, max_fan_in=max_fan_in
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
            int_dtype = index_dtype(num_nodes)
            writer.file_path("indptr.npy", "npy")
            writer.file_path("indices.npy", "npy")
            _, _, num_edges = adjacency.finish(num_nodes, writer.root, index_dtype=int_dtype)

        # eid: the canonical edges' src-major offsets, then the rows block by block
        next_edge = np.zeros(num_nodes, dtype=np.int64)
        for block in iter_run(canon_path, rows):
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
        eid_fh = npy_writer(writer.file_path("eid.npy", "npy"), np.int64, (num_edges,))
        with indices_fh, eid_fh:
            row = 0
            while row < num_nodes:
                end_row = int(np.searchsorted(indptr, int(indptr[row]) + rows, side="right")) - 1
                end_row = min(max(end_row, row + 1), num_nodes)
                ptr = np.array(indptr[row : end_row + 1])
                count = int(ptr[-1] - ptr[0])
                block_indices = np.fromfile(indices_fh, dtype=indices_dtype, count=count)
                block_eid = np.empty(count, dtype=np.int64)
                _C.csr_edge_ids(ptr, block_indices, row, next_edge, block_eid, directed)
                block_eid.tofile(eid_fh)
                row = end_row
        del indptr, next_edge

        stage("shuffled edge stream")
        phases.start("shuffle")
        pairs_file = canon_path if pairs_path is None else pairs_path
        num_pairs = num_canonical if pairs_path is None else run_count(pairs_path)
        rng = np.random.default_rng(seed)
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
                scratch / "perm.npy", mode="w+", dtype=np.int64, shape=(num_pairs,)
            )
            for start in range(0, num_pairs, rows):
                stop = min(start + rows, num_pairs)
                perm[start:stop] = np.arange(start, stop, dtype=np.int64)
            rng.shuffle(perm)
        out_fh = npy_writer(
            writer.file_path("edges_shuffled.npy", "npy"), int_dtype, (num_pairs, 2)
        )
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

        stage("writing edges")
        phases.start("write")
        run_keys = (pack_keys(b[:, 0], b[:, 1]) for b in iter_run(canon_path, rows))
        write_edges_parquet(writer.file_path("edges.parquet", "parquet"), num_canonical, run_keys)
        writer.set_topology(
            num_nodes,
            num_edges=num_edges,
            num_canonical_edges=num_canonical,
            num_undirected_edges=num_pairs,
            directed=directed,
            shuffle_seed=seed,
        )
        duplicates = num_input - loops - num_canonical
        plain_details = _record_stats(writer, fmt, source, details, num_input, loops, duplicates)
        stage("checksums and manifest")
        phases.start("checksums")
    phases.stop()
    return _report(
        fmt, source, out_given, writer, phases, started, budget, plain_details,
        num_nodes=num_nodes, num_input=num_input, loops=loops, duplicates=duplicates,
        num_canonical=num_canonical, num_edges=int(num_edges), directed=directed,
    )  # fmt: skip
