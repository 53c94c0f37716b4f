"""Deduplication and CSR construction in bounded memory, by external sorting.

:class:`ExternalEdgeSorter` takes the edges in chunks of any size. It keeps
them in a buffer sized from ``budget_bytes``; when the buffer is full the C++
core sorts it by ``(dst, src)``, drops repeats and writes it to disk as one
sorted *run* (``gnncore._C.write_run``). :meth:`ExternalEdgeSorter.finish`
merges the runs k ways (``gnncore._C.merge_runs_to_csr``: a heap over bounded
read buffers, sequential reads, GIL released), dropping the repeats across
runs, and streams ``indptr.npy`` and ``indices.npy`` out -- byte for byte the
files :meth:`gnncore.store.writer.GraphDirWriter.write_topology` writes for
the same edges after :func:`gnncore.io.canonical.canonicalize`:

* row ``v`` lists the sources of the edges into ``v``, sorted, without repeats;
* self-loops are dropped (and counted);
* undirected graphs store both directions (``(u, v)`` and ``(v, u)`` are one
  edge);
* ``indices`` is int32 when every node id fits, else int64
  (:func:`gnncore.store.writer.index_dtype`).

Memory stays within about ``budget_bytes`` whatever the edge count (besides the
caller's chunk); disk holds at most 16 bytes per buffered pair (twice that
while runs are being merged into fewer runs, when there are more than
``max_fan_in``). The runs live in a private directory under ``tmp_dir`` that
is removed by :meth:`~ExternalEdgeSorter.finish` and
:meth:`~ExternalEdgeSorter.close`, also on errors (use the sorter as a context
manager)::

    with ExternalEdgeSorter(tmp, 256 << 20, directed=False) as sorter:
        for src, dst in chunks:
            sorter.add(src, dst)
        indptr_path, indices_path, num_edges = sorter.finish(num_nodes, out_dir)
"""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from gnncore import _C
from gnncore.store.npy import index_dtype as default_index_dtype
from gnncore.store.scratch import scratch_dir
from gnncore.typing import require_csrc

PathArg = str | os.PathLike[str]

BYTES_PER_PAIR = 32
"""Budget bytes per buffered (src, dst) pair: the two int64 columns here and
the C++ sort's keys and scratch while a run is written."""

MIN_BUDGET_BYTES = 1024
MAX_MERGE_BUFFER = 8 << 20
"""Read buffer per run during the merge: the budget's share, at most 8 MiB."""
MIN_MERGE_BUFFER = 4096


