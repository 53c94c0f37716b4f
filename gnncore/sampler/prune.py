"""Threshold pruning (HyDRA, ALGORITHMS.md §3): how many neighbour ids of a
remote list each hop reads. The sampler that prunes (:mod:`gnncore.sampler.biased`)
and the planners that simulate it (:mod:`gnncore.plan.simulate`) share the rule."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def prune_thresholds(
    fanouts: Sequence[int],
    avg_degree: float,
    theta: int | Sequence[int] | None = None,
    *,
    prune_alpha: float = 1.0,
    prune_beta: float = 1.0,
) -> tuple[int | None, ...]:
    """θ per hop: the neighbour ids a remote list is read as under threshold pruning.

    Rule: a hop with fanout ``-1`` needs the whole list (``None``: not
    pruned). Otherwise θ is ``theta`` when given (one int for every hop, or
    one per hop), else ``ceil(prune_alpha · avg_degree + prune_beta ·
    fanout)`` with that hop's fanout (ALGORITHMS.md §3, α = β = 1 by default;
    as :meth:`gnncore.plan.replication.Replication.prune_threshold`).

    Raises:
        ValueError: For a per-hop ``theta`` of the wrong length or θ < 0.
    """
    hops = len(fanouts)
    if theta is None:
        given: list[int | None] = [None] * hops
    elif isinstance(theta, int | np.integer):
        given = [int(theta)] * hops
    else:
        given = [int(t) for t in theta]
        if len(given) != hops:
            raise ValueError(f"theta has {len(given)} entries for {hops} hops")
    out: list[int | None] = []
    for fanout, fixed in zip(fanouts, given):
        if fanout < 0:
            out.append(None)
            continue
        value = (
            fixed
            if fixed is not None
            else math.ceil(prune_alpha * avg_degree + prune_beta * fanout)
        )
        if value < 0:
            raise ValueError(f"prune threshold must be >= 0, got {value}")
        out.append(int(value))
    return tuple(out)
