"""Build a node sampler by mode name, for the training CLI and configs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch_geometric.data import GraphStore

from gnncore.sampler.dense import DenseSampler
from gnncore.sampler.names import SAMPLER_MODES as SAMPLER_MODES
from gnncore.sampler.names import SamplerMode as SamplerMode
from gnncore.sampler.neighbor import ArrayLike, NeighborSampler
from gnncore.sampler.per_layer import PerLayerSampler


def build_sampler(
    mode: str,
    graph: GraphStore | tuple[ArrayLike, ArrayLike],
    fanouts: Sequence[int],
    seed: int = 0,
    **kwargs: Any,
) -> NeighborSampler:
    """The sampler of ``mode`` over ``graph``.

    Args:
        mode: ``"dense"`` (:class:`~gnncore.sampler.DenseSampler`: each node's
            neighbours once per batch) or ``"per-layer"``
            (:class:`~gnncore.sampler.PerLayerSampler`: every layer samples
            its whole frontier again).
        graph: A homogeneous GraphStore or ``(indptr, indices)`` CSC arrays.
        fanouts: Neighbours per node at each hop, from the seeds outward
            (``-1``: all).
        seed: Base seed of the random choices.
        **kwargs: Passed to the sampler's constructor (``num_threads``,
            ``direction``, ``edge_type`` / ``edge_types``; also ``replace`` for
            ``"per-layer"``).

    Raises:
        ValueError: For a mode not in :data:`SAMPLER_MODES`.
    """
    if mode == "dense":
        return DenseSampler(graph, fanouts, seed=seed, **kwargs)
    if mode == "per-layer":
        return PerLayerSampler(graph, fanouts, seed=seed, **kwargs)
    raise ValueError(
        f"unknown sampler mode {mode!r}; choose one of {', '.join(repr(m) for m in SAMPLER_MODES)}"
    )
