"""The partitioner contract: a graph in, an ``int64[num_nodes]`` assignment out.

Every method (METIS now; GREM, LDG, Fennel, … later) subclasses
:class:`Partitioner` and implements :meth:`Partitioner.assign`. Shared inputs
such as the symmetric adjacency are derived here once.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.store import GraphDir


def part_label_dtype(parts: int) -> type[np.signedinteger[Any]]:
    """The narrowest of int8/int16/int32/int64 holding part labels ``[0, parts)``:
    GREM's labels during the recursion and the refinement's random reads of
    them, the relabelling's sort (numpy sorts 8- and 16-bit ints by radix)."""
    for dtype in (np.int8, np.int16, np.int32):
        if parts - 1 <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def part_order(assignment: np.ndarray, parts: int) -> np.ndarray:
    """The node ids grouped by part, in id order inside a part (``int64[N]``):
    the stable sort of the labels (which must lie in ``[0, parts)``) in their
    narrowest width, which numpy sorts by radix for up to 32,768 parts (at 10M
    nodes 0.19 s against the int64 merge sort's 1.28)."""
    labels = np.asarray(assignment).astype(part_label_dtype(parts), copy=False)
    return np.argsort(labels, kind="stable").astype(np.int64, copy=False)


def part_offsets(assignment: np.ndarray, parts: int) -> np.ndarray:
    """The ``parts + 1`` bounds of the groups of :func:`part_order` (int64)."""
    offsets = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(assignment, minlength=parts), out=offsets[1:])
    return offsets


@dataclass(frozen=True)
class SymmetricGraph:
    """An undirected simple graph as a symmetric CSR (both directions stored)."""

    num_nodes: int
    indptr: np.ndarray  # int64[num_nodes + 1]
    indices: np.ndarray  # int32 or int64, sorted per row, no self-loops or repeats


def undirected_edges(graph: GraphDir) -> tuple[np.ndarray, np.ndarray]:
    """The graph's distinct undirected edges as ``(u, v)`` with ``u < v``
    (``edges_shuffled.npy``, in its random stream order)."""
    pairs = np.asarray(graph.array("edges_shuffled"), dtype=np.int64)
    return pairs[:, 0], pairs[:, 1]


#: Rows of ``edges_shuffled.npy`` :func:`symmetric_degree` reads at a time.
DEGREE_CHUNK_ROWS = 1 << 22


def symmetric_degree(graph: GraphDir, chunk_rows: int = DEGREE_CHUNK_ROWS) -> np.ndarray:
    """``int64[N]``: each node's degree in the symmetrised simple graph.

    Undirected graphs store both directions, so it is the CSR's row lengths
    (nothing but ``indptr`` is read); directed and relational graphs count the
    distinct undirected pairs (``edges_shuffled.npy``) ``chunk_rows`` rows at a
    time, never holding the edges or the symmetric adjacency."""
    m = graph.manifest
    if not m.directed and not m.num_relations:
        return np.diff(np.asarray(graph.indptr, dtype=np.int64))
    pairs = graph.array("edges_shuffled")
    degree = np.zeros(graph.num_nodes, dtype=np.int64)
    for start in range(0, len(pairs), chunk_rows):
        np.add.at(degree, np.asarray(pairs[start : start + chunk_rows]).ravel(), 1)
    return degree


def symmetric_graph(graph: GraphDir) -> SymmetricGraph:
    """The symmetric CSR partitioners need, built once per call."""
    m = graph.manifest
    if not m.directed and not m.num_relations:
        return SymmetricGraph(m.num_nodes, np.asarray(graph.indptr), np.asarray(graph.indices))
    u, v = undirected_edges(graph)
    indptr, indices, _ = _C.build_csr(
        np.concatenate([u, v]),
        np.concatenate([v, u]),
        m.num_nodes,
        m.num_nodes <= np.iinfo(np.int32).max,
    )
    return SymmetricGraph(m.num_nodes, indptr, indices)


@dataclass
class PartitionOptions:
    """Settings every partitioner understands.

    Args:
        parts (int): Number of partitions ``p`` (>= 1).
        seed (int): Random seed (default: 0).
        imbalance (float): Allowed relative excess of the largest part over
            ``N/p`` (default: 0.03, METIS's ``ufactor=30``).
        balance_splits (bool): Rebalance train/val/test counts after the
            method ran (DistDGL-style post-processing; default: ``True``).
        split_tolerance (float): Allowed relative deviation of each split's
            per-part count from its mean (default: 0.10).
        extra (dict): Method-specific settings, recorded with the result.
    """

    parts: int
    seed: int = 0
    imbalance: float = 0.03
    balance_splits: bool = True
    split_tolerance: float = 0.10
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self, num_nodes: int) -> None:
        if self.parts < 1:
            raise ValueError(f"parts must be >= 1, got {self.parts}")
        if self.parts > max(num_nodes, 1):
            raise ValueError(f"cannot split {num_nodes} nodes into {self.parts} parts")
        if not 0 <= self.imbalance < 1:
            raise ValueError(f"imbalance must be in [0, 1), got {self.imbalance}")


class Partitioner(abc.ABC):
    """A method that assigns every node to one of ``parts`` partitions."""

    name: str = ""
    #: Sum of the peak RSS of the worker processes the last :meth:`assign` ran
    #: (0: it ran in this process only). Reports add it to this process's
    #: peak: an upper bound of the whole run's, since the peaks need not
    #: coincide.
    helper_peak_rss_bytes: int = 0
    #: ``progress(message)``, set by :func:`~gnncore.partition.run.partition_graph`
    #: for the duration of a call: methods with steps worth reporting (GREM's
    #: bisections) send one line per step. ``None``: silent.
    progress: Callable[[str], None] | None = None

    @abc.abstractmethod
    def assign(self, graph: GraphDir, options: PartitionOptions) -> np.ndarray:
        """Return ``int64[num_nodes]`` with values in ``[0, options.parts)``."""
