"""Seeds of a GREM bisection: labels for the nodes of its first chunk
(``metis``, the thesis' seed; ``random``; ``ldg``; ``clusters`` from the run's
plan, see :mod:`gnncore.partition.grem.plan`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.partition.grem.chunk import (
    ChunkRows,
    chunk_csr,
    chunk_nodes_local,
    first_appearance,
    flat_ids,
    metis_chunk,
    repair_capacity,
    rows_of,
)
from gnncore.partition.grem.plan import ClusterPlan, plan_sides

SEED_METHODS = ("metis", "random", "ldg", "clusters")
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


def default_seed_method(passes: int) -> str:
    """The seed used when none is given: ``"clusters"`` when restreaming passes
    follow (on the 20M-edge planted graph it cuts 18.8% against the ``metis``
    seed's 24.3% at 10% chunks, and within 0.4 points of it on FB15k-237; see
    docs/BENCHMARKS.md), ``"metis"`` (the thesis' seed) for ``passes == 0``."""
    return "clusters" if passes > 0 else "metis"


def seed_sides(
    pairs: np.ndarray | ChunkRows,
    method: str,
    weights: tuple[int, int],
    capacities: tuple[int, int],
    seed: int,
    imbalance: float,
    rng_key: tuple[int, ...],
    *,
    plan: ClusterPlan | None = None,
    num_nodes: int | None = None,
    first_part: int = 0,
    use_plan: bool = True,
    members: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Seed labels of the first chunk's nodes (first-appearance order).

    ``pairs``: the chunk's rows, or a :class:`~gnncore.partition.grem.chunk.ChunkRows`
    holder whose rows the seed takes (and frees once renumbered).

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
    ``first_part`` (``members`` maps the chunk's ids to the graph's, whose
    clusters the plan holds; ``None``: the same ids), or, with
    ``use_plan=False`` (see :func:`plan_applies`), the ``metis`` bisection of
    the chunk.
    """
    if method == "clusters":
        if num_nodes is None or (use_plan and plan is None):
            raise ValueError("seed method 'clusters' needs num_nodes and the run's plan")
        if use_plan:
            assert plan is not None  # checked above
            return plan_sides(
                pairs, plan, num_nodes, first_part, weights, capacities, members=members
            )
        return _metis_chunk_sides(pairs, num_nodes, weights, capacities, seed, imbalance)
    if method == "metis":  # renumbering and CSR in one C++ call
        flat = flat_ids(rows_of(pairs))
        chunk = _C.grem_chunk_local(
            flat, int(flat.max()) + 1 if len(flat) else 0, first_appearance=True, csr=True
        )
        del flat  # the raw rows, once renumbered
        nodes, local = np.asarray(chunk.nodes), np.asarray(chunk.local).reshape(-1, 2)
        indptr, indices = chunk.indptr, chunk.indices
    else:
        nodes, local = first_appearance(rows_of(pairs))
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
            sides = metis_chunk(
                local,
                k,
                2,
                options,
                recursive=True,
                tpwgts=tpwgts,
                peel=False,
                csr=(np.asarray(indptr), np.asarray(indices)),
            )
    return nodes, repair_capacity(sides, local, capacities)


def _metis_chunk_sides(
    pairs: np.ndarray | ChunkRows,
    num_nodes: int,
    weights: tuple[int, int],
    capacities: tuple[int, int],
    seed: int,
    imbalance: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``metis`` seed with the chunk's nodes in increasing id order
    (O(|V|) scratch instead of :func:`first_appearance`'s sort of the chunk)."""
    nodes, local = chunk_nodes_local(rows_of(pairs), num_nodes)
    if len(nodes) == 0:
        return nodes, np.zeros(0, dtype=np.int64)
    options = _seed_options(seed, imbalance, len(nodes))
    total = weights[0] + weights[1]
    tpwgts = None if weights[0] == weights[1] else [w / total for w in weights]
    sides = metis_chunk(local, len(nodes), 2, options, recursive=True, tpwgts=tpwgts)
    return nodes, repair_capacity(sides, local, capacities)


__all__ = [
    "SEED_METHODS",
    "SEED_NITER",
    "SEED_NITER_MIN_NODES",
    "default_seed_method",
    "seed_sides",
]
