"""Plan-aware sampling in training: locality-aware sampling over a placement
(Song & Jiang §4) and HDR threshold pruning over a replication plan (HyDRA).

**Locality-aware sampling** (ALGORITHMS.md §4).

With a placement plan, training can bias its neighbour sampling toward the
nodes a device reads from GPU caches (its own and its peers'): hop ``h`` of an
``L``-hop sampler boosts the nodes of ``Q'_{L-h}`` by a scale ``s``
(:func:`gnncore.sampler.biased.boost_sets`); rows are drawn with exact (capped)
inclusion probabilities ``π`` (the paper's ``q_new`` capped at 1) and every
sampled edge carries the Horvitz–Thompson weight ``q / π``, which keeps the
mean aggregation an unbiased estimate of the plain sampler's. ``s`` starts at 1
(the plain distribution) and :class:`LasScaleAdapter` moves it once per epoch
by Algorithm 2 from the epoch's data-loading share
``r = (wait_s + transfer_s) / train_s``.

Because ``s`` follows measured time, a run with locality-aware sampling is not
bit-reproducible across machines or loads; a resumed run restores ``s`` and the
controller's state from the checkpoint.

**HDR pruning** (ALGORITHMS.md §3). Training as partition ``P`` of a replication
plan, the lists of nodes ``P`` neither owns nor replicates are remote: they are
read through a window of ``θ`` ids (:class:`~gnncore.sampler.PrunedSampler`),
and :class:`PruningCounter` logs the remote lists and ids read per epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnncore.plan.placement import PlacementPlan
from gnncore.plan.replication import ReplicationPlan
from gnncore.sampler.biased import (
    LocalityAwareSampler,
    PrunedSampler,
    ScaleController,
    boost_sets,
)


def locality_aware_sampler(
    indptr: np.ndarray,
    indices: np.ndarray,
    plan: PlacementPlan,
    fanouts: Sequence[int],
    *,
    seed: int = 0,
    device_index: int = 0,
    set_size: int = 0,
) -> LocalityAwareSampler:
    """A :class:`~gnncore.sampler.LocalityAwareSampler` boosting, for device
    ``device_index`` of ``plan``, the nodes it reads from a GPU cache (``B``)
    and their ``set_size`` best-connected neighbours per inner hop (0: ``|B|``)."""
    cached = plan.readable(device_index)
    boost = boost_sets(indptr, indices, cached, len(fanouts), int(set_size) or len(cached))
    return LocalityAwareSampler((indptr, indices), list(fanouts), seed=seed, boost=boost)


class LasScaleAdapter:
    """Adapts a :class:`~gnncore.sampler.LocalityAwareSampler`'s scale after each
    epoch (Algorithm 2) and reports it; checkpointed through ``state_dict``.

    Args:
        sampler: The training sampler.
        controller: The Algorithm 2 state (``lt``, ``ut``, ``maxs``).
    """

    def __init__(self, sampler: LocalityAwareSampler, controller: ScaleController) -> None:
        self.sampler = sampler
        self.controller = controller

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        """Feed the epoch's loading share to Algorithm 2 and set the next epoch's
        scale; returns ``las_scale`` (this epoch's), ``las_next_scale`` and
        ``loading_share``."""
        wall = float(throughput.get("train_s", 0.0))
        loading = float(throughput.get("wait_s", 0.0)) + float(throughput.get("transfer_s", 0.0))
        share = loading / wall if wall > 0 else 0.0
        used = float(self.sampler.scale)
        # Algorithm 2 doubles s past MAXS once (4 -> 8 with MAXS 6); the option
        # promises MAXS as the largest scale, so cap what the sampler uses.
        self.sampler.set_scale(min(self.controller.update(share), self.controller.maxs))
        return {
            "las_scale": used,
            "las_next_scale": float(self.sampler.scale),
            "loading_share": share,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"controller": self.controller.state_dict(), "scale": float(self.sampler.scale)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.controller.load_state_dict(state["controller"])
        self.sampler.set_scale(float(state["scale"]))


def pruned_sampler(
    indptr: np.ndarray,
    indices: np.ndarray,
    plan: ReplicationPlan,
    part: int,
    fanouts: Sequence[int],
    *,
    seed: int = 0,
) -> PrunedSampler:
    """A :class:`~gnncore.sampler.PrunedSampler` for partition ``part`` of ``plan``:
    its owners, its replicated nodes and its pruning weights (α, β)."""
    if not 0 <= part < plan.parts:
        raise ValueError(f"hdr_part {part} is outside the plan's {plan.parts} partitions")
    settings = plan.plan.settings
    return PrunedSampler(
        (indptr, indices),
        list(fanouts),
        seed=seed,
        owner=np.asarray(plan.owner()),
        part=part,
        replicated=np.asarray(plan.replicated()),
        prune_alpha=float(settings["prune_alpha"]),
        prune_beta=float(settings["prune_beta"]),
    )


class PruningCounter:
    """Reports a :class:`~gnncore.sampler.PrunedSampler`'s remote reads per epoch
    (``hdr_remote_lists``, ``hdr_remote_ids``) and resets its counters."""

    def __init__(self, sampler: PrunedSampler) -> None:
        self.sampler = sampler

    def adapt(self, epoch: int, throughput: dict[str, float]) -> dict[str, float]:
        figures = {
            "hdr_remote_lists": float(self.sampler.remote_lists),
            "hdr_remote_ids": float(self.sampler.remote_ids),
        }
        self.sampler.reset_counters()
        return figures

    def state_dict(self) -> dict[str, Any]:
        """Nothing to restore: the counters are per-epoch figures."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore (see :meth:`state_dict`)."""
