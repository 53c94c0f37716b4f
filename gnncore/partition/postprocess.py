"""DistDGL-style post-processing of any assignment (ALGORITHMS.md §2, Liang §4.1.2).

- :func:`relabel`: new node ids so each part's core nodes form one contiguous
  range (stable inside a part); :func:`part_of` maps a new id to its part by
  binary search over the range bounds and :func:`local_id` to its position in
  the part by a subtraction.
- :func:`halo_nodes`: a part's 1-hop HALO nodes, the non-core endpoints of
  the edges incident to its core nodes.
- :func:`balance_splits`: move nodes so every part holds within ±tolerance of
  the mean number of train, val and test nodes, at the least cut cost and
  without growing any part past the node cap (C++ kernel; see
  ``csrc/partition/postprocess.h`` for the greedy), in O(|V|) memory: the
  CSR rows it visits are read from the file one at a time.
- :func:`postprocess_arrays`: the arrays a partition directory stores, keyed
  by file stem.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.partition.base import SymmetricGraph, part_offsets, part_order, symmetric_graph
from gnncore.partition.metrics import (
    EDGE_CHUNK_ROWS,
    graph_edge_file,
    max_part_size,
    streamed_edge_cut,
)
from gnncore.store import GraphDir
from gnncore.store.external_sort import ExternalEdgeSorter
from gnncore.store.npy import load_npy, read_npy_header
from gnncore.store.scratch import scratch
from gnncore.typing import require_csrc

SPLIT_NAMES = ("train", "val", "test")
#: Memory of the external sort that builds a symmetric CSR for balancing
#: graphs whose own CSR is not symmetric (directed, or with relations).
SORT_BUDGET = 64 << 20


def _checked_assignment(
    assignment: np.ndarray, parts: int, num_nodes: int | None = None
) -> np.ndarray:
    a = np.asarray(assignment)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"assignment must be a 1-d integer array, got {a.dtype}{a.shape}")
    if num_nodes is not None and len(a) != num_nodes:
        raise ValueError(f"assignment has {len(a)} entries for {num_nodes} nodes")
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if len(a) and (a.min() < 0 or a.max() >= parts):
        raise ValueError(f"assignment holds a part outside [0, {parts})")
    return np.ascontiguousarray(a, dtype=np.int64)


# Relabeling --------------------------------------------------------------------


@dataclass(frozen=True)
class Relabeling:
    """New ids that make every part a contiguous range.

    Attributes:
        new_of_old (np.ndarray): ``int64[N]``, the new id of each original node.
        old_of_new (np.ndarray): ``int64[N]``, the original id of each new id.
        offsets (np.ndarray): ``int64[p + 1]``; part ``i`` holds the new ids
            ``offsets[i]:offsets[i + 1]``, in increasing original-id order.
    """

    new_of_old: np.ndarray
    old_of_new: np.ndarray
    offsets: np.ndarray

    @property
    def parts(self) -> int:
        return len(self.offsets) - 1


def relabel(assignment: np.ndarray, parts: int) -> Relabeling:
    """Relabel nodes part by part, keeping the original order inside a part."""
    a = _checked_assignment(assignment, parts)
    old_of_new = part_order(a, parts)
    new_of_old = np.empty_like(old_of_new)
    new_of_old[old_of_new] = np.arange(len(a), dtype=np.int64)
    return Relabeling(new_of_old, old_of_new, part_offsets(a, parts))


def part_of(new_ids: np.ndarray | int, offsets: np.ndarray) -> np.ndarray:
    """The part of each new id: a binary search over the range bounds."""
    ids = np.asarray(new_ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= offsets[-1]):
        raise IndexError(f"new ids must lie in [0, {int(offsets[-1])})")
    return np.searchsorted(offsets, ids, side="right").astype(np.int64) - 1


def local_id(new_ids: np.ndarray | int, offsets: np.ndarray) -> np.ndarray:
    """The position of each new id inside its part: ``id − offsets[part]``."""
    ids = np.asarray(new_ids, dtype=np.int64)
    return ids - np.asarray(offsets)[part_of(ids, offsets)]


# Halos -------------------------------------------------------------------------


def halo_nodes(graph: SymmetricGraph, assignment: np.ndarray, parts: int) -> list[np.ndarray]:
    """1-hop halo of each part: sorted ``int64`` ids of the nodes outside the
    part with a neighbour inside it (``len`` gives the halo sizes)."""
    require_csrc()
    a = _checked_assignment(assignment, parts, graph.num_nodes)
    offsets, nodes = _C.halo_nodes(np.asarray(graph.indptr), np.asarray(graph.indices), a, parts)
    return [nodes[offsets[i] : offsets[i + 1]] for i in range(parts)]


def halo_sizes(halos: list[np.ndarray]) -> np.ndarray:
    """``int64[p]``: the number of halo nodes of each part."""
    return np.array([len(h) for h in halos], dtype=np.int64)


# Split balance -----------------------------------------------------------------


def split_codes(graph: GraphDir) -> np.ndarray:
    """``int8[N]``: 0/1/2 for train/val/test nodes, -1 for the others."""
    codes = np.full(graph.num_nodes, -1, dtype=np.int8)
    for code, name in enumerate(SPLIT_NAMES):
        if graph.has(f"{name}_idx"):
            codes[graph.split(name)] = code
    return codes


def split_bounds(total: int, parts: int, tolerance: float) -> tuple[int, int]:
    """The per-part count band ``[lo, hi]`` for a split of ``total`` nodes:
    ``mean·(1 ∓ tolerance)`` rounded inwards, widened to ``floor(mean)`` /
    ``ceil(mean)`` when the band holds no integer (small splits)."""
    mean = total / parts
    lo = min(math.ceil(mean * (1 - tolerance) - 1e-9), math.floor(mean))
    hi = max(math.floor(mean * (1 + tolerance) + 1e-9), math.ceil(mean))
    return max(lo, 0), hi


def split_counts(codes: np.ndarray, assignment: np.ndarray, parts: int) -> dict[str, list[int]]:
    """Per-part counts of each split present in ``codes``."""
    return {
        name: np.bincount(assignment[codes == c], minlength=parts).tolist()
        for c, name in enumerate(SPLIT_NAMES)
        if np.any(codes == c)
    }


@dataclass(frozen=True)
class BalanceReport:
    """What :func:`balance_splits` did.

    Attributes:
        assignment (np.ndarray): The new ``int64[N]`` assignment.
        moved (int): Nodes whose part changed (split nodes and evictions).
        cut_before (int): Cut undirected edges of the input assignment.
        cut_after (int): Cut undirected edges of the new assignment.
        split_moves (int): Moves of train/val/test nodes.
        evictions (int): Nodes moved out of a part at the node cap (swaps).
        satisfied (bool): Every split count ended inside its band.
        bounds (dict): ``split -> (lo, hi)``, the band per part.
        counts_before (dict): ``split -> per-part counts`` before.
        counts_after (dict): ``split -> per-part counts`` after.
        rows_read (int): CSR rows the greedy read from the indices file.
    """

    assignment: np.ndarray
    moved: int
    cut_before: int
    cut_after: int
    split_moves: int = 0
    evictions: int = 0
    satisfied: bool = True
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)
    counts_before: dict[str, list[int]] = field(default_factory=dict)
    counts_after: dict[str, list[int]] = field(default_factory=dict)
    rows_read: int = 0

    @property
    def cut_cost(self) -> int:
        """Extra cut edges paid for the balance (negative if the cut shrank)."""
        return self.cut_after - self.cut_before


def balance_splits(
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    tolerance: float = 0.10,
    imbalance: float = 0.03,
    chunk_rows: int = EDGE_CHUNK_ROWS,
    tmp_dir: str | os.PathLike[str] | None = None,
    sort_budget: int = SORT_BUDGET,
) -> BalanceReport:
    """Move nodes until every part holds ``mean·(1 ± tolerance)`` nodes of each
    split (see :func:`split_bounds`), choosing the moves that cost the least cut.

    Each split is fixed in turn (train, val, test; moving a node of one split
    leaves the others' counts alone): the nodes of that split in over-full
    parts move, largest gain first (gain = neighbours in the target part −
    neighbours in the source part), to the under-full parts. A part already
    holding ``ceil((1 + imbalance)·N/p)`` nodes takes a node only by evicting
    one (a swap), so no part grows past the cap and node counts stay
    balanced. The evicted node is the cheapest to move to a part below the
    cap among the non-split nodes and the nodes of other splits whose counts
    stay in their bands; only if there is none, a node of a split balanced
    later (its own pass repairs it). A part that already exceeds the cap in
    the input is kept from growing, not shrunk. ``satisfied`` is false when
    these rules left a count outside its band.

    Memory is O(|V|) whatever the edge count: the symmetric CSR's indices stay
    in their file and the C++ greedy reads each row it visits with one
    ``pread`` (none at all when every count is already in its band); the cuts
    before and after are counted in streaming passes over the edge file.
    Graphs whose own CSR is not the symmetric one (directed, or with
    relations) get it built by an external sort
    (:class:`~gnncore.store.external_sort.ExternalEdgeSorter`) in a temporary
    directory under ``tmp_dir``, within ``sort_budget`` bytes.

    Args:
        graph (GraphDir): The graph; it must have at least one node split.
        assignment (np.ndarray): ``int64[N]`` with values in ``[0, parts)``.
        parts (int): Number of parts.
        tolerance (float): Allowed relative deviation of a split count from
            its mean (default: 0.10).
        imbalance (float): Node cap ``ceil((1 + imbalance)·N/p)`` (default:
            0.03).
        chunk_rows (int): Edge rows per read of the cut passes.
        tmp_dir (str or PathLike, optional): Where a symmetric CSR is built
            when the graph lacks one (the system's temporary directory).
        sort_budget (int): Memory of that external sort, in bytes.
    """
    require_csrc()
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    n = graph.num_nodes
    a = _checked_assignment(assignment, parts, n)
    codes = split_codes(graph)
    if not np.any(codes >= 0):
        raise InputError(
            "balance_splits needs train/val/test node splits and the graph has none", graph.path
        )
    totals = np.bincount(codes[codes >= 0], minlength=3)
    bounds = [split_bounds(int(t), parts, tolerance) for t in totals]
    options = _C.SplitBalanceOptions(
        parts=parts,
        lo=(bounds[0][0], bounds[1][0], bounds[2][0]),
        hi=(bounds[0][1], bounds[1][1], bounds[2][1]),
        capacity=max_part_size(n, parts, imbalance),
    )
    with symmetric_csr_files(graph, tmp_dir, sort_budget) as (indptr_file, indices_file):
        indices = npy_layout(indices_file)
        balanced = _C.balance_splits_file(
            load_npy(indptr_file, mmap_mode=None),  # read, not mapped: O(|V|)
            str(indices_file),
            indices.offset,
            indices.dtype == "<i8",
            a,
            codes,
            options,
        )
    new = np.asarray(balanced.assignment)
    moved = int(np.count_nonzero(new != a))
    cut_before = streamed_edge_cut(graph, a, parts, chunk_rows)
    cut_after = streamed_edge_cut(graph, new, parts, chunk_rows) if moved else cut_before
    return BalanceReport(
        assignment=new,
        moved=moved,
        cut_before=cut_before,
        cut_after=cut_after,
        split_moves=balanced.split_moves,
        evictions=balanced.evictions,
        satisfied=balanced.satisfied,
        bounds={name: bounds[c] for c, name in enumerate(SPLIT_NAMES) if totals[c]},
        counts_before=split_counts(codes, a, parts),
        counts_after=split_counts(codes, new, parts),
        rows_read=balanced.rows_read,
    )


@dataclass(frozen=True)
class NpyLayout:
    """Where a C-ordered ``.npy`` file's data lies: byte ``offset``, ``dtype``
    (numpy's ``str``, e.g. ``"<i4"``) and ``shape``."""

    offset: int
    dtype: str
    shape: tuple[int, ...]


def npy_layout(path: str | os.PathLike[str]) -> NpyLayout:
    """Read a ``.npy`` file's header (nothing else)."""
    with open(path, "rb") as fh:
        shape, fortran, dtype = read_npy_header(fh)
        offset = fh.tell()
    if fortran and len(shape) > 1:
        raise InputError("array must be C-ordered", Path(path))
    return NpyLayout(int(offset), dtype.str, tuple(int(s) for s in shape))


@contextmanager
def symmetric_csr_files(
    graph: GraphDir,
    tmp_dir: str | os.PathLike[str] | None = None,
    sort_budget: int = SORT_BUDGET,
) -> Iterator[tuple[Path, Path]]:
    """``(indptr.npy, indices.npy)`` of the symmetric CSR of ``graph``'s
    distinct undirected pairs, the content :func:`~gnncore.partition.base.symmetric_graph`
    builds in memory: the graph's own files when they are that CSR (undirected,
    no relations), else one built by external sorting from ``edges_shuffled.npy``
    read a chunk at a time, in a temporary directory removed on exit."""
    m = graph.manifest
    if not m.directed and not m.num_relations:
        yield graph.path / "indptr.npy", graph.path / "indices.npy"
        return

    edges = graph_edge_file(graph)
    step = max(1, sort_budget // 64)
    with (
        scratch("gnncore-symmetric-", tmp_dir) as tmp,
        ExternalEdgeSorter(tmp, sort_budget, directed=False) as sorter,
    ):
        for begin in range(0, edges.rows, step):
            pairs = edges.read(begin, step)
            sorter.add(pairs[:, 0], pairs[:, 1])
        indptr, indices, _ = sorter.finish(m.num_nodes, tmp)
        yield indptr, indices


# Arrays for the partition directory ----------------------------------------------


def postprocess_arrays(
    graph: GraphDir, assignment: np.ndarray, parts: int
) -> dict[str, np.ndarray]:
    """The post-processing arrays of a partition directory, keyed by file stem:
    ``relabel_new_of_old``, ``relabel_old_of_new``, ``offsets`` and
    ``halo_<i>`` for every part ``i`` (all ``int64``)."""
    r = relabel(assignment, parts)
    out = {
        "relabel_new_of_old": r.new_of_old,
        "relabel_old_of_new": r.old_of_new,
        "offsets": r.offsets,
    }
    for i, halo in enumerate(halo_nodes(symmetric_graph(graph), assignment, parts)):
        out[f"halo_{i}"] = halo
    return out


__all__ = [
    "BalanceReport",
    "Relabeling",
    "balance_splits",
    "halo_nodes",
    "halo_sizes",
    "local_id",
    "part_of",
    "postprocess_arrays",
    "relabel",
    "split_bounds",
    "split_codes",
    "split_counts",
]
