"""GREM — Greedy plus Refinement for Edge-cut Minimization (ALGORITHMS.md §1).

The edge stream (``edges_shuffled.npy``) is read from disk in chunks of
``ceil(chunk · |E|)`` edges of the whole graph, never as a whole. Python drives
the recursive bisection; per bisection it reads the first chunk (C++), seeds its
nodes (``metis`` via pymetis on the chunk's subgraph, ``random``, ``ldg``, or
``clusters`` from a global plan made once, see :func:`cluster_plan`), then one
C++ call streams the remaining chunks (GREM pass), runs the
restreaming refinement passes and splits the edge file into one temporary file
per side for the next level. Temporary files live in a private directory that
is removed afterwards, also on error. Memory: O(|V|) arrays plus one chunk.

    from gnncore.partition.grem import GremPartitioner
    labels = GremPartitioner(chunk=0.1, passes=3).assign(graph, PartitionOptions(parts=8))
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.partition.base import PartitionOptions, Partitioner, peak_rss_bytes
from gnncore.partition.task_tree import check_workers, run_task_tree
from gnncore.store import GraphDir
from gnncore.typing import require_csrc

SEED_METHODS = ("metis", "random", "ldg", "clusters")
MAX_CLUSTERS = 1 << 16
#: METIS refinement iterations (``niter``) of the ``metis`` seed's bisection of a
#: first chunk with at least :data:`SEED_NITER_MIN_NODES` nodes. METIS's default
#: 10 costs 2.4x the time of 1 on the 20M-edge graph's 10% chunk (1.4M nodes,
#: tree-like: the FM passes dominate) for a chunk cut of 6.39% instead of 6.37%
#: (GREM passes 0 ends at 24.74% against 24.70%). Smaller chunks keep METIS's
#: default: they cost milliseconds, and on FB15k-237 (chunks of 2-10k nodes)
#: niter 1 moves the passes-0 1% row at p = 2 from .201 to .194 (reference .216).
SEED_NITER = 1
SEED_NITER_MIN_NODES = 1 << 16


def _seed_options(seed: int, imbalance: float, chunk_nodes: int) -> Any:
    """pymetis options of a seed bisection (``seed``, ``ufactor``, ``niter``)."""
    import pymetis

    options = pymetis.Options()
    options.seed = seed
    options.ufactor = int(round(imbalance * 1000))
    if chunk_nodes >= SEED_NITER_MIN_NODES:
        options.niter = SEED_NITER
    return options
#: Seed ``clusters``: METIS on a first chunk (the plan's clusters, the fallback
#: bisections) works on the chunk's graph with its hanging trees peeled (see
#: :func:`metis_chunk`). The ``metis`` seed (the thesis') never peels.
PEEL_TREES = True


@dataclass(frozen=True)
class EdgeFile:
    """Rows of ``(u, v)`` node-id pairs in a binary file.

    Attributes:
        path (str): The file.
        offset (int): Byte offset of row 0 (a ``.npy`` file's data offset, or 0).
        dtype (str): ``"int32"`` or ``"int64"`` (little-endian).
        rows (int): Number of rows.
    """

    path: str
    offset: int
    dtype: str
    rows: int

    @property
    def int64(self) -> bool:
        return self.dtype == "int64"

    @classmethod
    def from_npy(cls, path: str | os.PathLike[str]) -> EdgeFile:
        """Describe a C-ordered little-endian int32/int64 ``[E, 2]`` ``.npy`` file
        from its header (nothing else is read)."""
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = reader(fh, max_header_size=10_000)
            offset = fh.tell()
        if dtype.str not in ("<i4", "<i8"):
            raise ValueError(f"{path}: edge ids must be little-endian int32 or int64, "
                             f"not {dtype.str}")
        if len(shape) != 2 or shape[1] != 2 or (fortran and shape[0] > 1):
            raise ValueError(f"{path}: expected a C-ordered [E, 2] array, got shape {shape}"
                             + (" in Fortran order" if fortran else ""))
        return cls(str(path), int(offset), "int64" if dtype.str == "<i8" else "int32",
                   int(shape[0]))

    def read(self, begin: int, count: int) -> np.ndarray:
        """Rows ``[begin, begin + count)`` as ``int64[k, 2]`` (one chunk)."""
        from gnncore import _C

        flat = _C.grem_read_edges(self.path, self.offset, self.int64, self.rows, begin, count)
        return np.asarray(flat).reshape(-1, 2)


def default_seed_method(passes: int) -> str:
    """The seed used when none is given: ``"clusters"`` when restreaming passes
    follow (on the 20M-edge planted graph it cuts 18.8% against the ``metis``
    seed's 24.3% at 10% chunks, and within 0.4 points of it on FB15k-237; see
    docs/BENCHMARKS.md), ``"metis"`` (the thesis' seed) for ``passes == 0``."""
    return "clusters" if passes > 0 else "metis"


def chunk_rows(fraction: float, num_edges: int) -> int:
    """``ceil(fraction · |E|)`` edges (at least 1), robust to float round-off."""
    return max(1, math.ceil(round(fraction * num_edges, 6)))


def side_capacity(num_nodes: int, share: int, parts: int, imbalance: float) -> int:
    """``P = ceil(N · q/p · (1 + imbalance))`` for a side holding ``q`` of ``p`` parts."""
    return int(math.ceil((1 + imbalance) * num_nodes * share / parts - 1e-9))


def first_appearance(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in first-appearance order (row by row, ``u`` before
    ``v``) and the pairs renumbered to those local ids (C++, O(max id) scratch)."""
    from gnncore import _C

    flat = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1)
    num_nodes = int(flat.max()) + 1 if len(flat) else 0
    nodes, local, _, _ = _C.grem_chunk_local(flat, num_nodes, True, False)
    return np.asarray(nodes), np.asarray(local).reshape(-1, 2)


def chunk_csr(local_pairs: np.ndarray, num_local: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR (int64, rows sorted by neighbour id) of a chunk over its
    local ids (C++)."""
    from gnncore import _C

    flat = np.ascontiguousarray(local_pairs, dtype=np.int64).reshape(-1)
    indptr, indices = _C.grem_chunk_csr(flat, int(num_local))
    return np.asarray(indptr), np.asarray(indices)


def seed_sides(pairs: np.ndarray, method: str, weights: tuple[int, int],
               capacities: tuple[int, int], seed: int, imbalance: float,
               rng_key: tuple[int, ...], *, plan: ClusterPlan | None = None,
               num_nodes: int | None = None, first_part: int = 0,
               use_plan: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Seed labels of the first chunk's nodes (first-appearance order).

    ``metis``: pymetis bisection of the chunk's subgraph with target weights
    ``w0 : w1`` (``ufactor = 1000 · imbalance``, ``seed``, ``niter``
    :data:`SEED_NITER` on chunks of :data:`SEED_NITER_MIN_NODES` nodes or more);
    ``random``: a
    balanced random split in that ratio; ``ldg``: Linear Deterministic Greedy
    over the chunk's nodes in first-appearance order with capacities
    ``ceil(k · w_s / (w0 + w1) · (1 + imbalance))``. A side left with more than
    its capacity ``P`` (METIS can exceed its tolerance on small chunks) gives
    back its nodes with the fewest chunk neighbours on its own side minus the
    other side. ``clusters`` (nodes in increasing id order; ``num_nodes`` is
    needed): :func:`plan_sides` with the run's ``plan`` and the sub-problem's
    ``first_part``, or, with ``use_plan=False`` (see :func:`plan_applies`),
    the ``metis`` bisection of the chunk.
    """
    from gnncore import _C

    if method == "clusters":
        if num_nodes is None or (use_plan and plan is None):
            raise ValueError("seed method 'clusters' needs num_nodes and the run's plan")
        if use_plan:
            return plan_sides(pairs, plan, num_nodes, first_part, weights, capacities)
        return _metis_chunk_sides(pairs, num_nodes, weights, capacities, seed, imbalance)
    if method == "metis":  # renumbering and CSR in one C++ call
        flat = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1)
        nodes, local, indptr, indices = _C.grem_chunk_local(
            flat, int(flat.max()) + 1 if len(flat) else 0, True, True)
        nodes, local = np.asarray(nodes), np.asarray(local).reshape(-1, 2)
    else:
        nodes, local = first_appearance(pairs)
    k = len(nodes)
    if k == 0:
        return nodes, np.zeros(0, dtype=np.int64)
    total = weights[0] + weights[1]
    if method == "random":
        rng = np.random.default_rng([seed, *rng_key])
        n0 = int(round(k * weights[0] / total))
        sides = np.ones(k, dtype=np.int64)
        sides[rng.permutation(k)[:n0]] = 0
    else:
        if method == "ldg":
            indptr, indices = chunk_csr(local, k)
            caps = [max(1, math.ceil((1 + imbalance) * k * w / total - 1e-9)) for w in weights]
            sides = np.asarray(_C.ldg_bisect(indptr, indices, caps[0], caps[1], *weights))
        else:
            options = _seed_options(seed, imbalance, k)
            tpwgts = None if weights[0] == weights[1] else [w / total for w in weights]
            sides = metis_chunk(local, k, 2, options, recursive=True, tpwgts=tpwgts,
                                peel=False, csr=(np.asarray(indptr), np.asarray(indices)))
    return nodes, _repair_capacity(sides, local, capacities)


def _metis_chunk_sides(pairs: np.ndarray, num_nodes: int, weights: tuple[int, int],
                       capacities: tuple[int, int], seed: int,
                       imbalance: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``metis`` seed with the chunk's nodes in increasing id order
    (O(|V|) scratch instead of :func:`first_appearance`'s sort of the chunk)."""
    nodes, local = chunk_nodes_local(pairs, num_nodes)
    if len(nodes) == 0:
        return nodes, np.zeros(0, dtype=np.int64)
    options = _seed_options(seed, imbalance, len(nodes))
    total = weights[0] + weights[1]
    tpwgts = None if weights[0] == weights[1] else [w / total for w in weights]
    sides = metis_chunk(local, len(nodes), 2, options, recursive=True, tpwgts=tpwgts)
    return nodes, _repair_capacity(sides, local, capacities)


def _repair_capacity(sides: np.ndarray, local: np.ndarray,
                     capacities: tuple[int, int]) -> np.ndarray:
    for s in (0, 1):
        excess = int(np.count_nonzero(sides == s)) - capacities[s]
        if excess <= 0:
            continue
        same = sides[local[:, 0]] == sides[local[:, 1]]
        sign = np.where(same, 1.0, -1.0)
        # own-side minus other-side neighbours (exact in float64 below 2**53)
        score = (np.bincount(local[:, 0], weights=sign, minlength=len(sides))
                 + np.bincount(local[:, 1], weights=sign, minlength=len(sides))).astype(np.int64)
        mine = np.flatnonzero(sides == s)
        move = mine[np.argsort(score[mine], kind="stable")[:excess]]
        sides = sides.copy()
        sides[move] = 1 - s
    return sides


# Seed method "clusters": one global plan, made once ------------------------------------

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
PLAN_PREFIX = 0.01
PLAN_MIN_PREFIX = 1 << 17
#: The cluster graph keeps at most ``max(prefix_edges, PLAN_MIN_BUDGET)`` edges
#: (METIS needs ~200 bytes per edge): beyond, the largest clusters are dropped.
PLAN_MIN_BUDGET = 1 << 19


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
        internal_edges (int): Stream edges inside one cluster.
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

    @property
    def clusters(self) -> int:
        return len(self.part)


def chunk_nodes_local(pairs: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in increasing id order and the pairs renumbered to those
    local ids (``int64``), through one O(|V|) scratch array instead of a sort (C++)."""
    from gnncore import _C

    flat = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1)
    nodes, local, _, _ = _C.grem_chunk_local(flat, int(num_nodes), False, False)
    return np.asarray(nodes), np.asarray(local).reshape(-1, 2)


def chunk_components(local: np.ndarray, n: int) -> np.ndarray:
    """Connected component of each of the ``n`` local nodes of a chunk
    (vectorised hooking and pointer jumping), as ``int64[n]`` ids in
    ``[0, components)`` ordered by each component's smallest node."""
    parent = np.arange(n, dtype=np.int64)
    u, v = local[:, 0], local[:, 1]
    while True:
        pu, pv = parent[u], parent[v]
        differ = pu != pv
        if not differ.any():
            break
        np.minimum.at(parent, np.maximum(pu[differ], pv[differ]),
                      np.minimum(pu[differ], pv[differ]))
        while True:  # pointer jumping until every node points at its root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    roots = np.flatnonzero(parent == np.arange(n))
    ids = np.empty(n, dtype=np.int64)
    ids[roots] = np.arange(len(roots))
    return ids[parent]


def metis_chunk(local: np.ndarray, n: int, nparts: int, options: Any, *, recursive: bool,
                tpwgts: list[float] | None = None, peel: bool | None = None,
                csr: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """pymetis ``part_graph`` of a chunk's graph over its ``n`` local nodes
    (``int64[n]`` parts; at most one node per part when ``n <= nparts``).

    With ``peel`` (default :data:`PEEL_TREES`), the trees hanging off the
    chunk's graph are peeled first (:func:`tree_roots`): METIS partitions the
    nodes left, each weighted by the nodes of its tree, and every tree follows
    its root. A tree kept whole on its root's side cuts none of its edges, so
    the cut METIS can reach is unchanged while its input shrinks (the 20M-edge
    graph's 10% chunk: 1.42M nodes and 2.04M edges become 0.72M and 1.34M).
    Trees stay below the balance tolerance of one part (``ufactor``, default
    30, per mille of ``n / nparts``), so METIS can still balance the parts.
    ``csr``: the chunk's :func:`chunk_csr`, when already built.
    """
    import pymetis

    if n <= nparts:
        return np.arange(n, dtype=np.int64) * nparts // max(1, n)
    indptr, indices = chunk_csr(local, n) if csr is None else csr
    if PEEL_TREES if peel is None else peel:
        # no tree heavier than the balance tolerance of a part (METIS's default 3%)
        ufactor = options.ufactor if options.ufactor > 0 else 30
        root = tree_roots(indptr, indices, max(1, int(n * ufactor / 1000 / nparts)))
        core = np.flatnonzero(root == np.arange(n))
        if nparts < len(core) < n:
            pos = np.full(n, -1, dtype=np.int64)
            pos[core] = np.arange(len(core))
            kept = pos[local]
            kept = kept[(kept[:, 0] >= 0) & (kept[:, 1] >= 0)]
            indptr, indices = chunk_csr(kept, len(core))
            weight = np.bincount(root, minlength=n)[core]
            result = pymetis.part_graph(nparts, pymetis.CSRAdjacency(indptr, indices),
                                        vweights=weight, tpwgts=tpwgts, recursive=recursive,
                                        options=options)
            return np.asarray(result.vertex_part, dtype=np.int64)[pos[root]]
    result = pymetis.part_graph(nparts, pymetis.CSRAdjacency(indptr, indices), tpwgts=tpwgts,
                                recursive=recursive, options=options)
    return np.asarray(result.vertex_part, dtype=np.int64)


def tree_roots(indptr: np.ndarray, indices: np.ndarray,
               max_weight: int = 2**62) -> np.ndarray:
    """``int64[n]``: for each node of a symmetric CSR, itself if it stays after
    peeling degree-1 nodes until none is left (the 2-core, plus one node per
    tree component), else the node that stays whose hanging tree holds it (C++).
    A node is not peeled where its tree and its parent's would together hold
    more than ``max_weight`` nodes."""
    from gnncore import _C

    return np.asarray(_C.grem_tree_roots(np.ascontiguousarray(indptr, dtype=np.int64),
                                         np.ascontiguousarray(indices, dtype=np.int64),
                                         int(max_weight)))


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
        members = in_big[node_starts[c]:node_starts[c + 1]]
        pos[members] = np.arange(len(members))
        part = metis_chunk(pos[big_edges[edge_starts[c]:edge_starts[c + 1]]], len(members),
                           -(-len(members) // target), options, recursive=False, peel=False)
        used, part = np.unique(part, return_inverse=True)  # drop empty clusters
        out[members] = next_id + part
        next_id += len(used)
    return out


def cluster_graph_edges(edges: EdgeFile, cluster: np.ndarray, k: int,
                        chunk_edges: int) -> tuple[np.ndarray, np.ndarray, int]:
    """One streaming pass over ``edges``, ``chunk_edges`` rows at a time (C++):
    the edges of the cluster graph as keys ``a · k + b`` (``a < b``, increasing)
    with their counts (edges with both endpoints clustered, in different
    clusters), and the number of edges inside one cluster. Memory: the distinct
    keys plus a buffer of at most ``max(2**20, distinct keys)`` raw keys."""
    from gnncore import _C

    keys, counts, internal = _C.grem_cluster_edges(
        edges.path, edges.offset, edges.int64, edges.rows,
        np.ascontiguousarray(cluster, dtype=np.int32), int(k), int(chunk_edges))
    return np.asarray(keys), np.asarray(counts), int(internal)


def _plan_parts(k: int, sizes: np.ndarray, keys: np.ndarray, counts: np.ndarray, parts: int,
                seed: int, imbalance: float) -> np.ndarray:
    """A part per cluster: METIS recursive bisection of the cluster graph
    (vertex weights = cluster sizes, edge weights = edge counts)."""
    if k <= parts:  # tiny graphs: one cluster per part, spread over the range
        return np.arange(k, dtype=np.int64) * parts // max(k, 1)
    import pymetis

    a, b = keys // k, keys % k
    if len(counts) and counts.max() > 2**30:  # METIS's idx_t may be 32-bit
        counts = np.maximum(1, counts * (2**30 / counts.max())).astype(np.int64)
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    weight = np.concatenate([counts, counts])
    order = np.lexsort((dst, src))
    xadj = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=xadj[1:])
    options = pymetis.Options()
    options.seed = seed
    options.ufactor = int(round(imbalance * 1000))
    result = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj, dst[order]),
                                vweights=np.maximum(sizes, 1), eweights=weight[order],
                                recursive=True, options=options)
    return np.asarray(result.vertex_part, dtype=np.int64)


def cluster_plan(edges: EdgeFile, num_nodes: int, parts: int, *, chunk_edges: int,
                 clusters: int | None = None, seed: int = 0, imbalance: float = 0.03,
                 prefix_edges: int | None = None) -> ClusterPlan:
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
       largest clusters are dropped (:func:`trim_cluster_graph`).
    4. METIS recursive bisection of that cluster graph into ``parts`` parts
       (vertex weights = cluster sizes, edge weights = counts) gives each
       cluster a planned part.

    Memory: the ``int32[N]`` cluster array, one chunk and the cluster graph.
    """
    if prefix_edges is None:
        prefix_edges = min(chunk_edges,
                           max(chunk_rows(PLAN_PREFIX, edges.rows), PLAN_MIN_PREFIX))
    if prefix_edges < 1:
        raise ValueError(f"prefix_edges must be >= 1, got {prefix_edges}")
    times = {}
    start = time.perf_counter()
    first = edges.read(0, prefix_edges)
    nodes, local = chunk_nodes_local(first, num_nodes)
    del first
    n = len(nodes)
    member = cluster_chunk(local, n, default_clusters(n, parts) if clusters is None
                           else int(clusters), seed)
    del local
    k = int(member.max()) + 1 if n else 0
    sizes = np.bincount(member[member >= 0], minlength=k)
    cluster = np.full(num_nodes, -1, dtype=np.int32)
    cluster[nodes] = member
    del nodes, member
    times["cluster"] = time.perf_counter() - start
    start = time.perf_counter()
    keys, counts, internal = cluster_graph_edges(edges, cluster, k, chunk_edges)
    times["stream"] = time.perf_counter() - start
    start = time.perf_counter()
    budget = max(prefix_edges, PLAN_MIN_BUDGET)
    if len(keys) > budget:
        keys, counts, sizes, renumber = trim_cluster_graph(keys, counts, sizes, budget)
        valid = cluster >= 0
        cluster[valid] = renumber[cluster[valid]]
        k = len(sizes)
    part = _plan_parts(k, sizes, keys, counts, parts, seed, imbalance)
    times["plan"] = time.perf_counter() - start
    sizes = np.asarray(sizes, dtype=np.int64)
    support = np.bincount(part, weights=sizes, minlength=parts).astype(np.int64)
    return ClusterPlan(cluster, part, sizes, support, int(counts.sum()), internal, times)


def trim_cluster_graph(keys: np.ndarray, counts: np.ndarray, sizes: np.ndarray,
                       budget: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    gone = np.minimum(rank[keys // k], rank[keys % k])  # an edge goes with its first end
    left = len(keys) - np.cumsum(np.bincount(gone, minlength=k))
    drop = int(np.argmax(left <= budget)) + 1  # clusters dropped: ranks < drop
    keep = rank >= drop
    renumber = np.full(k, -1, dtype=np.int64)
    renumber[keep] = np.arange(int(keep.sum()))
    alive = gone >= drop
    a, b = renumber[keys[alive] // k], renumber[keys[alive] % k]
    k2 = int(keep.sum())
    return np.minimum(a, b) * k2 + np.maximum(a, b), counts[alive], sizes[keep], renumber


def plan_applies(plan: ClusterPlan, pairs: np.ndarray, num_nodes: int, first_part: int,
                 weights: tuple[int, int]) -> bool:
    """Whether seed ``clusters`` takes a bisection's seed from the plan: its first
    chunk ``pairs`` is sparse (average degree below :data:`PLAN_MAX_DEGREE`) or
    the plan is fine (each side has at least :data:`PLAN_FINE_CLUSTERS` clusters
    planned into its parts), and each side has at least :data:`PLAN_MIN_SUPPORT`
    prefix nodes planned into its parts. Otherwise the bisection is seeded by
    ``metis`` on its own chunk."""
    if len(pairs) == 0:
        return True
    middle = first_part + weights[0]
    per_part = np.bincount(plan.part, minlength=middle + weights[1])
    fine = min(int(per_part[first_part:middle].sum()),
               int(per_part[middle:middle + weights[1]].sum())) >= PLAN_FINE_CLUSTERS
    if not fine:
        seen = np.zeros(num_nodes, dtype=bool)
        seen[pairs.reshape(-1)] = True
        if 2 * len(pairs) >= PLAN_MAX_DEGREE * np.count_nonzero(seen):
            return False
    low = int(plan.support[first_part:middle].sum())
    high = int(plan.support[middle:middle + weights[1]].sum())
    return min(low, high) >= PLAN_MIN_SUPPORT


def plan_sides(pairs: np.ndarray, plan: ClusterPlan, num_nodes: int, first_part: int,
               weights: tuple[int, int],
               capacities: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Seed labels of a sub-problem's first chunk from the global plan.

    The sub-problem owns parts ``[first_part, first_part + w0 + w1)``: a chunk
    node whose cluster is planned in the lower ``w0`` of them gets side 0, in
    the upper ``w1`` side 1. The others (no cluster, or a cluster planned
    outside the range) take the majority side of their labelled chunk
    neighbours, repeated while that labels more nodes (at most
    :data:`MAJORITY_ROUNDS` rounds); those left (ties, no labelled neighbour)
    fill the side with more remaining capacity until both have the same room,
    then alternate. Then :func:`seed_sides`' capacity repair. Nodes come in
    increasing id order.
    """
    nodes, local = chunk_nodes_local(pairs, num_nodes)
    n = len(nodes)
    c = plan.cluster[nodes]
    planned = np.where(c >= 0, plan.part[np.maximum(c, 0)] if plan.clusters else -1, -1)
    rel = planned - first_part
    sides = np.full(n, -1, dtype=np.int64)
    sides[(rel >= 0) & (rel < weights[0])] = 0
    sides[(rel >= weights[0]) & (rel < weights[0] + weights[1])] = 1
    from gnncore import _C

    _C.grem_majority_rounds(np.ascontiguousarray(local).reshape(-1), sides, MAJORITY_ROUNDS)
    rest = np.flatnonzero(sides < 0)
    if len(rest):
        room = [capacities[s] - int(np.count_nonzero(sides == s)) for s in (0, 1)]
        more = 0 if room[0] >= room[1] else 1
        lead = min(len(rest), abs(room[0] - room[1]))
        fill = np.full(len(rest), more, dtype=np.int64)
        fill[lead + 1::2] = 1 - more
        sides[rest] = fill
    return nodes, _repair_capacity(sides, local, capacities)


def grem_bisect(
    edges: EdgeFile,
    num_nodes: int,
    members: np.ndarray,
    *,
    chunk_edges: int,
    seed_nodes: np.ndarray,
    seed_labels: np.ndarray,
    capacities: tuple[int, int],
    weights: tuple[int, int] = (1, 1),
    refine: bool = True,
    passes: int = 0,
    out_paths: tuple[str, str] = ("", ""),
) -> dict[str, Any]:
    """One GREM bisection of a sub-problem over the edge file ``edges`` (C++).

    The low-level step :func:`grem_partition_file` repeats: ``seed_nodes`` /
    ``seed_labels`` must label exactly the nodes of the first ``chunk_edges``
    rows; see ``gnncore._C.grem_bisect`` for the returned dict (``side`` is
    aligned with ``members``).
    """
    require_csrc()
    from gnncore import _C

    return _C.grem_bisect(
        edges.path, edges.offset, edges.int64, edges.rows, num_nodes,
        np.ascontiguousarray(members, dtype=np.int64),
        np.ascontiguousarray(seed_nodes, dtype=np.int64),
        np.ascontiguousarray(seed_labels, dtype=np.int64),
        chunk_edges, capacities[0], capacities[1], weights[0], weights[1], refine, passes,
        str(out_paths[0]), str(out_paths[1]))


@dataclass
class BisectionRecord:
    """What one bisection did (kept in :attr:`GremPartitioner.last_stats`)."""

    first_part: int
    parts: int
    nodes: int
    edges: int
    chunks: int
    first_chunk_nodes: int
    isolated: int
    reassigned: int
    moves: list[int]
    sizes: tuple[int, int]
    capacities: tuple[int, int]
    seconds: float
    seed: str = ""
    #: wall time of each phase: ``seed`` (read the first chunk and label it),
    #: ``grem`` (the streaming pass), ``passes`` (one per restreaming pass run)
    #: and ``split`` (the per-side edge files)
    phase_seconds: dict[str, Any] = field(default_factory=dict)
    #: the process that ran it and that process's peak RSS when it ended
    pid: int = 0
    process_peak_rss_bytes: int = 0


@dataclass(frozen=True)
class _Recursion:
    """What every bisection of one :func:`grem_partition_file` run shares."""

    num_nodes: int
    parts: int
    chunk_edges: int
    passes: int
    seed_method: str
    refine: bool
    seed: int
    imbalance: float
    plan: ClusterPlan | None
    work: str


@dataclass(frozen=True)
class _SubProblem:
    """One bisection to run: the nodes ``members`` of parts ``[lo, lo + q)``,
    whose edges are ``source`` (a temporary file of the run when ``owned``)."""

    source: EdgeFile
    lo: int
    q: int
    owned: bool
    members: np.ndarray


@dataclass(frozen=True)
class _Bisected:
    """A bisection's outcome: ``side[i]`` of ``members[i]``, the per-side edge
    files (``None`` for a side of one part) and its record."""

    side: np.ndarray
    children: tuple[EdgeFile | None, EdgeFile | None]
    record: BisectionRecord


def _bisect(run: _Recursion, sub: _SubProblem) -> _Bisected:
    """Seed and stream one sub-problem (in this process or a worker)."""
    start = time.perf_counter()
    lo, q, members = sub.lo, sub.q, sub.members
    q0, q1 = q // 2, q - q // 2
    # P from the global target; on tiny graphs also leave the other side one
    # node per part so that no part ends up empty.
    caps = (min(side_capacity(run.num_nodes, q0, run.parts, run.imbalance), len(members) - q1),
            min(side_capacity(run.num_nodes, q1, run.parts, run.imbalance), len(members) - q0))
    first = sub.source.read(0, run.chunk_edges)
    plan = run.plan
    use_plan = plan is not None and plan_applies(plan, first, run.num_nodes, lo, (q0, q1))
    method = run.seed_method if use_plan or plan is None else "clusters:metis"
    seed_nodes, seed_labels = seed_sides(first, run.seed_method, (q0, q1), caps, run.seed,
                                         run.imbalance, (lo, q), plan=plan,
                                         num_nodes=run.num_nodes, first_part=lo,
                                         use_plan=use_plan)
    del first
    seeded = time.perf_counter() - start
    outs = [str(Path(run.work) / f"p{first_part}-q{share}.bin") if share > 1 else ""
            for share, first_part in ((q0, lo), (q1, lo + q0))]
    result = grem_bisect(sub.source, run.num_nodes, members, chunk_edges=run.chunk_edges,
                         seed_nodes=seed_nodes, seed_labels=seed_labels, capacities=caps,
                         weights=(q0, q1), refine=run.refine, passes=run.passes,
                         out_paths=(outs[0], outs[1]))
    if sub.owned:
        os.remove(sub.source.path)
    side = np.asarray(result["side"]).astype(np.bool_)
    children = tuple(EdgeFile(outs[s], 0, sub.source.dtype, int(result["rows_written"][s]))
                     if outs[s] else None for s in (0, 1))
    record = BisectionRecord(
        lo, q, len(members), sub.source.rows, int(result["num_chunks"]),
        int(result["first_chunk_nodes"]), int(result["isolated"]),
        int(result["reassigned"]), list(result["moves"]), tuple(result["sizes"]), caps,
        time.perf_counter() - start, method, {"seed": seeded, **result["seconds"]},
        pid=os.getpid(), process_peak_rss_bytes=peak_rss_bytes())
    return _Bisected(side, children, record)  # type: ignore[arg-type]


def grem_partition_file(
    edges: EdgeFile,
    num_nodes: int,
    parts: int,
    *,
    chunk_edges: int,
    passes: int = 3,
    seed_method: str = "metis",
    refine: bool = True,
    seed: int = 0,
    imbalance: float = 0.03,
    tmp_dir: str | os.PathLike[str] | None = None,
    records: list[BisectionRecord] | None = None,
    clusters: int | None = None,
    plan: ClusterPlan | None = None,
    workers: int = 1,
) -> np.ndarray:
    """GREM recursive bisection of the graph whose edge stream is ``edges``.

    Args:
        edges (EdgeFile): Distinct undirected pairs in stream order (no self-loops).
        num_nodes (int): ``N``; ids are in ``[0, N)``. Nodes in no edge go to the
            smaller side of each bisection.
        parts (int): ``p >= 1``; sides get ``⌊q/2⌋`` and ``⌈q/2⌉`` of a
            sub-problem's ``q`` parts.
        chunk_edges (int): Edges per chunk, the same at every level.
        passes (int): Restreaming refinement passes per bisection (0: the thesis' GREM).
        seed_method (str): ``"metis"``, ``"random"``, ``"ldg"`` or ``"clusters"``.
        refine (bool): GREM's averaging refinement (``False``: streaming greedy).
        seed (int): Seed of METIS and of the random seed labels.
        imbalance (float): A side holding ``q`` of ``p`` parts takes at most
            ``ceil(N · q/p · (1 + imbalance))`` nodes (and, on tiny graphs, at
            most the sub-problem's nodes minus one per part of the other side,
            so no part is empty).
        tmp_dir: Where the private directory of per-side edge files is made
            (default: the system's temporary directory).
        records (list, optional): Receives one :class:`BisectionRecord` per
            bisection, in depth-first order (lower parts first).
        clusters (int, optional): Seed ``clusters``: target cluster size
            ``prefix nodes / clusters`` (default: :func:`default_clusters`).
        plan (ClusterPlan, optional): Seed ``clusters``: a plan made by
            :func:`cluster_plan` for this stream and ``parts`` (default: made here).
        workers (int): Bisections run at once (default: 1). Sibling
            bisections are independent: with ``workers > 1`` up to
            ``workers - 1`` spawned processes run them next to this one (see
            :func:`~gnncore.partition.task_tree.run_task_tree`). The labels are
            the same for any ``workers``; time drops and memory grows (each
            worker holds its own O(|V|) arrays and chunk).

    Returns:
        ``int64[num_nodes]`` part labels in ``[0, parts)``.
    """
    require_csrc()
    _check_run_args(num_nodes, parts, chunk_edges, passes, seed_method, imbalance)
    _check_clusters(clusters, seed_method)
    check_workers(workers)
    label = np.zeros(num_nodes, dtype=np.int64)
    if parts == 1:
        return label
    if seed_method == "clusters" and plan is None:
        plan = cluster_plan(edges, num_nodes, parts, chunk_edges=chunk_edges,
                            clusters=clusters, seed=seed, imbalance=imbalance)
    done: list[BisectionRecord] = []

    def expand(sub: _SubProblem, out: _Bisected) -> list[_SubProblem]:
        q0 = sub.q // 2
        label[sub.members[out.side]] = sub.lo + q0
        done.append(out.record)
        return [_SubProblem(child, first_part, share, True, sub.members[out.side == bool(s)])
                for s, (child, first_part, share)
                in enumerate(zip(out.children, (sub.lo, sub.lo + q0), (q0, sub.q - q0)))
                if child is not None]

    work = Path(tempfile.mkdtemp(prefix="grem-", dir=tmp_dir))
    try:
        shared = _Recursion(num_nodes, parts, chunk_edges, passes, seed_method, refine, seed,
                            imbalance, plan, str(work))
        root = _SubProblem(edges, 0, parts, False, np.arange(num_nodes, dtype=np.int64))
        # siblings run at once at most parts // 2 at a time (the last level)
        run_task_tree([root], _bisect, expand, shared, workers=min(workers, parts // 2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if records is not None:
        records.extend(sorted(done, key=lambda r: (r.first_part, -r.parts)))
    return label


def helper_peak_rss(records: list[BisectionRecord]) -> int:
    """Summed peak RSS of the processes other than this one that ran ``records``
    (each worker's largest recorded peak)."""
    peaks: dict[int, int] = {}
    for record in records:
        if record.pid != os.getpid():
            peaks[record.pid] = max(peaks.get(record.pid, 0), record.process_peak_rss_bytes)
    return sum(peaks.values())


def _check_run_args(num_nodes: int, parts: int, chunk_edges: int, passes: int,
                    seed_method: str, imbalance: float) -> None:
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    if not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if parts > max(num_nodes, 1):
        raise ValueError(f"cannot split {num_nodes} nodes into {parts} parts")
    if not isinstance(chunk_edges, (int, np.integer)) or chunk_edges < 1:
        raise ValueError(f"chunk_edges must be an integer >= 1, got {chunk_edges!r}")
    _check_method_args(passes, seed_method)
    if not 0 <= imbalance < 1:
        raise ValueError(f"imbalance must be in [0, 1), got {imbalance}")


def _check_clusters(clusters: Any, seed_method: Any) -> None:
    if clusters is None:
        return
    if isinstance(clusters, bool) or not isinstance(clusters, (int, np.integer)) \
            or not 2 <= clusters <= MAX_CLUSTERS:
        raise ValueError(f"clusters must be None or an integer in [2, {MAX_CLUSTERS}], "
                         f"got {clusters!r}")
    if seed_method != "clusters":
        raise ValueError(f"clusters applies to seed_method 'clusters' only, not "
                         f"{seed_method!r}")


def _check_method_args(passes: Any, seed_method: Any) -> None:
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 0:
        raise ValueError(f"passes must be an integer >= 0, got {passes!r}")
    if seed_method not in SEED_METHODS:
        raise ValueError(f"seed_method must be one of {', '.join(SEED_METHODS)}, "
                         f"got {seed_method!r}")


class GremPartitioner(Partitioner):
    """GREM over the graph's shuffled edge stream (``edges_shuffled.npy``).

    Args:
        chunk (float): Chunk size as a fraction of the whole graph's undirected
            edges, in ``(0, 1]`` (default: 0.1); fixed across recursion levels.
        passes (int): Restreaming refinement passes per bisection (default: 3;
            0 is the thesis' GREM).
        seed_method (str, optional): Seed of the first chunk (default:
            :func:`default_seed_method`: ``"clusters"`` with passes,
            ``"metis"`` without): ``"metis"``, ``"random"``, ``"ldg"`` or
            ``"clusters"``: one global plan, made
            once (clusters of the stream's first ``min(chunk, max(1%, 2**17))`` edges,
            the cluster graph counted in one streaming pass and split into
            ``p`` parts by METIS;
            see :func:`cluster_plan`), seeds every bisection whose first chunk
            is sparse; a dense or thinly planned one is seeded by ``metis``
            (see :func:`plan_applies`). Memory stays O(|V|) plus one chunk
            (and a cluster graph of at most ``max(prefix, 2**19)`` edges).
        refine (bool): Averaging refinement of earlier labels (default: True;
            False is streaming greedy).
        tmp_dir (str, optional): Parent of the temporary per-side edge files
            (default: the system's temporary directory).
        clusters (int, optional): Seed ``clusters`` only, in ``[2, 65536]``:
            sets the target cluster size ``prefix nodes / clusters``
            (default: :func:`default_clusters`; see :func:`cluster_chunk`).
        workers (int): Bisections run at once, in this process and
            ``workers - 1`` spawned ones (default: 1). Same labels for any
            value; less time, more memory (see :func:`grem_partition_file`).

    After :meth:`assign`, :attr:`last_stats` lists one
    :class:`BisectionRecord` per bisection, :attr:`last_plan` holds the
    :class:`ClusterPlan` of seed ``clusters`` (else ``None``) and
    :attr:`helper_peak_rss_bytes` the summed peak RSS of the worker processes.
    """

    name = "grem"

    def __init__(self, chunk: float = 0.1, passes: int = 3, seed_method: str | None = None,
                 refine: bool = True, tmp_dir: str | os.PathLike[str] | None = None,
                 clusters: int | None = None, workers: int = 1) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, (int, float)) \
                or not 0 < chunk <= 1:
            raise ValueError(f"chunk must be a fraction of the edges in (0, 1], got {chunk!r}")
        _check_method_args(passes, "metis" if seed_method is None else seed_method)
        if seed_method is None:
            seed_method = default_seed_method(int(passes))
        _check_clusters(clusters, seed_method)
        if not isinstance(refine, bool):
            raise ValueError(f"refine must be True or False, got {refine!r}")
        self.chunk = float(chunk)
        self.passes = int(passes)
        self.seed_method = seed_method
        self.refine = refine
        self.tmp_dir = tmp_dir
        self.clusters = None if clusters is None else int(clusters)
        self.workers = check_workers(workers)
        self.last_stats: list[BisectionRecord] = []
        self.last_plan: ClusterPlan | None = None

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        edges = EdgeFile.from_npy(graph.path / "edges_shuffled.npy")
        expected = graph.manifest.num_undirected_edges
        if edges.rows != expected:
            raise ValueError(f"{edges.path} holds {edges.rows} rows, the manifest counts "
                             f"{expected} undirected edges")
        self.last_stats = []
        self.last_plan = None
        self.helper_peak_rss_bytes = 0
        chunk_edges = chunk_rows(self.chunk, edges.rows)
        if self.seed_method == "clusters" and options.parts > 1:
            self.last_plan = cluster_plan(edges, graph.num_nodes, options.parts,
                                          chunk_edges=chunk_edges, clusters=self.clusters,
                                          seed=options.seed, imbalance=options.imbalance)
        labels = grem_partition_file(
            edges, graph.num_nodes, options.parts, chunk_edges=chunk_edges,
            passes=self.passes, seed_method=self.seed_method, refine=self.refine,
            seed=options.seed, imbalance=options.imbalance, tmp_dir=self.tmp_dir,
            records=self.last_stats, clusters=self.clusters, plan=self.last_plan,
            workers=self.workers)
        self.helper_peak_rss_bytes = helper_peak_rss(self.last_stats)
        return labels

    def __repr__(self) -> str:
        extra = "" if self.clusters is None else f", clusters={self.clusters}"
        extra += "" if self.workers == 1 else f", workers={self.workers}"
        return (f"{type(self).__name__}(chunk={self.chunk}, passes={self.passes}, "
                f"seed_method={self.seed_method!r}, refine={self.refine}{extra})")


class GreedyPartitioner(GremPartitioner):
    """The paper's streaming greedy baseline: GREM without refinement
    (a node keeps its first label) and no restreaming passes."""

    name = "greedy"

    def __init__(self, chunk: float = 0.1, seed_method: str = "metis",
                 tmp_dir: str | os.PathLike[str] | None = None, workers: int = 1) -> None:
        super().__init__(chunk=chunk, passes=0, seed_method=seed_method, refine=False,
                         tmp_dir=tmp_dir, workers=workers)

    def __repr__(self) -> str:
        return f"GreedyPartitioner(chunk={self.chunk}, seed_method={self.seed_method!r})"


def greedy_partitioner(chunk: float = 0.1) -> GreedyPartitioner:
    """Streaming greedy (``refine=False``, ``passes=0``) with ``chunk`` fraction chunks."""
    return GreedyPartitioner(chunk=chunk)


__all__ = [
    "BisectionRecord",
    "ClusterPlan",
    "EdgeFile",
    "GreedyPartitioner",
    "GremPartitioner",
    "SEED_METHODS",
    "chunk_components",
    "chunk_rows",
    "cluster_chunk",
    "default_seed_method",
    "cluster_graph_edges",
    "cluster_plan",
    "default_clusters",
    "greedy_partitioner",
    "grem_bisect",
    "grem_partition_file",
    "helper_peak_rss",
    "plan_applies",
    "plan_sides",
    "seed_sides",
    "side_capacity",
    "tree_roots",
    "trim_cluster_graph",
]
