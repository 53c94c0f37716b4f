"""Which neighbours a sampler sees: edge direction and edge types.

The samplers read a CSC adjacency (row ``v``: the sources of the edges into
``v``). :func:`orient_adjacency` derives the adjacency of another view once,
at construction: ``"out"`` (row ``v``: the targets of the edges out of ``v``),
``"both"`` (the union, each neighbour once), optionally restricted to some edge
types (relations of a knowledge graph).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnncore import _C

DIRECTIONS = ("in", "out", "both")


def orient_adjacency(
    indptr: np.ndarray,
    indices: np.ndarray,
    direction: str = "in",
    edge_type: np.ndarray | None = None,
    edge_types: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(indptr, indices, position)`` of the requested view of a CSC adjacency.

    Args:
        indptr, indices: The CSC adjacency (``int64 [N + 1]``, ``[E]``).
        direction: ``"in"``, ``"out"`` or ``"both"``.
        edge_type: ``[E]`` type of each adjacency entry (required with
            ``edge_types``).
        edge_types: Keep only entries whose type is listed.

    Returns:
        The new adjacency (rows sorted) and ``position``: for each new entry,
        its position in the input ``indices`` (``None`` when the input is
        returned unchanged).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r}: choose one of {DIRECTIONS}")
    if edge_types is not None and edge_type is None:
        raise ValueError("edge_types needs edge_type, the type of each adjacency entry")
    if direction == "in" and edge_types is None:
        return indptr, indices, None

    num_nodes = len(indptr) - 1
    position = np.arange(len(indices), dtype=np.int64)
    target = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
    source = np.asarray(indices, dtype=np.int64)
    if edge_types is not None:
        types = np.asarray(edge_type).reshape(-1)
        if len(types) != len(indices):
            raise ValueError(f"edge_type has {len(types)} entries for {len(indices)} edges")
        keep = np.isin(types, np.asarray(list(edge_types), dtype=types.dtype))
        position, target, source = position[keep], target[keep], source[keep]
    if direction == "in":
        rows, nbrs = target, source
    elif direction == "out":
        rows, nbrs = source, target
    else:
        rows, nbrs = np.concatenate([target, source]), np.concatenate([source, target])
        position = np.concatenate([position, position])
        _, first = np.unique(rows * num_nodes + nbrs, return_index=True)
        first.sort()  # keep each (row, neighbour) pair once, in input order
        rows, nbrs, position = rows[first], nbrs[first], position[first]
    new_indptr, new_indices, order = _C.build_csr(rows, nbrs, num_nodes, indices.dtype == np.int32)
    return new_indptr, new_indices, position[order]
