"""The partition buffer: ``c`` partitions of a partitioned store in memory, walked
through a sequence of buffer states (BETA, COMET, Alg. 7), the next state's
partitions and buckets read by a prefetch thread while the current one trains.

Reads are sequential (``PartitionedStore.partition_features`` / ``bucket``: one
``seek`` + ``fromfile`` each, which release the GIL while the disk works), so the
prefetch thread overlaps I/O with the training step in the main thread. The
buffer counts what it read: partitions (swaps after the first state), bytes, and
the seconds the consumer waited for a state that was not ready.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from gnncore.outofcore.store import PartitionedStore

Bucket = tuple[int, int]


@dataclass(frozen=True)
class BufferView:
    """One buffer state as training sees it.

    Attributes:
        index (int): Position of the state in the epoch.
        state (tuple[int, ...]): The partitions in memory.
        features (dict[int, np.ndarray]): Features of each partition in memory
            (rows ``offsets[p]:offsets[p+1]`` of the store's order).
        buckets (dict[Bucket, np.ndarray]): The edge buckets to train on in this
            state (int64 ``[E, 2]``: src, dst in the store's ids).
    """

    index: int
    state: tuple[int, ...]
    features: dict[int, np.ndarray]
    buckets: dict[Bucket, np.ndarray]


@dataclass
class BufferStats:
    """What an epoch through the buffer read and waited for."""

    partitions_read: int = 0
    swaps: int = 0
    buckets_read: int = 0
    bytes_read: int = 0
    load_seconds: float = 0.0
    wait_seconds: float = 0.0
    resident_max: int = 0
    per_state_wait: list[float] = field(default_factory=list)


@dataclass
class _Loaded:
    features: dict[int, np.ndarray]
    buckets: dict[Bucket, np.ndarray]
    seconds: float
    nbytes: int


class PartitionBuffer:
    """Walk ``states`` of a store with at most ``capacity`` partitions in memory.

    Args:
        store: The partitioned store.
        capacity: Partitions the buffer may hold (``c``).
        prefetch: Read the next state's new partitions and buckets in a
            background thread while the current state is in use.
        features: Load partition features (off for edge-only link training
            with learned embeddings).
    """

    def __init__(
        self,
        store: PartitionedStore,
        capacity: int,
        prefetch: bool = True,
        features: bool = True,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.store = store
        self.capacity = capacity
        self.prefetch = prefetch
        self.load_features = features and store.has("features")
        self.stats = BufferStats()

    def _load(self, parts: Sequence[int], buckets: Sequence[Bucket], resident: set[int]) -> _Loaded:
        started = time.perf_counter()
        feats = {}
        if self.load_features:
            feats = {p: self.store.partition_features(p) for p in parts if p not in resident}
        edges = {b: self.store.bucket(*b) for b in buckets}
        nbytes = sum(a.nbytes for a in feats.values()) + sum(a.nbytes for a in edges.values())
        return _Loaded(feats, edges, time.perf_counter() - started, nbytes)

    def epoch(
        self, states: Sequence[tuple[int, ...]], buckets: Sequence[Sequence[Bucket]] | None = None
    ) -> Iterator[BufferView]:
        """Yield one :class:`BufferView` per state (``buckets[k]``: the buckets
        trained in state ``k``; none when omitted). A state larger than the
        capacity is refused before anything is read."""
        for k, state in enumerate(states):
            if len(set(state)) > self.capacity:
                raise ValueError(
                    f"state {k} holds {len(set(state))} partitions; the buffer holds "
                    f"{self.capacity}"
                )
        plan = [list(b) for b in buckets] if buckets is not None else [[] for _ in states]
        self.stats = BufferStats()
        resident: dict[int, np.ndarray] = {}  # features of the partitions in memory
        in_memory: set[int] = set()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-buffer")
        try:
            pending: Future[_Loaded] | None = None
            if states:
                pending = pool.submit(self._load, states[0], plan[0], set())
            for k, state in enumerate(states):
                assert pending is not None
                waited = time.perf_counter()
                loaded = pending.result()
                wait = time.perf_counter() - waited
                members = set(state)
                incoming = members - in_memory
                if k > 0:
                    self.stats.swaps += len(incoming)
                # Evict (read-only data: nothing to write back), then admit.
                resident = {p: a for p, a in resident.items() if p in members}
                resident.update(loaded.features)
                in_memory = members
                self.stats.partitions_read += len(incoming)
                self.stats.buckets_read += len(loaded.buckets)
                self.stats.bytes_read += loaded.nbytes
                self.stats.load_seconds += loaded.seconds
                self.stats.wait_seconds += wait
                self.stats.per_state_wait.append(wait)
                self.stats.resident_max = max(self.stats.resident_max, len(in_memory))
                following = None
                if k + 1 < len(states):
                    following = (states[k + 1], plan[k + 1], set(states[k + 1]) & members)
                if following is not None and self.prefetch:
                    pending = pool.submit(self._load, *following)
                yield BufferView(k, tuple(state), dict(resident), loaded.buckets)
                if following is not None and not self.prefetch:
                    pending = pool.submit(self._load, *following)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
