"""Locality-aware sampling in training (Song & Jiang §4, ALGORITHMS.md §4).

With a placement plan, training can bias its neighbour sampling toward the
nodes a device reads from GPU caches (its own and its peers'): hop ``h`` of an
``L``-hop sampler boosts the nodes of ``Q'_{L-h}`` by a scale ``s``
(:func:`gnncore.sampler.biased.boost_sets`), and every sampled edge carries the
weight ``q / q_new`` that keeps the mean aggregation an estimate of the plain
sampler's. ``s`` starts at 1 (the plain distribution) and
:class:`LasScaleAdapter` moves it once per epoch by Algorithm 2 from the
epoch's data-loading share ``r = (wait_s + transfer_s) / train_s``.

Because ``s`` follows measured time, a run with locality-aware sampling is not
bit-reproducible across machines or loads; a resumed run restores ``s`` and the
controller's state from the checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnncore.plan.placement import PlacementPlan
from gnncore.sampler.biased import LocalityAwareSampler, ScaleController, boost_sets


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
    cached = np.flatnonzero(np.asarray(plan.dev_num()[device_index]) >= 0)
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
        self.sampler.set_scale(self.controller.update(share))
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
