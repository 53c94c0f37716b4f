"""Partition buffer orderings (MariusGNN thesis §5.2–5.3, ALGORITHMS.md §6).

A buffer holds ``c`` of the ``p`` node partitions in memory; an epoch is a
sequence of buffer *states*, each differing from the previous one by one swapped
partition (one partition read from disk). Edge bucket ``(i, j)`` (edges from
partition ``i`` to ``j``) can be trained on in any state holding both.

* **BETA** (Alg. 6, :func:`beta_states`) meets every pair of partitions with
  ``(p − c) + (x + 1)[(p − c) − x(c − 1)/2]`` swaps, ``x = ⌊(p − c)/(c − 1)⌋``
  (Eq. 5.2, :func:`beta_swap_count`), near the lower bound
  ``⌈(p(p − 1)/2 − c(c − 1)/2)/(c − 1)⌉`` (Eq. 5.1, :func:`swap_lower_bound`).
  Its buckets are trained in the first state that holds both ends
  (:func:`first_cover_buckets`).
* **COMET** (:func:`comet_epoch`) groups many small physical partitions at
  random into logical partitions every epoch, runs BETA over the logical ones,
  and gives every physical bucket to a uniformly random state that holds both
  its ends, so consecutive mini-batches are less correlated.
* **Node classification**: with the training nodes in the first ``k < c``
  partitions, one state per epoch holds them plus ``c − k`` random others (no
  swaps within the epoch, :func:`static_cache_states`); otherwise Alg. 7 swaps
  every remaining partition in once, at a random slot
  (:func:`node_classification_states`).

States are tuples of partition ids by buffer slot. Passing ``rng`` randomises an
ordering the ways the thesis allows (which partitions start, the on-disk order)
without changing its swap count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

State = tuple[int, ...]


def _check(p: int, c: int) -> None:
    if not 2 <= c <= p:
        raise ValueError(f"a buffer needs 2 <= c <= p partitions; got c={c}, p={p}")


def beta_swap_count(p: int, c: int) -> int:
    """BETA's swaps for ``p`` partitions and a buffer of ``c`` (Eq. 5.2)."""
    _check(p, c)
    x = (p - c) // (c - 1)
    twice = 2 * (p - c) + (x + 1) * (2 * (p - c) - x * (c - 1))
    return twice // 2


