"""Run-time lookups of a placement: where device ``d`` reads node ``v`` from.

A placement plan (format v2) stores, per device, the node ids it caches sorted
ascending (``cached_ids[d]``) and each one's row in that device's cache
(``cached_rows[d]``): O(cache) per device, not O(N). Device ``d`` reads ``v``
from its own cache when ``v`` is in ``cached_ids[d]``, else from the
lowest-numbered device of its peer group that caches ``v``, else from host
memory (``-1``); :func:`resolve` answers this for a batch of nodes by binary
search.

:func:`lookup_tables` builds the dense ``[devices, N]`` form of the same
answer (``dev_num`` / ``buf_pos``), which only the small-graph simulators and
tests use; plans no longer store it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnncore.plan.store import PlanError


def sorted_tables(caches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cached_ids, cached_rows)`` of rectangular ``caches`` (``[n, B]``): each
    row's ids ascending and their rows in ``caches[d]`` (int64, int32)."""
    caches = np.asarray(caches, dtype=np.int64)
    if caches.ndim != 2:
        raise ValueError(f"caches must be [devices, slots], got shape {list(caches.shape)}")
    if caches.shape[1] > np.iinfo(np.int32).max:
        raise PlanError("cache_nodes", "exceeds the lookup tables' int32 rows")
    order = np.argsort(caches, axis=1, kind="stable")
    ids = np.take_along_axis(caches, order, axis=1)
    return ids, order.astype(np.int32)


def resolve(
    device: int,
    nodes: np.ndarray,
    cached_ids: np.ndarray,
    cached_rows: np.ndarray,
    group: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """``(source, row)`` of ``nodes`` for ``device``: the device each is read from
    (``device`` itself, the lowest-numbered peer of ``group`` caching it, or
    ``-1`` for host) and its row in that device's cache (``-1`` for host).
    int16 and int32, the dense tables' types."""
    nodes = np.asarray(nodes, dtype=np.int64)
    source = np.full(len(nodes), -1, dtype=np.int16)
    row = np.full(len(nodes), -1, dtype=np.int32)
    open_ = np.ones(len(nodes), dtype=bool)
    for d in [device, *sorted(e for e in set(group) if e != device)]:
        ids = np.asarray(cached_ids[d])
        if not len(ids) or not open_.any():
            continue
        at = np.flatnonzero(open_)
        pos = np.searchsorted(ids, nodes[at])
        hit = pos < len(ids)
        hit[hit] = ids[pos[hit]] == nodes[at[hit]]
        found = at[hit]
        source[found] = d
        row[found] = np.asarray(cached_rows[d])[pos[hit]]
        open_[found] = False
    return source, row


def lookup_tables(
    caches: np.ndarray | Sequence[np.ndarray], num_nodes: int, groups: Sequence[Sequence[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """The dense lookups of a placement: ``(dev_num, buf_pos)``, each ``[n, N]``
    (O(N) per device: for simulations and tests on small graphs).

    ``caches[d]`` lists the nodes device ``d`` caches (rows may differ in
    length). ``dev_num[d, v]`` is the device ``d`` reads ``v`` from: ``d`` when
    it caches ``v``, else the lowest-numbered device of its peer group (one of
    the disjoint ``groups``) that does, else ``-1`` (host). ``buf_pos[d, v]`` is
    ``v``'s row in that device's cache (``-1`` for host reads). ``dev_num`` is
    int16, ``buf_pos`` int32.
    """
    devices = len(caches)
    width = max((len(c) for c in caches), default=0)
    if devices > np.iinfo(np.int16).max or width > np.iinfo(np.int32).max:
        raise PlanError("devices", "or cache size exceeds the lookup tables' range")
    dev_num = np.full((devices, num_nodes), -1, dtype=np.int16)
    buf_pos = np.full((devices, num_nodes), -1, dtype=np.int32)
    for group in groups:
        members = sorted(set(group))
        for d in members:
            # Peers from the highest to the lowest index, then the device itself:
            # later writes win, so the own cache beats any peer, a low peer a high one.
            for source in [*(e for e in reversed(members) if e != d), d]:
                ids = np.asarray(caches[source], dtype=np.int64)
                dev_num[d, ids] = source
                buf_pos[d, ids] = np.arange(len(ids), dtype=np.int32)
    return dev_num, buf_pos


def group_of(device: int, groups: Sequence[Sequence[int]]) -> list[int]:
    """The peer group holding ``device`` (``[device]`` when none does)."""
    for group in groups:
        if device in group:
            return sorted(set(group))
    return [device]


def read_masks(
    caches: np.ndarray, num_nodes: int, device: int, groups: Sequence[Sequence[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """``(local, peer)`` bool[N] masks of the nodes ``device`` reads from its own
    cache and from a peer's (O(N) bytes, one device at a time)."""
    local = np.zeros(num_nodes, dtype=bool)
    local[np.asarray(caches[device], dtype=np.int64)] = True
    peer = np.zeros(num_nodes, dtype=bool)
    for e in group_of(device, groups):
        if e != device:
            peer[np.asarray(caches[e], dtype=np.int64)] = True
    peer &= ~local
    return local, peer