def merge_buffer(budget_bytes: int, runs: int) -> int:
    """Read buffer per run when ``runs`` runs are merged within ``budget_bytes``."""
    return max(MIN_MERGE_BUFFER, min(MAX_MERGE_BUFFER, budget_bytes // (runs + 2)))


def merge_runs_down(
    runs: list[Path],
    target: int,
    max_fan_in: int,
    budget_bytes: int,
    next_path: Callable[[], Path],
    merge: Callable[[list[str], str, int], int] | None = None,
) -> list[Path]:
    """Merge groups of up to ``max_fan_in`` sorted run files (C++ k-way merge into
    ``next_path()``, the inputs removed as soon as the group is merged) until at
    most ``target`` runs are left; the runs left, in order. ``merge(paths, out,
    buffer_bytes)``: the merge of one group, ``gnncore._C.merge_runs`` (pair
    runs) by default; ``gnncore._C.merge_key_runs`` for key runs."""
    merge = _C.merge_runs if merge is None else merge
    while len(runs) > target:
        merged: list[Path] = []
        for i in range(0, len(runs), max_fan_in):
            group = runs[i : i + max_fan_in]
            if len(group) == 1:
                merged.append(group[0])
                continue
            out = next_path()
            buffer = merge_buffer(budget_bytes, len(group))
            merge([str(p) for p in group], str(out), buffer)
            for p in group:
                p.unlink()
            merged.append(out)
        runs = merged
    return runs


class ExternalEdgeSorter:
    """Collect edges, spill sorted runs, merge them into ``indptr``/``indices``.

    Args:
        tmp_dir (str or PathLike, optional): Where the private run directory is
            made (the system's temporary directory when ``None``); it needs
            room for 16 bytes per edge (32 for undirected graphs, which store
            both directions).
        budget_bytes (int): Memory for the edge buffer and, at the end, the
            merge's read buffers; at least 1024.
        directed (bool): Keep ``(u, v)`` and ``(v, u)`` apart; otherwise store
            every edge in both directions.
        max_fan_in (int): Most runs merged at once; more are first merged
            into fewer runs (a multi-pass merge), at least 2.
    """

    def __init__(
        self,
        tmp_dir: PathArg | None,
        budget_bytes: int,
        *,
        directed: bool,
        max_fan_in: int = 64,
    ) -> None:
        require_csrc()
        if int(budget_bytes) < MIN_BUDGET_BYTES:
            raise ValueError(
                f"budget_bytes must be at least {MIN_BUDGET_BYTES}, got {budget_bytes}"
            )
        if int(max_fan_in) < 2:
            raise ValueError(f"max_fan_in must be at least 2, got {max_fan_in}")
        self.budget_bytes = int(budget_bytes)
        self.directed = bool(directed)
        self.max_fan_in = int(max_fan_in)
        capacity = self.budget_bytes // BYTES_PER_PAIR
        capacity -= capacity % 2  # undirected edges take two slots
        self._capacity = max(capacity, 2)
        self._src: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._dst: np.ndarray | None = np.empty(self._capacity, dtype=np.int64)
        self._fill = 0
        self._dir = scratch_dir("gnncore-sort-", tmp_dir)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._dir, True)
        self._runs: list[Path] = []
        self._serial = 0
        self._max_id = -1
        self._closed = False
        self.runs_written = 0
        """Sorted runs spilled so far (the merge's intermediate runs not counted)."""
        self.num_input_edges = 0
        self.self_loops_removed = 0
        self.num_edges: int | None = None
        """Adjacency entries written by :meth:`finish` (``None`` before)."""

    # Context manager ---------------------------------------------------------------

    def __enter__(self) -> ExternalEdgeSorter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Delete the runs and free the buffer (idempotent)."""
        self._closed = True
        self._src = self._dst = None
        self._runs = []
        self._finalizer()

    @property
    def run_dir(self) -> Path:
        """The private directory holding the runs (gone after close)."""
        return self._dir

    @property
    def run_paths(self) -> list[Path]:
        """The run files on disk now."""
        return list(self._runs)

    @property
    def num_canonical_edges(self) -> int | None:
        """Distinct edges kept (each undirected edge once); ``None`` before finish."""
        if self.num_edges is None:
            return None
        return self.num_edges if self.directed else self.num_edges // 2

    @property
    def duplicates_removed(self) -> int | None:
        """Repeated edges dropped, as :func:`~gnncore.io.canonical.canonicalize` counts."""
        kept = self.num_canonical_edges
        if kept is None:
            return None
        return self.num_input_edges - self.self_loops_removed - kept

    # Collecting --------------------------------------------------------------------

    def add(self, src: ArrayLike, dst: ArrayLike) -> None:
        """Add the edges ``(src[i], dst[i])``: integer arrays of one length, ids >= 0."""
        if self._closed:
            raise RuntimeError("the sorter is closed")
        s_all = np.asarray(src)
        d_all = np.asarray(dst)
        if s_all.ndim != 1 or d_all.ndim != 1 or len(s_all) != len(d_all):
            raise ValueError(
                f"src and dst must be 1-D arrays of one length, got shapes "
                f"{s_all.shape} and {d_all.shape}"
            )
        if len(s_all) == 0:
            return
        for a in (s_all, d_all):
            if a.dtype.kind not in "iu":
                raise ValueError(f"node ids must be integers, got dtype {a.dtype}")
        low = min(int(s_all.min()), int(d_all.min()))
        if low < 0:
            raise ValueError(f"node ids must be non-negative, got {low}")
        self._max_id = max(self._max_id, int(s_all.max()), int(d_all.max()))
        s_all = s_all.astype(np.int64, copy=False)
        d_all = d_all.astype(np.int64, copy=False)
        self.num_input_edges += len(s_all)
        width = 1 if self.directed else 2
        start = 0
        while start < len(s_all):
            room = (self._capacity - self._fill) // width
            if room == 0:
                self._spill()
                continue
            s = s_all[start : start + room]
            d = d_all[start : start + room]
            start += len(s)
            keep = s != d
            kept = int(np.count_nonzero(keep))
            self.self_loops_removed += len(s) - kept
            if kept < len(s):
                s, d = s[keep], d[keep]
            del keep
            self._put(s, d)
            if not self.directed:
                self._put(d, s)
            if self._fill == self._capacity:
                self._spill()

    def _put(self, s: np.ndarray, d: np.ndarray) -> None:
        assert self._src is not None and self._dst is not None
        end = self._fill + len(s)
        self._src[self._fill : end] = s
        self._dst[self._fill : end] = d
        self._fill = end

    def _next_run_path(self) -> Path:
        path = self._dir / f"run-{self._serial:06d}.bin"
        self._serial += 1
        return path

    def _spill(self) -> None:
        if self._fill == 0 or self._src is None or self._dst is None:
            return
        path = self._next_run_path()
        _C.write_run(self._src[: self._fill], self._dst[: self._fill], str(path), "dst_src")
        self._runs.append(path)
        self.runs_written += 1
        self._fill = 0

    # Merging -----------------------------------------------------------------------

    def _reduce_runs(self) -> None:
        """Merge groups of runs into single runs until at most ``max_fan_in`` are left."""
        self._runs = merge_runs_down(
            self._runs, self.max_fan_in, self.max_fan_in, self.budget_bytes, self._next_run_path
        )

    def finish(
        self, num_nodes: int, out_dir: PathArg, *, index_dtype: DTypeLike | None = None
    ) -> tuple[Path, Path, int]:
        """Merge everything into ``out_dir/indptr.npy`` and ``out_dir/indices.npy``.

        Args:
            num_nodes (int): The node count; every id added must be below it.
            out_dir (str or PathLike): An existing directory (e.g. the graph
                directory being written); existing files of those names are
                replaced.
            index_dtype: ``indices``'s dtype, int32 or int64; by default
                :func:`gnncore.store.writer.index_dtype` of ``num_nodes``.

        Returns:
            ``(indptr_path, indices_path, num_edges)``: ``num_edges`` adjacency
            entries (twice the distinct undirected edges). The runs are
            deleted, on success and on error; the sorter is closed.
        """
        if self._closed:
            raise RuntimeError("the sorter is closed")
        try:
            num_nodes = int(num_nodes)
            if num_nodes < 0:
                raise ValueError(f"num_nodes must be non-negative, got {num_nodes}")
            if self._max_id >= num_nodes:
                raise ValueError(f"node id {self._max_id} is outside [0, {num_nodes})")
            dtype = np.dtype(default_index_dtype(num_nodes) if index_dtype is None else index_dtype)
            self._spill()
            self._src = self._dst = None
            self._reduce_runs()
            out = Path(out_dir)
            indptr_path, indices_path = out / "indptr.npy", out / "indices.npy"
            num_edges = _C.merge_runs_to_csr(
                [str(p) for p in self._runs],
                num_nodes,
                str(indptr_path),
                str(indices_path),
                dtype,
                merge_buffer(self.budget_bytes, len(self._runs)),
            )
            self.num_edges = int(num_edges)
            return indptr_path, indices_path, self.num_edges
        finally:
            self.close()
