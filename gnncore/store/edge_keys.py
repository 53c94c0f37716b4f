"""Edges as packed 64-bit keys ``a << 32 | b``: sorted, deduplicated and shuffled in bounded memory.

The fast path of bounded-memory ingestion and generation
(:mod:`gnncore.io.bounded`) when every id is below ``2**32``: one
uint64 per edge instead of two int64 columns, sorted by a parallel radix sort
in C++ (``gnncore._C.sort_unique_keys``). :class:`KeySorter` holds the keys in
a buffer sized from its budget; when the buffer fills, its keys are sorted,
deduplicated and spilled as a *key run* (``gnncore._C.KeyRunWriter``: the
sorted keys delta-coded as LEB128 varints, 3-5 bytes a key on graphs' edges
where a pair run takes 16), and :meth:`KeySorter.finish` merges the runs k
ways (``gnncore._C.merge_key_runs``), each merged run removed as soon as its
merge is done. Either way the result is read back in sorted blocks
(:meth:`KeySorter.blocks`).

:func:`shuffle_keys` shuffles keys in place exactly as
``numpy.random.default_rng(seed).permutation`` orders them (so the shuffled
edge stream is byte for byte the in-memory writer's).
:func:`bucket_shuffle` shuffles a stream of sorted keys too large for memory:
each key goes to one of ``B`` buckets drawn uniformly at random (seeded), the
buckets are written as key runs (each gets a sorted subsequence, so the delta
coding holds), and each bucket is then read back and shuffled in memory by
:func:`shuffle_keys` with its own seed. Concatenating uniformly shuffled
buckets of uniformly drawn members is a uniformly random permutation (the
scatter shuffle); it is reproducible from the seed, but it is not numpy's
permutation of the same seed.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.prefault import Prefaulter, huge_page_array
from gnncore.store.external_sort import merge_buffer, merge_runs_down

KEY_SHIFT = np.uint64(32)
MINOR_MASK = np.uint64(0xFFFFFFFF)
MAX_KEY_ID = (1 << 32) - 1
"""The largest id a key holds."""
BYTES_PER_KEY = 16
"""Budget bytes per buffered key: the key and the radix sort's scratch."""
RUN_HEADER_BYTES = 32
SORT_THREADS = 2
"""Threads of the radix sort (the comparison with Polars' parse is at 2 threads)."""
KEY_RUN_BUFFER = 1 << 20
"""Read / write buffer of one key run outside merges (a block reader, a bucket writer)."""
PREFAULT_MIN_KEYS = 1 << 20
"""A :class:`KeySorter` of at least this many keys of buffer faults its buffer and
scratch in ahead of the keys on a thread (:class:`~gnncore.prefault.Prefaulter`)."""
PREFAULT_AHEAD_KEYS = 4 << 20
"""The most keys' pages (16 bytes a key: the key and its scratch) faulted ahead."""


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` int64 arrays of keys ``a << 32 | b``."""
    return (keys >> KEY_SHIFT).astype(np.int64), (keys & MINOR_MASK).astype(np.int64)


def pack_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Keys ``a << 32 | b`` of non-negative ids below ``2**32``."""
    return (np.asarray(a).astype(np.uint64) << KEY_SHIFT) | np.asarray(b).astype(np.uint64)


def run_count(path: Path) -> int:
    """The number of pairs of a run file (its header)."""
    return int(np.fromfile(path, dtype=np.int64, count=1, offset=16)[0])


def iter_run(path: Path | None, rows: int) -> Iterator[np.ndarray]:
    """A run file's pairs, ``[k, 2]`` int64 blocks of at most ``rows`` pairs, read
    (not memory-mapped: the pages do not count in this process's RSS)."""
    count = 0 if path is None else run_count(path)
    if count == 0 or path is None:
        return
    with open(path, "rb") as fh:
        fh.seek(RUN_HEADER_BYTES)
        done = 0
        while done < count:
            k = min(rows, count - done)
            block = np.fromfile(fh, dtype=np.int64, count=2 * k).reshape(k, 2)
            if len(block) != k:
                raise InputError("run file is truncated", path)
            done += k
            yield block


class KeySorter:
    """Packed edge keys collected in bounded memory, then read back sorted and distinct.

    Args:
        directory (Path): Where the runs go (a scratch directory the caller removes).
        name (str): The runs' file name prefix.
        budget_bytes (int): Memory for the key buffer and its sort scratch
            (:data:`BYTES_PER_KEY` a key) and, at the end, the merge buffers.
        max_fan_in (int): Most runs merged at once.
    """

    def __init__(self, directory: Path, name: str, budget_bytes: int, max_fan_in: int = 64) -> None:
        self.directory = directory
        self.name = name
        self.budget_bytes = int(budget_bytes)
        self.max_fan_in = max(int(max_fan_in), 2)
        self._capacity = max(self.budget_bytes // BYTES_PER_KEY, 1024)
        self._keys: np.ndarray | None = None
        self._fill = 0
        self._serial = 0
        self.runs: list[Path] = []
        self.run: Path | None = None
        """The merged run file once finished, if the keys did not fit in memory."""
        self.keys: np.ndarray | None = None
        """The sorted distinct keys once finished, if they fit in memory."""
        self.count = 0
        """Distinct keys once finished."""
        self._remap: Callable[[np.ndarray], None] | None = None
        self.scratch: np.ndarray | None = None
        """The sort's scratch (at least as many keys as were sorted at once), kept
        for reuse: the first touch of fresh pages costs more than the sort here."""
        self._prefault: Prefaulter | None = None

    def _buffer(self) -> np.ndarray:
        """The key buffer; a large one comes with its scratch, both faulted in on a
        thread ahead of the keys added (:meth:`add_edges`), so neither the caller's
        thread nor the sort pays the first touch of their pages."""
        if self._keys is None:
            self._keys = np.empty(self._capacity, dtype=np.uint64)
            if self._capacity >= PREFAULT_MIN_KEYS:
                self.scratch = np.empty(self._capacity, dtype=np.uint64)
                self._prefault = Prefaulter([self._keys, self.scratch], PREFAULT_AHEAD_KEYS)
                # a sorter dropped unfinished (an error mid-parse) stops its thread,
                # which would otherwise hold the arrays for the life of the process
                weakref.finalize(self, self._prefault.close)
        return self._keys

    def _stop_prefault(self) -> None:
        if self._prefault is not None:
            self._prefault.close()  # which lets go of the arrays
            self._prefault = None

    def add_edges(self, src: np.ndarray, dst: np.ndarray, unordered: bool) -> int:
        """Add the edges ``(src[i], dst[i])`` (int64, ids in ``[0, 2**32)``) as keys,
        ``min << 32 | max`` when ``unordered``; self-loops are dropped. Returns
        the number kept. Raises ``ValueError`` for an id outside ``[0, 2**32)``."""
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        kept = start = 0
        while start < len(src):
            buffer = self._buffer()
            room = self._capacity - self._fill
            if room == 0:
                self._spill()
                continue
            stop = min(start + room, len(src))
            n = _C.pack_edge_keys(
                src[start:stop],
                dst[start:stop],
                unordered,
                buffer[self._fill : self._fill + stop - start],
            )
            self._fill += n
            kept += n
            start = stop
        if self._prefault is not None:
            self._prefault.advance(self._fill)
        return kept

    def _sorted(self) -> np.ndarray:
        """The buffer's keys sorted and distinct (a view of the buffer)."""
        keys = self._buffer()[: self._fill]
        if self.scratch is None or len(self.scratch) < self._fill:
            self.scratch = np.empty(self._fill, dtype=np.uint64)
        count = _C.sort_unique_keys(keys, self.scratch, SORT_THREADS)
        return keys[:count]

    def _next_path(self) -> Path:
        path = self.directory / f"{self.name}-{self._serial:06d}.keys"
        self._serial += 1
        return path

    def _spill(self) -> None:
        if self._fill == 0:
            return

        path = self._next_path()
        writer = _C.KeyRunWriter(str(path), KEY_RUN_BUFFER)
        writer.append(self._sorted())
        writer.commit()
        self.runs.append(path)
        self._fill = 0

    def finish(self) -> int:
        """Sort what is held; with runs on disk, spill it and merge them into one
        run (:attr:`run`), else keep the keys in memory (:attr:`keys`). Returns
        the number of distinct keys."""
        if self.finish_runs():
            self.merge()
        return self.count

    def finish_runs(self) -> bool:
        """Sort what is held and keep it in memory (:attr:`keys`; returns
        ``False``), or spill it and merge the runs down to at most
        ``max_fan_in``, leaving the last merge to :meth:`merge` or
        :meth:`merge_mapped` (returns ``True``). The key buffer and the sort's
        scratch are gone either way."""
        self._stop_prefault()
        if not self.runs:
            self.keys = self._sorted() if self._fill else np.zeros(0, dtype=np.uint64)
            self.count = len(self.keys)
            return False
        self._spill()
        self._keys = self.scratch = None
        self._merge_down(self.max_fan_in)
        return True

    def _merge_down(self, target: int) -> None:
        """Merge the runs (groups of ``max_fan_in``) until at most ``target`` are left."""
        self.runs = merge_runs_down(
            self.runs, target, self.max_fan_in, self.budget_bytes, self._next_path,
            merge=_C.merge_key_runs,
        )  # fmt: skip

    def merge(self) -> int:
        """The last merge of the runs :meth:`finish_runs` left: one run
        (:attr:`run`); returns the number of distinct keys."""
        if self.run is None and self.runs:
            self._merge_down(1)
            self.run = self.runs[0]
            self.count = _C.KeyRunReader(str(self.run), 4096).count
        return self.count

    def merge_mapped(self, lut: np.ndarray, major: np.ndarray, minor: np.ndarray) -> int:
        """The last merge of the runs :meth:`finish_runs` left, with each key's
        ids mapped through ``lut`` (monotone: the order holds) and each node's
        ends counted into ``major`` / ``minor`` (as
        :func:`~gnncore.io.bounded.csr.map_key_run` counts them), in one pass
        (``_C.merge_map_key_runs``): the mapped keys become :attr:`run`.
        Returns the number of distinct keys."""
        if self.run is not None or not self.runs:
            raise RuntimeError("merge_mapped needs the runs finish_runs left unmerged")
        out = self._next_path()
        paths = [str(p) for p in self.runs]
        # a quarter of the budget's merge buffers: the table and the counts are held too
        buffer = merge_buffer(self.budget_bytes // 4, len(paths))
        # the mapped run is about the runs' size: past half the budget it is
        # read back from the disk, not the cache, by the CSR and the shuffle
        # (the process holds its budget meanwhile), so it is written past the
        # cache too (no kernel copy; docs/BENCHMARKS.md, session 39)
        direct = sum(p.stat().st_size for p in self.runs) > self.budget_bytes // 2
        self.count = _C.merge_map_key_runs(paths, str(out), buffer, lut, major, minor,
                                           direct=direct)  # fmt: skip
        for path in self.runs:
            path.unlink()
        self.run, self.runs = out, [out]
        return self.count

    def set_remap(self, remap: Callable[[np.ndarray], None]) -> None:
        """Map the ids of the finished keys by ``remap`` (in place on a block of
        keys; monotone, so the order holds): at once when they are in memory,
        else as each block is read."""
        if self.keys is not None:
            remap(self.keys)
        else:
            self._remap = remap

    def blocks(self, rows: int) -> Iterator[np.ndarray]:
        """The finished keys in order, uint64 blocks of at most ``rows``."""
        if self.keys is not None:
            for start in range(0, len(self.keys), rows):
                yield self.keys[start : start + rows]
            return
        assert self.run is not None
        yield from read_key_run(self.run, rows, self._remap)

    def release(self) -> None:
        """Drop the keys held in memory and the scratch, and the run file."""
        self._stop_prefault()
        self._keys = self.keys = self.scratch = None
        if self.run is not None:
            self.run.unlink(missing_ok=True)
            self.run = None
            self.runs = []


def read_key_run(
    path: Path, rows: int, remap: Callable[[np.ndarray], None] | None = None
) -> Iterator[np.ndarray]:
    """A key run's keys in order, fresh uint64 blocks of at most ``rows`` keys,
    each mapped by ``remap`` (in place) when given."""
    reader = _C.KeyRunReader(str(path), KEY_RUN_BUFFER)
    while reader.remaining:
        block = np.empty(min(rows, reader.remaining), dtype=np.uint64)
        got = reader.read(block)
        if remap is not None:
            remap(block[:got])
        yield block[:got]


def shuffle_keys(keys: np.ndarray, seed: int | np.random.SeedSequence) -> None:
    """Shuffle uint64 ``keys`` in place into ``keys[default_rng(seed).permutation(len(keys))]``
    (numpy's own algorithm and draws, in C++)."""
    state = np.random.PCG64(seed).state
    low = (1 << 64) - 1
    s, inc = int(state["state"]["state"]), int(state["state"]["inc"])
    _C.pcg64_shuffle(
        keys, s >> 64, s & low, inc >> 64, inc & low, bool(state["has_uint32"]),
        int(state["uinteger"]),
    )  # fmt: skip


def shuffle_buckets(count: int, budget_bytes: int) -> int:
    """Buckets of :func:`bucket_shuffle` for ``count`` keys: enough that a bucket
    averages half of ``budget_bytes`` (8 bytes a key), so that even the largest
    of the (multinomial) bucket sizes fits the budget but with a negligible
    chance (it is held alone, in one array)."""
    per_bucket = max(budget_bytes // 16, 1)
    return max(math.ceil(count / per_bucket), 1)


def bucket_shuffle(
    blocks: Iterable[np.ndarray],
    count: int,
    seed: int,
    budget_bytes: int,
    directory: Path,
    name: str = "bucket",
) -> Iterator[np.ndarray]:
    """The ``count`` sorted distinct keys of ``blocks`` in a uniformly random order
    drawn in bounded memory (the scatter shuffle of the module docstring).

    Here, at once, each key's bucket is drawn by ``default_rng(seed)`` block
    after block and the buckets (:func:`shuffle_buckets`) are written as key runs
    ``directory/NAME-NNNNNN.keys``: ``blocks`` is read to the end before this
    returns. The iterator returned then reads bucket ``i`` whole, removes its
    file, shuffles it in place by :func:`shuffle_keys` with
    ``SeedSequence(seed).spawn(B)[i]`` and yields it: a view of one buffer
    of the largest bucket's size (huge pages), valid until the next bucket is
    taken. Memory: the largest bucket (about half of ``budget_bytes``), a block of
    ``blocks`` with its bucket draws, and a write buffer a bucket. Reproducible:
    the same keys, seed and budget give the same order. Raises ``ValueError``
    when ``blocks`` does not hold ``count`` strictly increasing keys."""
    num_buckets = shuffle_buckets(count, budget_bytes)
    rng = np.random.default_rng(seed)
    paths = [directory / f"{name}-{i:06d}.keys" for i in range(num_buckets)]
    buffer = merge_buffer(budget_bytes // 4, num_buckets)
    writers = [_C.KeyRunWriter(str(path), buffer) for path in paths]
    draw_dtype = np.uint8 if num_buckets <= 256 else np.uint32
    seen = 0
    for block in blocks:
        seen += len(block)
        if num_buckets == 1:
            writers[0].append(block)
            continue
        bucket: np.ndarray = rng.integers(0, num_buckets, len(block), dtype=draw_dtype)
        _C.scatter_key_buckets(block, bucket, writers)  # one pass, not a mask a bucket
    if seen != count:
        raise ValueError(f"bucket_shuffle expected {count} keys, the blocks held {seen}")
    for writer in writers:
        writer.commit()
    return _shuffled_buckets(paths, np.random.SeedSequence(seed).spawn(num_buckets))


def _shuffled_buckets(
    paths: list[Path], seeds: list[np.random.SeedSequence]
) -> Iterator[np.ndarray]:
    # One buffer for every bucket, the largest's size, in huge pages: the
    # swaps are random over the whole bucket (a TLB miss a swap in 4 KiB pages),
    # and a huge page's first touch (on a VM that reports free memory to its
    # host, 7x a small page's: prefault.py) is paid once, not once a bucket.
    # The consumer drops each bucket before asking for the next.
    largest = max(_C.KeyRunReader(str(path), KEY_RUN_BUFFER).count for path in paths)
    buffer = huge_page_array(largest, np.uint64)
    for path, bucket_seed in zip(paths, seeds, strict=True):
        reader = _C.KeyRunReader(str(path), KEY_RUN_BUFFER)
        keys = buffer[: reader.count]
        reader.read(keys)
        del reader
        path.unlink()
        shuffle_keys(keys, bucket_seed)
        yield keys
        del keys
