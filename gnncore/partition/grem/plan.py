"""GREM's ``clusters`` seed: one global plan, made once per run.

The stream's prefix is clustered, the edges between clusters are counted over
the whole stream, and METIS splits the cluster graph into the ``p`` parts; each
bisection is then seeded from the plan (or by METIS on its chunk where the plan
is coarse or thin). See docs/ARCHITECTURE.md, "GREM's clusters seed".
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.heap import trim_heap
from gnncore.partition.edge_stream import EdgeFile, chunk_rows
from gnncore.partition.grem.chunk import (
    ChunkRows,
    chunk_components,
    chunk_nodes_local,
    metis_chunk,
    repair_capacity,
    rows_of,
)
from gnncore.partition.grem.plan_levels import (
    PLAN_SPLIT_MIN_EDGES,
    LowerLevels,
    metis_parts,
    split_plan,
)

MAX_CLUSTERS = 1 << 16
#: METIS refinement iterations when clustering the first chunk (``niter``; METIS's
#: default 10 costs ~3.5x the time for a ~2% smaller cut of the chunk).
CLUSTER_NITER = 1
#: Propagation rounds that label a plan-less chunk node by the majority side of its
#: labelled chunk neighbours.
MAJORITY_ROUNDS = 8
#: A bisection whose first chunk has at least this average degree is seeded by
#: METIS on that chunk (``metis``) when the plan is coarse (fewer than
#: :data:`PLAN_FINE_CLUSTERS` clusters planned into a side): the dense chunk
#: shows the sub-problem better than a few large clusters (FB15k-237 at 10%
#: chunks: 16 clusters per part). A fine plan (the 20M-edge graph's: thousands
#: of clusters per part) seeds it as well as METIS for a fraction of the time.
PLAN_MAX_DEGREE = 5.5
PLAN_FINE_CLUSTERS = 256
#: A bisection is seeded from the plan only when each side has at least this many
#: first-chunk nodes planned into its parts; else (a thin plan) by ``metis``.
PLAN_MIN_SUPPORT = 400
#: The plan clusters the stream's first ``min(chunk, max(PLAN_PREFIX · |E|,
#: PLAN_MIN_PREFIX))`` edges. The structure comes from the whole-stream count of
#: the edges between the clusters; a 1% prefix (mostly components of a few
#: nodes) plans the 20M-edge graph as well as its 10% first chunk (cut 18.79%
#: both) for 1/40 of the clustering time (METIS k-way on a 2M-edge chunk against
#: components of a 0.2M-edge one). Smaller graphs keep their first chunk up to
#: PLAN_MIN_PREFIX edges (a 1,000-edge prefix of a 100k-edge graph plans badly).
#: The prefix is not capped at scale: at a billion edges the 1% prefix (10M
#: edges, 3.7M clusters) costs 164 s of plan (METIS on the 10M-edge cluster graph
#: 93 s) but a 2^22-edge prefix (1.6M clusters, plan 72 s) ended at a 30.06% cut
#: against 25.40% (docs/BENCHMARKS.md, session 27).
PLAN_PREFIX = 0.01
PLAN_MIN_PREFIX = 1 << 17
#: The cluster graph keeps at most ``max(prefix_edges, PLAN_MIN_BUDGET)`` edges
#: (METIS needs ~190 bytes per edge): beyond, the largest clusters are dropped.
#: 2**18 (was 2**19 until issue 28, item 2): on the 20M-edge graph at p = 8 with
#: 1% chunks METIS took 97 MiB of the command's peak on 524,258 cluster-graph
#: edges; on 262,144 it takes half, and the cut is 18.758% against 18.761%.
PLAN_MIN_BUDGET = 1 << 18
#: The plan's METIS partitions only the core of the cluster graph: the clusters
#: joined to at least PLAN_MIN_DEGREE other kept clusters (:func:`core_clusters`,
#: peeled for at most PLAN_CORE_ROUNDS rounds), and keeps the best of PLAN_NCUTS
#: tries (METIS's ``ncuts``: the smallest cut). At 1% prefixes the cluster graph
#: is a sparse sample (most clusters are one prefix edge, ~2.7 cluster-graph
#: edges each); clusters with no edge or one say little about where their nodes
#: belong, yet METIS must place their weight, and its balanced bisections used
#: them as filler: on a 100M-edge planted graph (10M nodes, 16 communities,
#: p = 16, 1% chunks) a part of such clusters took a third of one community and
#: the rest of it went to two other parts, which GREM kept to the end (cut
#: 24.26% and 25.91% with seeds 0 and 2, then 5 and 8 final passes; KaMinPar
#: 20.04%). The 2-core alone kept every community whole with seeds 0-2 (20.04%,
#: one final pass) but not with seed 3 (25.96%); with the best of 4 tries, seeds
#: 0-4 all end at 20.04% (2 tries: seed 3 fails; the 3-core drops useful
#: clusters: 23.2-23.5%). The tries cost METIS time: the plan's METIS took 6-7 s
#: there against 2 s, of a 37-42 s run that took 43-47 s before (docs/BENCHMARKS.md,
#: "GREM's plan at scale").
PLAN_MIN_DEGREE = 2
PLAN_CORE_ROUNDS = 8
PLAN_NCUTS = 4
#: The core is planned only when it holds at least this share of the clustered
#: prefix nodes. A tree-like graph has little or no core (a forest has none):
#: its structure is in what the peeling drops, so its whole cluster graph is
#: planned (a random tree of 20k nodes, p = 4: cut 18.6% planned whole, 20.1%
#: from an empty core, that is, METIS on each chunk). The 100M-edge planted
#: graph's core holds 83% of its clusters (all of two nodes), the billion's 83%.
PLAN_MIN_CORE_SHARE = 0.5
#: Keys :func:`trim_cluster_graph` maps at a time.
TRIM_BLOCK = 1 << 18


def default_clusters(chunk_nodes: int, parts: int) -> int:
    """Clusters of the first chunk when ``clusters`` is not given:
    ``max(16 · p, min(256, chunk_nodes // 1000))``, at most the chunk's nodes
    (it sets the target cluster size ``chunk_nodes / clusters``; see
    :func:`cluster_chunk`)."""
    return max(1, min(chunk_nodes, max(16 * parts, min(256, chunk_nodes // 1000))))


@dataclass(frozen=True)
class ClusterPlan:
    """A planned part for every cluster of the stream's prefix (seed ``clusters``).

    Attributes:
        cluster (np.ndarray): ``int32[N]``: cluster of each node of the
            clustered prefix, -1 for the nodes outside it.
        part (np.ndarray): ``int64[k]``: planned part in ``[0, p)`` of each cluster.
        sizes (np.ndarray): ``int64[k]``: prefix nodes per cluster.
        support (np.ndarray): ``int64[p]``: prefix nodes planned per part.
        cluster_edges (int): Stream edges between two different clusters.
        internal_edges (int): Stream edges inside one cluster (of the prefix's, before
            the clusters outside the core are dropped).
        seconds (dict): ``cluster`` (components and METIS k-way on the prefix), ``stream``
            (the pass that counts the cluster graph's edges), ``plan`` (METIS on
            the cluster graph).
    """

    cluster: np.ndarray
    part: np.ndarray
    sizes: np.ndarray
    support: np.ndarray
    cluster_edges: int
    internal_edges: int
    seconds: dict[str, float]
    lower: LowerLevels | None = field(default=None, compare=False)
    """The plan's METIS below its top split, still running in the background
    (``part`` then holds only the top split's sides, ``0`` and ``⌊p/2⌋``):
    :meth:`completed` is the whole plan. ``None`` once complete."""

    def completed(self) -> ClusterPlan:
        """This plan with every cluster's part: waits for :attr:`lower` (its
        background process then shut down) and adds its ``seconds`` (``lower
        levels``, ``waited``); the plan itself when it is complete."""
        if self.lower is None:
            return self
        part, took = self.lower.collect(len(self.part))
        parts = len(self.support)
        support = np.bincount(part, weights=self.sizes, minlength=parts).astype(np.int64)
        seconds = {**self.seconds, **took}
        return dataclasses.replace(self, part=part, support=support, seconds=seconds, lower=None)

    @property
    def clusters(self) -> int:
        return len(self.part)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A memory-mapped ``cluster`` (a run's workers share the plan) pickles
        # as its file's path, mapped again where it is unpickled.
        if self.lower is not None:
            raise TypeError("a plan whose lower levels are pending is not sent to workers")
        values = tuple(getattr(self, f.name) for f in fields(self) if f.name != "lower")
        cluster = self.cluster
        if isinstance(cluster, np.memmap) and cluster.filename is not None:
            return _mapped_cluster_plan, (str(cluster.filename), values[1:])
        return ClusterPlan, values


def _mapped_cluster_plan(path: str, rest: tuple[Any, ...]) -> ClusterPlan:
    return ClusterPlan(np.load(path, mmap_mode="r"), *rest)


def cluster_chunk(local: np.ndarray, n: int, clusters: int, seed: int) -> np.ndarray:
    """Clusters of a chunk's ``n`` local nodes (``int64[n]`` ids from 0).

    The target size is ``ceil(n / clusters)``: a connected component of the
    chunk up to that size is one cluster (METIS k-way on a disconnected chunk
    would pack unrelated components into one cluster); a larger one is split by
    METIS k-way (``niter`` :data:`CLUSTER_NITER`) into ``ceil(size / target)``
    clusters.
    """
    import pymetis

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    target = max(1, -(-n // max(1, clusters)))
    if target == 1:
        return np.arange(n, dtype=np.int64)
    comp = chunk_components(local, n)
    sizes = np.bincount(comp)
    whole = sizes <= target
    next_id = int(np.count_nonzero(whole))
    cid = np.full(len(sizes), -1, dtype=np.int64)
    cid[whole] = np.arange(next_id)
    out = cid[comp]
    del cid
    big = np.flatnonzero(~whole)
    if not len(big):
        return out
    in_big = np.flatnonzero(~whole[comp])
    in_big = in_big[np.argsort(comp[in_big], kind="stable")]
    node_starts = np.searchsorted(comp[in_big], np.arange(len(sizes) + 1))
    big_edges = local[~whole[comp[local[:, 0]]]]
    big_edges = big_edges[np.argsort(comp[big_edges[:, 0]], kind="stable")]
    edge_starts = np.searchsorted(comp[big_edges[:, 0]], np.arange(len(sizes) + 1))
    pos = np.empty(n, dtype=np.int64)
    options = pymetis.Options()
    options.seed = seed
    options.niter = CLUSTER_NITER
    for c in big.tolist():
        members = in_big[node_starts[c] : node_starts[c + 1]]
        pos[members] = np.arange(len(members))
        part = metis_chunk(
            pos[big_edges[edge_starts[c] : edge_starts[c + 1]]],
            len(members),
            -(-len(members) // target),
            options,
            recursive=False,
            peel=False,
        )
        used, part = np.unique(part, return_inverse=True)  # drop empty clusters
        out[members] = next_id + part
        next_id += len(used)
    return out


def cluster_graph_edges(
    edges: EdgeFile, cluster: np.ndarray, k: int, chunk_edges: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """One streaming pass over ``edges``, ``chunk_edges`` rows at a time (C++):
    the edges of the cluster graph as keys ``a · k + b`` (``a < b``, increasing)
    with their counts (edges with both endpoints clustered, in different
    clusters), and the number of edges inside one cluster. Memory: the distinct
    keys plus a buffer of at most ``max(2**20, distinct keys)`` raw keys."""
    graph = _C.grem_cluster_edges(
        edges.spec(),
        np.ascontiguousarray(cluster, dtype=np.int32),
        int(k),
        chunk_rows=int(chunk_edges),
    )
    return np.asarray(graph.keys), np.asarray(graph.counts), graph.internal


def cluster_csr(
    keys: np.ndarray, counts: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cluster graph's symmetric weighted CSR ``(xadj, adjncy, weights)``
    (int64, METIS's ``idx_t``: no copy on the way in) from its pair keys
    ``a · k + b`` (``a < b``, increasing) and counts: a counting sort in C++
    (``_C.grem_coarse_csr``, 32 B per pair out, nothing else), each row's
    neighbours in increasing order. Counts are scaled to at most 2**30 first
    (METIS's ``idx_t`` may be 32-bit)."""
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) and counts.max() > 2**30:
        counts = np.maximum(1, counts * (2**30 / counts.max())).astype(np.int64)
    xadj, adjncy, weights = _C.grem_coarse_csr(
        np.ascontiguousarray(keys, dtype=np.int64), np.ascontiguousarray(counts), int(k)
    )
    return np.asarray(xadj), np.asarray(adjncy), np.asarray(weights)


def cluster_plan(
    edges: EdgeFile,
    num_nodes: int,
    parts: int,
    *,
    chunk_edges: int,
    clusters: int | None = None,
    seed: int = 0,
    imbalance: float = 0.03,
    prefix_edges: int | None = None,
    background: bool = False,
) -> ClusterPlan:
    """The global plan of seed method ``clusters``, made once per run.

    1. :func:`cluster_chunk` clusters the subgraph of the stream's first
       ``prefix_edges`` rows (default: ``min(chunk_edges, max(ceil(PLAN_PREFIX ·
       |E|), PLAN_MIN_PREFIX))``, see :data:`PLAN_PREFIX`; target size
       ``prefix nodes / clusters``;
       ``clusters`` defaults to :func:`default_clusters`).
    2. One streaming pass over ``edges``, ``chunk_edges`` rows at a time
       (:func:`cluster_graph_edges`), counts the edges between every two
       clusters (edges whose both endpoints are clustered).
    3. Beyond ``max(prefix_edges, PLAN_MIN_BUDGET)`` cluster-graph edges the
       largest clusters are dropped (:func:`trim_cluster_graph`), then the
       clusters outside the cluster graph's core (:func:`core_clusters`) when
       the core holds at least :data:`PLAN_MIN_CORE_SHARE` of the clustered
       nodes.
    4. METIS recursive bisection of that cluster graph into ``parts`` parts
       (vertex weights = cluster sizes, edge weights = counts) gives each
       cluster a planned part.

    With ``background``, a cluster graph of at least
    :data:`~gnncore.partition.grem.plan_levels.PLAN_SPLIT_MIN_EDGES` edges
    and ``parts >= 3`` is only split in two here: METIS below that split runs
    in a spawned process, and the plan returned holds the top split's sides
    (``lower`` pending: :meth:`ClusterPlan.completed` gives the whole plan;
    :mod:`~gnncore.partition.grem.plan_levels`).

    Memory: the ``int32[N]`` cluster array, one chunk and the cluster graph.
    """
    if prefix_edges is None:
        prefix_edges = min(chunk_edges, max(chunk_rows(PLAN_PREFIX, edges.rows), PLAN_MIN_PREFIX))
    if prefix_edges < 1:
        raise ValueError(f"prefix_edges must be >= 1, got {prefix_edges}")
    times = {}
    start = time.perf_counter()
    first = edges.read(0, prefix_edges)
    nodes, local = chunk_nodes_local(first, num_nodes)
    del first
    n = len(nodes)
    member = cluster_chunk(
        local, n, default_clusters(n, parts) if clusters is None else int(clusters), seed
    )
    del local
    k = int(member.max()) + 1 if n else 0
    sizes = np.bincount(member[member >= 0], minlength=k)
    cluster = np.full(num_nodes, -1, dtype=np.int32)
    cluster[nodes] = member
    del nodes, member
    trim_heap()  # METIS's and the prefix's freed blocks, before the counting pass
    times["cluster"] = time.perf_counter() - start
    start = time.perf_counter()
    keys, counts, internal = cluster_graph_edges(edges, cluster, k, chunk_edges)
    times["stream"] = time.perf_counter() - start
    start = time.perf_counter()
    budget = max(prefix_edges, PLAN_MIN_BUDGET)
    if len(keys) > budget:
        keys, counts, sizes, renumber = trim_cluster_graph(keys, counts, sizes, budget)
        _renumber_clusters(cluster, renumber)
    core = core_clusters(keys, counts, sizes) if len(keys) else None
    if core is not None and PLAN_MIN_CORE_SHARE * sizes.sum() <= core[2].sum():
        keys, counts, sizes, renumber = core
        _renumber_clusters(cluster, renumber)
    del core
    k = len(sizes)
    cluster_edges = int(counts.sum())
    csr = cluster_csr(keys, counts, k) if k > parts else None
    del keys, counts  # METIS gets the CSR alone
    trim_heap()
    lower = None
    if background and csr is not None and parts >= 3 and len(csr[1]) >= 2 * PLAN_SPLIT_MIN_EDGES:
        part, lower = split_plan(k, sizes, csr, parts, seed, imbalance, PLAN_NCUTS)
    else:
        part = metis_parts(k, sizes, csr, parts, seed, imbalance, PLAN_NCUTS)
    del csr
    trim_heap()
    times["plan"] = time.perf_counter() - start
    sizes = np.asarray(sizes, dtype=np.int64)
    support = np.bincount(part, weights=sizes, minlength=parts).astype(np.int64)
    return ClusterPlan(cluster, part, sizes, support, cluster_edges, internal, times, lower)


def _renumber_clusters(cluster: np.ndarray, renumber: np.ndarray) -> None:
    """Give every clustered node (``cluster >= 0``) its cluster's new id, in place
    (-1 for a dropped cluster)."""
    valid = cluster >= 0
    cluster[valid] = renumber[cluster[valid]]


def trim_cluster_graph(
    keys: np.ndarray, counts: np.ndarray, sizes: np.ndarray, budget: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Drop the largest clusters (ties: the higher id first) until at most
    ``budget`` cluster-graph edges remain (METIS's memory grows with them).

    On a sparse chunk the large clusters are the least pure (big tree-like
    components, whose chunk edges cross communities here and there) and hold
    the most cluster-graph edges; the many small components are mostly inside
    one community. (Measured on a planted 16-community graph with 1% chunks:
    dropping the largest first keeps 91% of each community's clustered nodes on
    one side of the plan's top split, dropping the smallest first 72-76%.)

    Returns the kept edges' keys (renumbered) and counts, the kept clusters'
    sizes and ``renumber`` (``int64[k]``: new id, -1 for a dropped cluster)."""
    k = len(sizes)
    rank = np.empty(k, dtype=np.int64)  # removal order
    rank[np.lexsort((-np.arange(k), -sizes))] = np.arange(k)
    # an edge goes with its first end; ranks in int32 (k < 2**31), a block at a time:
    # 4 B per key beside the keys, not five int64 temporaries of them
    gone = np.empty(len(keys), dtype=np.int32)
    for start in range(0, len(keys), TRIM_BLOCK):
        block = keys[start : start + TRIM_BLOCK]
        gone[start : start + len(block)] = np.minimum(rank[block // k], rank[block % k])
    left = len(keys) - np.cumsum(np.bincount(gone, minlength=k))
    drop = int(np.argmax(left <= budget)) + 1  # clusters dropped: ranks < drop
    keep = rank >= drop
    renumber = np.full(k, -1, dtype=np.int64)
    renumber[keep] = np.arange(int(keep.sum()))
    alive = gone >= drop
    del gone
    kept = keys[alive]
    a, b = renumber[kept // k], renumber[kept % k]
    del kept
    k2 = int(keep.sum())
    return np.minimum(a, b) * k2 + np.maximum(a, b), counts[alive], sizes[keep], renumber


def core_clusters(
    keys: np.ndarray,
    counts: np.ndarray,
    sizes: np.ndarray,
    min_degree: int | None = None,
    rounds: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Keep the clusters of the cluster graph's core: peel off, for at most
    ``rounds`` rounds (default :data:`PLAN_CORE_ROUNDS`), every cluster joined to
    fewer than ``min_degree`` other kept clusters (default
    :data:`PLAN_MIN_DEGREE`), and the edges that touch it.

    A cluster with no edge, or hanging off the graph by one, says little about
    where its nodes belong, yet METIS must place its weight, and a balanced
    bisection uses such clusters as filler (see :data:`PLAN_MIN_DEGREE`).
    Dropped, their nodes are seeded like nodes outside the prefix
    (:func:`plan_sides`: the majority of their labelled chunk neighbours).

    ``keys`` are the cluster graph's pair keys ``a · k + b`` (``a < b``,
    increasing; ``k = len(sizes)``) with their ``counts``. Returns the kept
    edges' keys renumbered (same order: the renumbering is monotone), their
    counts, the kept clusters' sizes and ``renumber`` (``int64[k]``: new id, -1
    for a dropped cluster). Scratch at the peak: about 15 bytes a key (the two
    ends in int32, the live flags and a round's temporaries) and 33 a cluster."""
    min_degree = PLAN_MIN_DEGREE if min_degree is None else min_degree
    rounds = PLAN_CORE_ROUNDS if rounds is None else rounds
    k = len(sizes)
    ids = np.int32 if k <= np.iinfo(np.int32).max else np.int64
    low, high = (keys // k).astype(ids), (keys % k).astype(ids)
    alive = np.ones(k, dtype=bool)
    live = np.ones(len(keys), dtype=bool)
    for _ in range(rounds):
        degree = np.bincount(low[live], minlength=k) + np.bincount(high[live], minlength=k)
        weak = alive & (degree < min_degree)
        del degree
        if not weak.any():
            break
        alive &= ~weak
        live &= alive[low] & alive[high]
    renumber = np.full(k, -1, dtype=np.int64)
    k2 = int(alive.sum())
    renumber[alive] = np.arange(k2)
    if k2 == k:
        return keys, counts, sizes, renumber
    kept = renumber[low[live]] * k2 + renumber[high[live]]
    return kept, counts[live], sizes[alive], renumber


def plan_applies(
    plan: ClusterPlan, pairs: np.ndarray, num_nodes: int, first_part: int, weights: tuple[int, int]
) -> bool:
    """Whether seed ``clusters`` takes a bisection's seed from the plan: its first
    chunk ``pairs`` (ids in ``[0, num_nodes)``) is sparse (average degree below
    :data:`PLAN_MAX_DEGREE`) or
    the plan is fine (each side has at least :data:`PLAN_FINE_CLUSTERS` clusters
    planned into its parts), and each side has at least :data:`PLAN_MIN_SUPPORT`
    prefix nodes planned into its parts. Otherwise the bisection is seeded by
    ``metis`` on its own chunk."""
    if len(pairs) == 0:
        return True
    middle = first_part + weights[0]
    per_part = np.bincount(plan.part, minlength=middle + weights[1])
    fine = (
        min(
            int(per_part[first_part:middle].sum()),
            int(per_part[middle : middle + weights[1]].sum()),
        )
        >= PLAN_FINE_CLUSTERS
    )
    if not fine:
        seen = np.zeros(num_nodes, dtype=bool)
        seen[pairs.reshape(-1)] = True
        if 2 * len(pairs) >= PLAN_MAX_DEGREE * np.count_nonzero(seen):
            return False
    low = int(plan.support[first_part:middle].sum())
    high = int(plan.support[middle : middle + weights[1]].sum())
    return min(low, high) >= PLAN_MIN_SUPPORT


def plan_sides(
    pairs: np.ndarray | ChunkRows,
    plan: ClusterPlan,
    num_nodes: int,
    first_part: int,
    weights: tuple[int, int],
    capacities: tuple[int, int],
    *,
    members: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Seed labels of a sub-problem's first chunk from the global plan.

    The sub-problem owns parts ``[first_part, first_part + w0 + w1)``: a chunk
    node whose cluster is planned in the lower ``w0`` of them gets side 0, in
    the upper ``w1`` side 1. The others (no cluster, or a cluster planned
    outside the range) take the majority side of their labelled chunk
    neighbours, repeated while that labels more nodes (at most
    :data:`MAJORITY_ROUNDS` rounds); those left (ties, no labelled neighbour)
    fill the side with more remaining capacity until both have the same room,
    then alternate. Then :func:`seed_sides`' capacity repair. Nodes come in
    increasing id order; sides are int8. ``pairs`` are in the sub-problem's
    ids (``[0, num_nodes)``); ``members`` maps them to the graph's, whose
    clusters the plan holds (``None``: the same ids).
    """
    nodes, local = chunk_nodes_local(rows_of(pairs), num_nodes)
    graph_ids = nodes if members is None else members[nodes]
    # each cluster's side in this sub-problem (-1: planned outside its parts); the
    # extra last entry is what a node in no cluster (cluster -1) picks up
    rel = plan.part - first_part
    cluster_side = np.full(plan.clusters + 1, -1, dtype=np.int8)
    cluster_side[:-1][(rel >= 0) & (rel < weights[0])] = 0
    cluster_side[:-1][(rel >= weights[0]) & (rel < weights[0] + weights[1])] = 1
    sides = cluster_side[plan.cluster[graph_ids]]  # int8: one byte a chunk node
    del rel, cluster_side, graph_ids

    _C.grem_majority_rounds(np.ascontiguousarray(local).reshape(-1), sides, MAJORITY_ROUNDS)
    rest = np.flatnonzero(sides < 0)
    if len(rest):
        room = [capacities[s] - int(np.count_nonzero(sides == s)) for s in (0, 1)]
        more = 0 if room[0] >= room[1] else 1
        lead = min(len(rest), abs(room[0] - room[1]))
        fill = np.full(len(rest), more, dtype=np.int8)
        fill[lead + 1 :: 2] = 1 - more
        sides[rest] = fill
        del rest, fill
    return nodes, repair_capacity(sides, local, capacities)


__all__ = [
    "ClusterPlan",
    "MAX_CLUSTERS",
    "cluster_chunk",
    "cluster_csr",
    "cluster_graph_edges",
    "cluster_plan",
    "default_clusters",
    "core_clusters",
    "plan_applies",
    "plan_sides",
    "trim_cluster_graph",
]
