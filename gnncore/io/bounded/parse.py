"""Parsing a text edge list of integer ids in bounded memory: the C++ reader
of :mod:`gnncore.io.readers.edge_text`, or Polars' streaming reader where it
declines, into an :class:`~gnncore.io.bounded.ids.IdCollector` and a sink --
packed keys of the raw ids (:class:`KeySink`), or two raw id files when an id
does not fit a key (:class:`RawIdFiles`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from gnncore.errors import InputError
from gnncore.io.bounded.ids import IdCollector, map_ids
from gnncore.io.bounded.phases import Phases
from gnncore.io.bounded.scratch import clear_scratch
from gnncore.io.bounded.text import PolarsFailed, polars_batches
from gnncore.io.readers.edge_layout import Layout
from gnncore.io.readers.edge_problems import locate_problem
from gnncore.io.readers.edge_text import Declined, read_int_edge_blocks
from gnncore.store.edge_keys import MAX_KEY_ID, SORT_THREADS, KeySorter, pack_keys, split_keys


class StringIds(Exception):
    """``id_type="auto"`` and Polars reads no layout's ids as integers: they are
    strings, as the in-memory path reads them (:mod:`gnncore.io.bounded.string_ids`)."""


class WideIds(Exception):
    """An id does not fit a packed key (``2**32`` or more): the general path takes over."""


class RawIdFiles:
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


class KeySink:
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
            raise WideIds
        self.kept += self.keys.add_edges(src, dst, unordered=not self.directed)
        self.count += len(src)

    def close(self) -> None:
        pass


def _parse_pass(
    text: Path, layout: Layout, ids: IdCollector, rows: int, sink: RawIdFiles | KeySink
) -> None:
    """Parse ``text`` in batches into ``ids`` and ``sink``; a bad line is an
    :class:`InputError` naming the file and line."""
    try:
        for df in polars_batches(text, layout, rows):
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


def _raw_chunks(parsed: RawIdFiles, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    with open(parsed.src_path, "rb") as sf, open(parsed.dst_path, "rb") as df:
        while True:
            src = np.fromfile(sf, dtype=np.int64, count=rows)
            dst = np.fromfile(df, dtype=np.int64, count=rows)
            if len(src) == 0:
                return
            yield src, dst


def parse(
    text: Path, layouts: list[Layout], scratch: Path, budget: int, rows: int, directed: bool,
    max_fan_in: int, wide: bool, id_type: str,
) -> tuple[Layout, IdCollector, RawIdFiles | KeySink]:  # fmt: skip
    """Parse with the C++ reader, or when it declines, with the first layout Polars
    reads; raises :class:`WideIds` (fast path, ``wide=False``) at an id past ``2**32``,
    and :class:`StringIds` (``id_type="auto"``) when no layout reads integers."""

    def sinks() -> tuple[IdCollector, RawIdFiles | KeySink]:
        ids = IdCollector(scratch, budget // 4, max_fan_in)
        if wide:
            return ids, RawIdFiles(scratch)
        return ids, KeySink(scratch, budget // 2, directed, max_fan_in)

    ids, sink = sinks()
    # a file larger than the budget cannot stay in the page cache it allows:
    # read past the cache, it costs no kernel copy and no reclaim (a 6 GB slice
    # of the billion's CSV in an 8 GiB cgroup: 23 s of system time -> 6 s) and
    # leaves the cache to the scratch's runs
    direct = text.stat().st_size > budget
    try:
        _native_pass(text, layouts[0], ids, rows, sink, direct)
        return layouts[0], ids, sink
    except Declined:
        del ids, sink
        clear_scratch(scratch)
    for candidate in layouts:
        ids, sink = sinks()
        try:
            _parse_pass(text, candidate, ids, rows, sink)
        except PolarsFailed:
            continue
        return candidate, ids, sink
    if id_type == "auto":
        raise StringIds
    locate_problem(text, layouts[-1], as_int=True)
    raise InputError("could not be parsed as an integer edge list", text)


def _native_pass(
    text: Path, layout: Layout, ids: IdCollector, rows: int, sink: RawIdFiles | KeySink,
    direct: bool,
) -> None:  # fmt: skip
    """Parse ``text`` in blocks with the C++ reader into ``ids`` and ``sink`` (read
    with ``O_DIRECT`` when ``direct``); raises :class:`Declined` at a line it leaves
    to Polars (all of the file then)."""
    try:
        # the next block is parsed (two threads, GIL released) while this one's
        # ids are marked and keys packed: 32 * rows bytes of buffers, not 16
        # (marking the ids on the parsing thread instead was slower: 19 s against
        # 17.5 s for a 6 GB slice of the billion's CSV)
        for src, dst, top in read_int_edge_blocks(text, layout, rows, ahead=True, direct=direct):
            ids.add(src, dst, top)
            sink.add(src, dst, top)
    finally:
        sink.close()


class KeyRemap:
    """Maps raw-id keys to node-id keys in place (a call per block of keys):
    through the lookup table of dense ids, else by binary search of the sorted
    raw ids. :meth:`release` drops both arrays (up to 12 bytes a node) once
    every key is mapped, so they are not held through the CSR and the shuffle."""

    def __init__(self, raw_ids: np.ndarray, lut: np.ndarray | None) -> None:
        self.raw_ids: np.ndarray | None = raw_ids
        self.lut = lut

    def __call__(self, keys: np.ndarray) -> None:
        from gnncore import _C  # lazy: the compiled extension is optional (require_csrc)

        if self.lut is not None:
            _C.remap_keys(keys, self.lut, SORT_THREADS)
            return
        if self.raw_ids is None:
            raise RuntimeError("KeyRemap used after release()")
        a, b = split_keys(keys)
        keys[:] = pack_keys(np.searchsorted(self.raw_ids, a), np.searchsorted(self.raw_ids, b))

    def release(self) -> None:
        """Drop the arrays (the keys are mapped)."""
        self.raw_ids = self.lut = None


def mapped_chunks(
    parsed: RawIdFiles, rows: int, raw_ids: np.ndarray, lut: np.ndarray | None, phases: Phases
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The parsed edges, mapped to node ids chunk by chunk (phase ``remap``); the
    raw id files are removed once read."""
    for raw_src, raw_dst in _raw_chunks(parsed, rows):
        phases.start("remap")
        s = map_ids(raw_src, raw_ids, lut)
        d = map_ids(raw_dst, raw_ids, lut)
        del raw_src, raw_dst
        yield s, d
    parsed.src_path.unlink()
    parsed.dst_path.unlink()
