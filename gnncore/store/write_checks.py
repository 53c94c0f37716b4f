"""Content checks of a graph directory's arrays done while they are written, from
the buffers the writer holds, so that the final validation
(:meth:`gnncore.store.graph_dir.GraphDir.validate` in
:func:`gnncore.store.writer.create_graph_dir`) need not read them back.

Each check is the same test :meth:`GraphDir.validate` makes of the file
(``indptr.npy`` 0 first, never decreasing, ending at ``len(indices)``;
``indices.npy`` rows sorted without repeats of node ids in range;
``eid.npy`` rows of ``edges.parquet``; ``edges_shuffled.npy`` pairs ``u < v`` of
node ids), made on every entry written. A check that passes is recorded as a
:class:`WrittenCheck` with the bounds it used and the entries it saw;
validation skips re-reading a file only when those match the manifest. A
check that fails records nothing: validation then reads the file and raises
its usual :class:`~gnncore.errors.InputError` naming the file and row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnncore import _C


@dataclass(frozen=True)
class WrittenCheck:
    """A passed content check of ``file``, made by its writer on every entry it wrote.

    ``count`` is the entries (``edges_shuffled.npy``: pairs) checked; ``bound``
    the bound they were checked against: ``indptr.npy`` its last offset,
    ``indices.npy`` and ``edges_shuffled.npy`` the node count, ``eid.npy`` the
    canonical edge count; ``strict`` whether ``indices.npy``'s rows were found
    without repeats (not only sorted)."""

    file: str
    count: int
    bound: int
    strict: bool = True


def indptr_ok(indptr: np.ndarray) -> bool:
    """Whether CSR offsets start at 0 and never decrease (the last one is
    ``len(indices)`` when it equals the recorded bound: :func:`indptr_check`)."""
    if len(indptr) == 0 or indptr[0] != 0:
        return False
    return bool(np.all(indptr[1:] >= indptr[:-1]))


def pairs_ok(block: np.ndarray, num_nodes: int) -> bool:
    """Whether every row of ``[k, 2]`` ``block`` is a pair ``u < v`` of node ids in
    ``[0, num_nodes)`` (``edges_shuffled.npy``'s rows)."""
    flat = np.ascontiguousarray(block).reshape(-1)
    if flat.dtype not in (np.int32, np.int64) or len(flat) % 2:
        return False
    return bool(_C.pairs_in_order(flat, num_nodes))  # one pass, not four


class CsrChecks:
    """The checks of ``indptr``, ``indices`` and ``eid``, fed the row ranges in
    order as they are written (:meth:`rows`, from any one thread at a time);
    :meth:`results` gives the :class:`WrittenCheck` records when every row was
    seen and passed, else none."""

    def __init__(self, indptr: np.ndarray, num_nodes: int, num_canonical: int) -> None:
        self.indptr = indptr
        self.num_nodes = int(num_nodes)
        self.num_canonical = int(num_canonical)
        self.ok = len(indptr) == self.num_nodes + 1 and indptr_ok(indptr)
        self.row = 0
        self.entries = 0

    def rows(self, row: int, end: int, indices: np.ndarray, eid: np.ndarray) -> None:
        """Check rows ``[row, end)``: ``indices`` and ``eid`` hold their entries."""
        if not self.ok:
            return
        offsets = self.indptr[row : end + 1]
        size = int(offsets[-1] - offsets[0]) if len(offsets) else -1
        if row != self.row or end < row or len(indices) != size or len(eid) != size:
            self.ok = False
            return
        bad = _C.find_invalid_csr_block(offsets, indices, row, self.num_nodes, True)
        if bad >= 0 or not _C.all_in_range(eid, 0, self.num_canonical):
            self.ok = False
            return
        self.row, self.entries = end, self.entries + size

    def results(self) -> list[WrittenCheck]:
        """The passed checks of the three files, or ``[]``."""
        if not self.ok or self.row != self.num_nodes or self.entries != int(self.indptr[-1]):
            return []
        e = self.entries
        return [
            WrittenCheck("indptr.npy", len(self.indptr), e),
            WrittenCheck("indices.npy", e, self.num_nodes),
            WrittenCheck("eid.npy", e, self.num_canonical),
        ]
