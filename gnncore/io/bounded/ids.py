"""The distinct raw ids of an edge list, collected in bounded memory, and
their mapping to node ids (ranks of the sorted raw ids)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnncore import _C
from gnncore.io.bounded.budget import MAX_BATCH_ROWS
from gnncore.io.bounded.pair_runs import RunSorter
from gnncore.io.canonical import sorted_unique
from gnncore.store.edge_keys import iter_run, run_count

PRESENCE_SHARE = 8
"""Dense ids go up to this fraction (1 / 8) of the collector's budget: the
presence bitmap takes a bit per id up to the largest while the ids are
collected, and :meth:`IdCollector.finish` a byte per id beside it for a moment
(:func:`present_ids`)."""


def present_ids(bits: np.ndarray, size: int) -> np.ndarray:
    """The presence bitmap ``bits`` (``gnncore._C.mark_present``: bit ``id % 64``
    of the uint64 word ``id // 64``) of ids ``0..size-1`` as a bool array, a byte
    an id."""
    as_bytes = bits.astype("<u8", copy=False).view(np.uint8)  # little-endian: bit order
    return np.unpackbits(as_bytes, count=size, bitorder="little").view(bool)


class IdCollector:
    """The distinct raw ids of the edges, in bounded memory.

    Dense ids (the largest below ``dense_limit``) are marked in a presence
    bitmap; once an id passes the limit the collector keeps sorted distinct ids
    instead, spilling them as runs when more than ``capacity`` are held.

    The presence bitmap takes a bit per id up to the largest, and the ids go
    up to an eighth of ``budget_bytes`` (:data:`PRESENCE_SHARE`) for the byte per
    id :meth:`finish` unpacks: less than the 4-byte
    lookup table the remap builds from the ids either way (:func:`dense_lookup`),
    and far faster than sorting every block's ids. With the limit at a
    twentieth, a billion-edge CSV of 100M ids under a 4 GiB budget took the
    runs' path and spent 342 s parsing, most of it in numpy's sorts.
    """

    def __init__(self, directory: Path, budget_bytes: int, max_fan_in: int) -> None:
        self.dense_limit = max(budget_bytes // PRESENCE_SHARE, 1 << 16)
        self.capacity = max(budget_bytes // 32, 1024)
        self.presence: np.ndarray | None = np.zeros(0, dtype=np.uint64)  # bitmap
        self._presence_ids = 0  # ids the bitmap covers (at most 64 per word)
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
            present = present_ids(self.presence, self._presence_ids)
            self._keep(np.flatnonzero(present).astype(np.int64))
            self.presence = None
        if self.presence is not None:
            if top >= self._presence_ids:
                size = min(max(top + 1, 2 * self._presence_ids), self.dense_limit)
                grown = np.zeros(-(-size // 64), dtype=np.uint64)
                grown[: len(self.presence)] = self.presence
                self.presence, self._presence_ids = grown, size
            # C++, not numpy's fancy indexing (5x slower); a bit an id (2.2x faster than a byte)
            _C.mark_present(self.presence, src, self._presence_ids)
            _C.mark_present(self.presence, dst, self._presence_ids)
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
            presence = present_ids(self.presence, self._presence_ids)
            self.presence = None
            raw_ids = np.flatnonzero(presence).astype(np.int64, copy=False)  # int64 already
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