def swap_lower_bound(p: int, c: int) -> int:
    """The fewest swaps that can meet every pair of partitions (Eq. 5.1)."""
    _check(p, c)
    return math.ceil((p * (p - 1) // 2 - c * (c - 1) // 2) / (c - 1))


def beta_states(p: int, c: int, rng: np.random.Generator | None = None) -> list[State]:
    """BETA (Alg. 6): buffer states in which every pair of the ``p`` partitions
    meets, each one swap from the last. With ``rng`` the partition ids are
    permuted first (which start in memory, and the on-disk order)."""
    _check(p, c)
    label = np.arange(p) if rng is None else rng.permutation(p)
    memory = list(range(c))
    disk = list(range(c, p))
    states = [tuple(memory)]
    while disk:
        # Fix the first c - 1 slots; every partition on disk passes the last slot.
        for i in range(len(disk)):
            memory[-1], disk[i] = disk[i], memory[-1]
            states.append(tuple(memory))
        # The fixed partitions have met everyone: replace them from disk.
        taken = min(c - 1, len(disk))
        for i in range(taken):
            memory[i] = disk[i]
            states.append(tuple(memory))
        disk = disk[taken:]
    return [tuple(int(label[q]) for q in state) for state in states]


def swap_count(states: list[State]) -> int:
    """Partitions read after the first state: those entering the buffer, summed."""
    return sum(len(set(t) - set(s)) for s, t in zip(states, states[1:]))


def first_cover_buckets(states: list[State], p: int) -> list[list[tuple[int, int]]]:
    """For each state, the edge buckets ``(i, j)`` (both directions, and ``(i, i)``)
    trained there: those whose ends are together for the first time."""
    seen = np.zeros((p, p), dtype=bool)
    out = []
    for state in states:
        fresh = [(i, j) for i in state for j in state if not seen[i, j]]
        for i, j in fresh:
            seen[i, j] = True
        out.append(fresh)
    return out


@dataclass(frozen=True)
class BufferPlan:
    """One epoch of a partition buffer.

    Attributes:
        states (list[State]): Physical partitions in memory, per state.
        buckets (list[list[tuple[int, int]]]): Physical edge buckets trained in
            each state (every bucket exactly once per epoch).
        logical (list[list[int]] | None): COMET's grouping of physical
            partitions into logical ones (``None`` for plain BETA).
        swaps (int): Physical partitions read after the first state.
    """

    states: list[State]
    buckets: list[list[tuple[int, int]]]
    logical: list[list[int]] | None
    swaps: int


def comet_epoch(
    num_physical: int, num_logical: int, buffer_logical: int, rng: np.random.Generator
) -> BufferPlan:
    """COMET: physical partitions grouped at random into ``num_logical`` logical
    partitions (sizes differ by at most one), BETA over the logical ones with a
    buffer of ``buffer_logical``, and each physical bucket ``(i, j)`` given to a
    uniformly random state holding both ``i`` and ``j``."""
    if not 1 <= num_logical <= num_physical:
        raise ValueError(
            f"need 1 <= logical <= physical partitions; got {num_logical}, {num_physical}"
        )
    groups = [
        sorted(int(q) for q in g)
        for g in np.array_split(rng.permutation(num_physical), num_logical)
    ]
    logical_states = beta_states(num_logical, buffer_logical, rng)
    states = [tuple(q for part in state for q in groups[part]) for state in logical_states]
    group_of = np.empty(num_physical, dtype=np.int64)
    for g, members in enumerate(groups):
        group_of[members] = g
    holders: dict[tuple[int, int], list[int]] = {}
    for s, state in enumerate(logical_states):
        for a in state:
            for b in state:
                holders.setdefault((a, b), []).append(s)
    buckets: list[list[tuple[int, int]]] = [[] for _ in states]
    for i in range(num_physical):
        for j in range(num_physical):
            options = holders[(int(group_of[i]), int(group_of[j]))]
            buckets[options[int(rng.integers(len(options)))]].append((i, j))
    return BufferPlan(states, buckets, groups, swap_count(states))


def node_classification_states(p: int, c: int, rng: np.random.Generator) -> list[State]:
    """Alg. 7: a random initial buffer, then every partition not yet seen swapped
    in once, in random order, at a random slot (each partition read exactly once)."""
    _check(p, c)
    order = rng.permutation(p)
    memory = [int(q) for q in order[:c]]
    states = [tuple(memory)]
    for q in order[c:]:
        memory[int(rng.integers(c))] = int(q)
        states.append(tuple(memory))
    return states


def static_cache_states(k: int, p: int, c: int, rng: np.random.Generator) -> list[State]:
    """Static caching for node classification: the ``k`` partitions holding the
    training nodes stay in memory with ``c − k`` random others; one state, no
    swaps within the epoch. Needs ``k < c``."""
    _check(p, c)
    if not 1 <= k < c:
        raise ValueError(f"static caching needs 1 <= k < c; got k={k}, c={c}")
    others = rng.choice(np.arange(k, p), size=c - k, replace=False)
    return [tuple(range(k)) + tuple(int(q) for q in sorted(others))]


def comet_settings(
    node_bytes: int,
    edge_bytes: int,
    memory_bytes: int,
    block_bytes: int = 1 << 20,
    fixed_bytes: int = 0,
) -> tuple[int, int, int]:
    """COMET's auto-tuning (thesis §5.4): ``(p, c, l)`` physical partitions, the
    physical partitions the buffer holds and logical partitions, from the node
    data size ``NO``, the edge data size ``EO``, the memory and the disk block
    ``D``: ``p = min(NO/D, √(EO/D))``, the largest ``c ≤ p`` with
    ``c·NO/p + 2·c²·EO/p² + F < memory``, ``l = 2p/c``."""
    p = max(2, int(min(node_bytes / block_bytes, math.sqrt(edge_bytes / block_bytes))))
    partition, bucket = node_bytes / p, edge_bytes / (p * p)

    def fits(c: int) -> bool:
        return c * partition + 2 * c * c * bucket + fixed_bytes < memory_bytes

    if not fits(2):
        raise ValueError(
            f"{memory_bytes:,} bytes cannot hold 2 of {p} partitions "
            f"(needs at least {int(2 * partition + 8 * bucket + fixed_bytes) + 1:,})"
        )
    c = max(q for q in range(2, p + 1) if fits(q))
    return p, c, max(2, round(2 * p / c))
