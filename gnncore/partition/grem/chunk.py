"""One chunk of GREM's edge stream as a small graph (C++ where it is hot):
renumbering to local ids, symmetric CSR, connected components, METIS with the
hanging trees peeled, and the capacity repair of a chunk's two sides."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnncore import _C

#: Seed ``clusters``: METIS on a first chunk (the plan's clusters, the fallback
#: bisections) works on the chunk's graph with its hanging trees peeled (see
#: :func:`metis_chunk`). The ``metis`` seed (the thesis') never peels.
PEEL_TREES = True


def flat_ids(pairs: np.ndarray) -> np.ndarray:
    """``pairs`` as one flat C-contiguous id array for the C++ core: int32 stays
    int32 (no widened copy of a chunk), anything else becomes int64."""
    dtype = np.int32 if pairs.dtype == np.int32 else np.int64
    return np.ascontiguousarray(pairs, dtype=dtype).reshape(-1)


def first_appearance(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in first-appearance order (row by row, ``u`` before
    ``v``) and the pairs renumbered to those local ids (C++, O(max id) scratch),
    both in the width of ``pairs`` (int32 stays int32, else int64)."""
    flat = flat_ids(pairs)
    num_nodes = int(flat.max()) + 1 if len(flat) else 0
    chunk = _C.grem_chunk_local(flat, num_nodes, first_appearance=True, csr=False)
    return np.asarray(chunk.nodes), np.asarray(chunk.local).reshape(-1, 2)


def chunk_csr(local_pairs: np.ndarray, num_local: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR (int64, rows sorted by neighbour id) of a chunk over its
    local ids (int32 or int64 pairs; C++)."""
    flat = flat_ids(local_pairs)
    indptr, indices = _C.grem_chunk_csr(flat, int(num_local))
    return np.asarray(indptr), np.asarray(indices)


def repair_capacity(
    sides: np.ndarray, local: np.ndarray, capacities: tuple[int, int]
) -> np.ndarray:
    """``sides`` (0/1 per local node) with each side over its capacity giving back
    its nodes with the fewest chunk neighbours on its own side minus the other
    side (ties: the lower local id first). ``local``: the chunk's ``[m, 2]``
    local pairs; the scores are counted in C++ (:func:`side_scores`), no
    per-edge array is made."""
    for s in (0, 1):
        excess = int(np.count_nonzero(sides == s)) - capacities[s]
        if excess <= 0:
            continue
        score = side_scores(local, sides)
        mine = np.flatnonzero(sides == s)
        move = mine[np.argsort(score[mine], kind="stable")[:excess]]
        sides = sides.copy()
        sides[move] = 1 - s
    return sides


def side_scores(local: np.ndarray, sides: np.ndarray) -> np.ndarray:
    """``int64[n]``: each local node's chunk neighbours on its own side minus
    those on the other side (``sides``: 0/1 per node; C++)."""
    return np.asarray(
        _C.grem_side_scores(flat_ids(local), np.ascontiguousarray(sides, dtype=np.int8))
    )


class ChunkRows:
    """The rows of a bisection's first chunk, handed to the seed once.

    :meth:`take` returns them and drops this holder's reference, so the raw rows
    (8 or 16 bytes a row) are freed as soon as the seed has renumbered them to
    local ids, before its own per-edge arrays are made; :attr:`pairs` looks at
    them without taking them (:func:`~gnncore.partition.grem.plan.plan_applies`).
    """

    def __init__(self, pairs: np.ndarray) -> None:
        self._pairs: np.ndarray | None = pairs

    @property
    def pairs(self) -> np.ndarray:
        if self._pairs is None:
            raise RuntimeError("the chunk's rows were taken already")
        return self._pairs

    def take(self) -> np.ndarray:
        pairs = self.pairs
        self._pairs = None
        return pairs


def rows_of(pairs: np.ndarray | ChunkRows) -> np.ndarray:
    """The rows of ``pairs``: the array itself, or taken from a :class:`ChunkRows`."""
    return pairs.take() if isinstance(pairs, ChunkRows) else pairs


def chunk_nodes_local(pairs: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``pairs`` in increasing id order and the pairs renumbered to those
    local ids (in the width of ``pairs``: int32 stays int32, else int64), through
    one O(|V|) scratch array of that width instead of a sort (C++)."""
    flat = flat_ids(pairs)
    chunk = _C.grem_chunk_local(flat, int(num_nodes), first_appearance=False, csr=False)
    return np.asarray(chunk.nodes), np.asarray(chunk.local).reshape(-1, 2)


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
        np.minimum.at(
            parent, np.maximum(pu[differ], pv[differ]), np.minimum(pu[differ], pv[differ])
        )
        while True:  # pointer jumping until every node points at its root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    roots = np.flatnonzero(parent == np.arange(n))
    ids = np.empty(n, dtype=np.int64)
    ids[roots] = np.arange(len(roots))
    return ids[parent]


def metis_chunk(
    local: np.ndarray,
    n: int,
    nparts: int,
    options: Any,
    *,
    recursive: bool,
    tpwgts: list[float] | None = None,
    peel: bool | None = None,
    csr: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
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
            result = pymetis.part_graph(
                nparts,
                pymetis.CSRAdjacency(indptr, indices),
                vweights=weight,
                tpwgts=tpwgts,
                recursive=recursive,
                options=options,
            )
            return np.asarray(result.vertex_part, dtype=np.int64)[pos[root]]
    result = pymetis.part_graph(
        nparts,
        pymetis.CSRAdjacency(indptr, indices),
        tpwgts=tpwgts,
        recursive=recursive,
        options=options,
    )
    return np.asarray(result.vertex_part, dtype=np.int64)


def tree_roots(indptr: np.ndarray, indices: np.ndarray, max_weight: int = 2**62) -> np.ndarray:
    """``int64[n]``: for each node of a symmetric CSR, itself if it stays after
    peeling degree-1 nodes until none is left (the 2-core, plus one node per
    tree component), else the node that stays whose hanging tree holds it (C++).
    A node is not peeled where its tree and its parent's would together hold
    more than ``max_weight`` nodes."""
    return np.asarray(
        _C.grem_tree_roots(
            np.ascontiguousarray(indptr, dtype=np.int64),
            np.ascontiguousarray(indices, dtype=np.int64),
            int(max_weight),
        )
    )


__all__ = [
    "ChunkRows",
    "PEEL_TREES",
    "chunk_components",
    "chunk_csr",
    "chunk_nodes_local",
    "first_appearance",
    "flat_ids",
    "metis_chunk",
    "repair_capacity",
    "rows_of",
    "side_scores",
    "tree_roots",
]
