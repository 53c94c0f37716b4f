r"""DENSE multi-hop sampling (thesis §3.3) for PyG loaders, over ``_C.sample_dense_pyg``.

Each node's in-neighbours are sampled once per batch, hop by hop from the
targets outward; only the nodes first reached at a hop (its delta) are
expanded at the next one. The output is converted to PyG's layout (targets
first, then each hop's delta; edges grouped by hop), so ``num_sampled_nodes``
/ ``num_sampled_edges`` drive ``trim_to_layer`` as with
:class:`~gnncore.sampler.NeighborSampler`. The raw DENSE layout (``node_ids``,
``node_id_offsets``, ``nbrs``, ``nbr_offsets``, ``repr``) is available from
:meth:`DenseSampler.sample_dense`.

Seeding follows :class:`~gnncore.sampler.NeighborSampler`: batch ``k`` uses a
seed derived from ``(seed, k)`` (and the DataLoader worker's seed in a worker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch_geometric.data import GraphStore
from torch_geometric.sampler import NodeSamplerInput

from gnncore import _C
from gnncore.sampler.neighbor import ArrayLike, NeighborSampler


class DenseSampler(NeighborSampler):
    r"""Samples up to ``fanouts[h]`` in-neighbours of every node first reached at hop ``h``.

    A node's neighbours are sampled once per batch (uniformly without
    replacement, all of them when fewer than the fanout); a node reached again
    at a deeper hop is not sampled again. Seeds come first in
    :obj:`SamplerOutput.node`; ``row``/``col``/``edge`` are as in
    :class:`~gnncore.sampler.NeighborSampler`. Validation and seeding are
    inherited from it (with ``replace=False``).

    Args:
        graph (GraphStore or tuple): A homogeneous
            :class:`~torch_geometric.data.GraphStore` (its CSC view is taken
            once), or ``(indptr, indices)`` arrays, row ``v`` listing the
            sources of the edges into ``v``.
        fanouts (Sequence[int]): Neighbours per node at each hop from the
            targets outward; ``-1`` takes all of them.
        seed (int, optional): Base seed of the random choices. (default: :obj:`0`)
        num_threads (int, optional): OpenMP threads of the kernel; ``0`` uses
            the OpenMP default. Results do not depend on it. (default: :obj:`0`)
        **view: ``direction``, ``edge_type``, ``edge_types``, ``huge_pages``
            as in :class:`~gnncore.sampler.NeighborSampler`.
    """

    def __init__(
        self,
        graph: GraphStore | tuple[ArrayLike, ArrayLike],
        fanouts: Sequence[int],
        seed: int = 0,
        num_threads: int = 0,
        **view: Any,
    ) -> None:
        super().__init__(graph, fanouts, seed=seed, replace=False, num_threads=num_threads, **view)

    def sample_dense(self, index: NodeSamplerInput) -> dict[str, np.ndarray]:
        """The raw DENSE layout of one batch (thesis Alg. 1), as numpy arrays.

        Keys: ``node_ids`` (``[Δ_k, ..., Δ_1, targets]``), ``node_id_offsets``
        (block starts), ``nbrs``, ``nbr_offsets`` (CSR over
        ``node_ids[node_id_offsets[1]:]``), ``repr`` (index of each neighbour
        in ``node_ids``) and ``nbr_edges`` (CSR positions).
        """
        arrays = _C.sample_dense(
            self.indptr,
            self.indices,
            self._seeds(index),
            self.fanouts,
            self._batch_seed(),
            num_threads=self.num_threads,
        )
        keys = ("node_ids", "node_id_offsets", "nbrs", "nbr_offsets", "repr", "nbr_edges")
        return dict(zip(keys, arrays))

    # Node-based sampling -----------------------------------------------------

    def _sample(self, seeds: np.ndarray, batch_seed: int) -> tuple[Any, ...]:
        """DENSE sampling straight to the PyG layout (targets first, hop by hop);
        :meth:`NeighborSampler.sample_from_nodes` wraps it in a SamplerOutput."""
        return _C.sample_dense_pyg(
            self.indptr, self.indices, seeds, self.fanouts, batch_seed, num_threads=self.num_threads
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={len(self.indices)}, fanouts={self.fanouts}, seed={self.seed})"
        )
