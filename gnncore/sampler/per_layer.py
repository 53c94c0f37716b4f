r"""Per-layer multi-hop sampling (DGL / classic PyG) for PyG loaders, over ``_C.sample_per_layer``.

The comparison point of DENSE (thesis §3.3, Table 3.5): each layer samples
neighbours for *every* node of its frontier -- the seeds and every node
reached at an earlier hop -- so a node is sampled again at each later hop.
The output is PyG's layout (seeds first, then the nodes new at each hop,
duplicate-free; edges grouped by hop), so ``num_sampled_nodes`` /
``num_sampled_edges`` drive ``trim_to_layer``: with trimming, layer ``l``
(0-based, from the input) of a ``k``-layer model runs over the edges of hops
``1 .. k - l``, which for a node reached early is the union of its samples
from those hops (a DGL block would use hop ``k - l`` alone).

Seeding follows :class:`~gnncore.sampler.NeighborSampler`: batch ``k`` uses a
seed derived from ``(seed, k)`` (and the DataLoader worker's seed in a worker).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnncore import _C
from gnncore.sampler.neighbor import NeighborSampler


class PerLayerSampler(NeighborSampler):
    r"""Samples up to ``fanouts[h]`` in-neighbours of every node known before hop ``h``.

    Hop ``0`` samples the seeds; hop ``h`` samples the seeds and all nodes
    reached at hops ``0 .. h-1`` again (independent draws per hop), as DGL's
    and classic PyG's layer-wise samplers do. A CSR entry may therefore appear
    once per hop in ``edge``. Seeds come first in :obj:`SamplerOutput.node`;
    ``row``/``col``/``edge`` are as in :class:`~gnncore.sampler.NeighborSampler`,
    whose constructor (``graph``, ``fanouts``, ``seed``, ``replace``,
    ``num_threads``, ``direction``, edge types), validation, seeding and edge
    sampling (``sample_from_edges``) this class inherits.
    """

    def _sample(self, seeds: np.ndarray, batch_seed: int) -> tuple[Any, ...]:
        """One call into ``_C.sample_per_layer``: ``(node, row, col, edge, num_nodes,
        num_edges)``; :meth:`NeighborSampler.sample_from_nodes` wraps it."""
        return _C.sample_per_layer(
            self.indptr,
            self.indices,
            seeds,
            self.fanouts,
            batch_seed,
            replace=self.replace,
            num_threads=self.num_threads,
        )
