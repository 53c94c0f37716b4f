"""Small random graphs and loader inputs shared by the sampler tests."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.sampler import NodeSamplerInput


def random_csr(num_nodes: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random simple directed graph as ``(indptr int64, indices int32)``.

    Row ``v`` lists the sources of the edges into ``v`` (sorted, no repeats,
    no self-loops), the layout the samplers read.
    """
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, (2, num_edges))
    pairs = np.unique(np.stack([src, dst], 1)[src != dst], axis=0)
    order = np.lexsort((pairs[:, 0], pairs[:, 1]))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs[:, 1], minlength=num_nodes), out=indptr[1:])
    return indptr, pairs[order, 0].astype(np.int32)


def node_input(seeds: list[int] | np.ndarray) -> NodeSamplerInput:
    """A :class:`NodeSamplerInput` for ``seeds`` (input ids 0..len-1)."""
    node = torch.as_tensor(np.asarray(seeds), dtype=torch.long)
    return NodeSamplerInput(input_id=torch.arange(len(node)), node=node)
