"""ByteGNN's GNN-aware block partitioner (Liang 2024 §4.2.3, ALGORITHMS.md §2).

Step 1 builds blocks by a level-synchronous multi-source BFS of ``hops``
levels from every train/val/test node: a node keeps the first block id that
reaches it, ties going to the smaller centre id (so a node joins the block of
its nearest centre, the smallest such centre on a tie); nodes no BFS reaches
are singleton blocks. Step 2 (Algorithm 2) visits blocks by descending
``max(|train|, |val|, |test|)`` (then descending size, then block id) and puts
each in the part maximising ``CE[j]·BS[j]``: ``CE[j]`` the edges between the
block and part ``j`` over ``|P_j|``, ``BS[j] = 1 − w_train·|P_j(train)|/C(train)
− w_val·… − w_test·…`` with ``C(x) = |V(x)|/p``. When a part is empty or every
score is 0, the least loaded part wins. Ties: least loaded, then lowest id.

The node cap ``ceil((1 + imbalance)·N/p)`` holds as well: only parts with room
for the whole block compete. When no part has room (late, with nearly full
parts) the block is split: its nodes, centre first and then by BFS level and
id, fill the parts with room in score order, each up to the cap.

Note: when every node is in a split (as in ``gnncore synth`` graphs) every
node is a centre, the blocks are singletons and step 2 becomes a greedy node
stream in id order. The result does not depend on the seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.partition.base import Partitioner, PartitionOptions, SymmetricGraph, symmetric_graph
from gnncore.partition.metrics import max_part_size
from gnncore.partition.postprocess import split_codes
from gnncore.store import GraphDir
from gnncore.typing import require_csrc


class ByteGnnPartitioner(Partitioner):
    """ByteGNN block partitioning; needs train/val/test node splits.

    Args:
        hops (int): BFS depth ``K`` of the blocks, the GNN's number of layers
            (default: 2). ``options.extra["hops"]`` overrides it per call.
        weights (sequence of 3 floats): ``(w_train, w_val, w_test)``, the
            weights α, β, γ of the balance score (default: 1/3 each, so ``BS``
            falls from 1 to about 0 as a part reaches its share of each split).
            ``options.extra["weights"]`` overrides them per call.
    """

    name = "bytegnn"

    def __init__(self, hops: int = 2, weights: Sequence[float] = (1 / 3, 1 / 3, 1 / 3)) -> None:
        self.hops = _checked_hops(hops)
        self.weights = _checked_weights(weights)

    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        options.validate(graph.num_nodes)
        codes = split_codes(graph)
        if not np.any(codes >= 0):
            raise InputError(
                "ByteGNN partitioning needs train/val/test node splits "
                "(train_idx.npy, val_idx.npy, test_idx.npy) and the graph has "
                "none",
                graph.path,
            )
        hops = _checked_hops(options.extra.get("hops", self.hops))
        weights = _checked_weights(options.extra.get("weights", self.weights))
        capacity = max_part_size(graph.num_nodes, options.parts, options.imbalance)
        return bytegnn_partition(
            symmetric_graph(graph), codes, options.parts, capacity, hops, weights
        )


def bytegnn_blocks(
    graph: SymmetricGraph, centres: np.ndarray, hops: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(block, level)``: each node's block id (a centre id, or its own id
    when unreached) and BFS level (-1 when unreached), both ``int64[N]``."""
    require_csrc()
    blocks = _C.bytegnn_blocks(
        np.asarray(graph.indptr),
        np.asarray(graph.indices),
        np.ascontiguousarray(centres, dtype=np.int64),
        hops,
    )
    return blocks.block, blocks.level


def bytegnn_partition(
    graph: SymmetricGraph,
    codes: np.ndarray,
    parts: int,
    capacity: int,
    hops: int = 2,
    weights: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
) -> np.ndarray:
    """Blocks, then Algorithm 2, over a symmetric CSR.

    Args:
        graph (SymmetricGraph): The undirected graph.
        codes (np.ndarray): ``int8[N]``, 0/1/2 for train/val/test, -1 otherwise
            (:func:`gnncore.partition.postprocess.split_codes`).
        parts (int): Number of parts.
        capacity (int): Node cap per part (``capacity · parts >= N``).
        hops (int): BFS depth (default: 2).
        weights (sequence of 3 floats): Balance-score weights (default: 1/3 each).
    """
    require_csrc()
    codes = np.ascontiguousarray(codes, dtype=np.int8)
    block, level = bytegnn_blocks(graph, np.flatnonzero(codes >= 0), hops)
    options = _C.ByteGnnAssignOptions(
        parts=parts, capacity=capacity, weights=_checked_weights(weights)
    )
    return _C.bytegnn_assign(
        np.asarray(graph.indptr), np.asarray(graph.indices), block, level, codes, options
    )


def _checked_hops(hops: object) -> int:
    if isinstance(hops, bool) or not isinstance(hops, (int, np.integer)) or hops < 0:
        raise ValueError(f"hops must be a non-negative integer, got {hops!r}")
    return int(hops)


def _checked_weights(weights: Sequence[float]) -> tuple[float, float, float]:
    w = tuple(float(x) for x in weights)
    if len(w) != 3 or any(not x >= 0 for x in w):
        raise ValueError(f"weights must be three non-negative numbers, got {weights!r}")
    return w[0], w[1], w[2]


__all__ = ["ByteGnnPartitioner", "bytegnn_blocks", "bytegnn_partition"]
