"""The part every ingester shares: id remapping, canonical edges, writing.

An ingester parses its input into integer ``src``/``dst`` arrays (remapping raw
ids with :func:`remap_int_ids` / :func:`remap_str_ids` where the format has no
ids of its own), calls :func:`canonicalize` and hands the result to
:func:`write_graph`, which writes everything through
:func:`gnncore.store.create_graph_dir` (so a failure leaves no output behind)
and returns the :class:`~gnncore.io.report.IngestReport`.

Canonical edges:

* undirected (the default): each edge becomes ``(min, max)``, which is the
  symmetrisation -- ``(u, v)`` and ``(v, u)`` are one edge, stored in both
  directions in the adjacency; repeats are dropped and counted;
* directed: repeated ``(src, dst)`` (``(src, rel, dst)`` for relational graphs)
  rows are dropped and counted;
* self-loops (``src == dst``) are dropped and counted in both cases (the graph
  format stores none; GNN layers add their own).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from gnncore.io.report import IngestReport
from gnncore.lazy import lazy_module
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter, create_graph_dir

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

INT64_MAX = np.iinfo(np.int64).max


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for 1-D integers by sorting in place (``values`` is consumed).

    NumPy 2.x's ``np.unique`` hashes, which is an order of magnitude slower
    than its SIMD sort on tens of millions of int64 keys.
    """
    values.sort()
    if len(values) < 2:
        return values
    first = np.empty(len(values), dtype=bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]


# Id remapping --------------------------------------------------------------------


def remap_int_ids(
    src: np.ndarray, dst: np.ndarray, extra: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map non-negative integer ids onto ``0..N-1`` in sorted raw-id order.

    Only ids that occur in ``src``, ``dst`` or ``extra`` (nodes without edges,
    e.g. from a node table) get a node (an id seen only in a self-loop still
    does). Dense id ranges use a lookup table (linear time); sparse ones (ids
    far larger than the edge count) sort.

    Returns:
        ``(src, dst, raw_ids)``: the remapped endpoints and ``raw_ids[node_id]``.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    more = np.zeros(0, dtype=np.int64) if extra is None else np.asarray(extra, dtype=np.int64)
    if len(src) == 0 and len(more) == 0:
        return src.astype(np.int64), dst.astype(np.int64), np.zeros(0, dtype=np.int64)
    top = max((int(a.max()) for a in (src, dst, more) if len(a)), default=0)
    if top < max(8 * (len(src) + len(more)), 1 << 22):
        present = np.zeros(top + 1, dtype=bool)
        present[src] = True
        present[dst] = True
        present[more] = True
        raw_ids = np.flatnonzero(present).astype(np.int64)
        lut_dtype = np.int32 if len(raw_ids) <= np.iinfo(np.int32).max else np.int64
        lut: np.ndarray = np.cumsum(present, dtype=lut_dtype)
        lut -= 1
        del present
        return lut[src], lut[dst], raw_ids
    raw_ids = sorted_unique(np.concatenate([src, dst, more]).astype(np.int64, copy=False))
    return np.searchsorted(raw_ids, src), np.searchsorted(raw_ids, dst), raw_ids


def remap_str_ids(
    src: pl.Series, dst: pl.Series, extra: pl.Series | None = None
) -> tuple[np.ndarray, np.ndarray, pl.Series]:
    """Map string ids onto ``0..N-1`` in sorted (lexicographic) raw-id order
    (``extra``: ids of nodes that may have no edge).

    Returns:
        ``(src, dst, raw_ids)``; ``raw_ids`` is a Polars string Series.
    """
    parts = [src, dst] if extra is None else [src, dst, extra.rename(src.name)]
    raw_ids = pl.concat(parts).unique().sort()
    codes = pl.int_range(len(raw_ids), eager=True, dtype=pl.Int64)
    new_src = src.replace_strict(raw_ids, codes, return_dtype=pl.Int64).to_numpy()
    new_dst = dst.replace_strict(raw_ids, codes, return_dtype=pl.Int64).to_numpy()
    return new_src, new_dst, raw_ids


@overload
def node_id_table(raw_ids: np.ndarray) -> pl.DataFrame | dict[str, np.ndarray]: ...
@overload
def node_id_table(raw_ids: pl.Series) -> pl.DataFrame: ...
def node_id_table(raw_ids: np.ndarray | pl.Series) -> pl.DataFrame | dict[str, np.ndarray]:
    """The ``node_ids`` table: ``raw_id`` (int64 or string), ``node_id`` (int64).
    Integer ids in a NumPy array give the columns as arrays, which
    :meth:`~gnncore.store.writer.GraphDirWriter.write_table` delta-codes (the
    writer of ``edges.parquet``: no Polars needed); any other ids (a Polars
    Series, strings in a NumPy array), a Polars frame."""
    if isinstance(raw_ids, np.ndarray) and np.issubdtype(raw_ids.dtype, np.integer):
        ids = raw_ids.astype(np.int64, copy=False)
        return {"raw_id": ids, "node_id": np.arange(len(ids), dtype=np.int64)}
    raw = raw_ids if isinstance(raw_ids, pl.Series) else pl.Series(raw_ids)
    return pl.DataFrame(
        {
            "raw_id": raw.rename("raw_id"),
            "node_id": pl.int_range(len(raw), eager=True, dtype=pl.Int64),
        }
    )


# Canonical edges -----------------------------------------------------------------


@dataclass(frozen=True)
class CanonicalEdges:
    """Deduplicated edges without self-loops, sorted by ``(src, rel, dst)``."""

    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray | None
    num_input_edges: int
    self_loops_removed: int
    duplicates_removed: int

    def __len__(self) -> int:
        return len(self.src)


def canonicalize(
    src: np.ndarray,
    dst: np.ndarray,
    num_nodes: int,
    *,
    directed: bool,
    rel: np.ndarray | None = None,
    num_relations: int = 0,
) -> CanonicalEdges:
    """Drop self-loops and duplicates (see the module docstring); count both.

    Args:
        src, dst (np.ndarray): Endpoint ids in ``[0, num_nodes)``.
        num_nodes (int): The node count (used to pack edges into sort keys).
        directed (bool): Keep ``(u, v)`` and ``(v, u)`` apart; otherwise
            canonicalise each edge to ``(min, max)``.
        rel (np.ndarray, optional): Relation ids in ``[0, num_relations)``;
            edges with different relations are different edges.
        num_relations (int): The relation count when ``rel`` is given.
    """
    stage("canonical edges")
    num_input = len(src)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if directed:
        lo, hi = src, dst
    else:
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    loops = lo == hi
    num_loops = int(np.count_nonzero(loops))
    if num_loops:
        keep = ~loops
        lo, hi = lo[keep], hi[keep]
        rel = None if rel is None else np.asarray(rel)[keep]
    del loops
    n = max(int(num_nodes), 1)
    r = max(int(num_relations), 1) if rel is not None else 1
    if n * n * r <= INT64_MAX:
        key = lo * r  # a new array: the inputs are left alone
        if rel is not None:
            key += np.asarray(rel, dtype=np.int64)
        key *= n
        key += hi
        del lo, hi
        key = sorted_unique(key)
        out_dst = key % n
        key //= n
        out_rel = None if rel is None else (key % r).astype(np.int32)
        out_src = key // r if rel is not None else key
    else:  # keys would overflow int64: sort the columns instead
        rel64 = None if rel is None else np.asarray(rel, dtype=np.int64)
        order = np.lexsort((hi, lo) if rel64 is None else (hi, rel64, lo))
        lo, hi = lo[order], hi[order]
        rel64 = None if rel64 is None else rel64[order]
        first = np.ones(len(lo), dtype=bool)
        first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
        if rel64 is not None:
            first[1:] |= rel64[1:] != rel64[:-1]
        out_src, out_dst = lo[first], hi[first]
        out_rel = None if rel64 is None else rel64[first].astype(np.int32)
    return CanonicalEdges(
        src=out_src,
        dst=out_dst,
        rel=out_rel,
        num_input_edges=int(num_input),
        self_loops_removed=num_loops,
        duplicates_removed=int(num_input - num_loops - len(out_src)),
    )


# Writing -------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """JSON-ready scalars (numpy ints/floats become Python ones)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def write_graph(
    out_dir: str | os.PathLike[str],
    *,
    fmt: str,
    source: str | os.PathLike[str],
    name: str,
    num_nodes: int,
    edges: CanonicalEdges,
    directed: bool,
    seed: int = 0,
    num_relations: int = 0,
    tables: Mapping[str, pl.DataFrame | Mapping[str, np.ndarray]] | None = None,
    before: Callable[[GraphDirWriter], None] | None = None,
    details: Mapping[str, Any] | None = None,
    started: float | None = None,
) -> IngestReport:
    """Write one ingested graph directory atomically and report on it.

    Args:
        out_dir: The graph directory to create or replace.
        fmt, source, name: Recorded in the report and the manifest.
        num_nodes (int): Node count.
        edges (CanonicalEdges): From :func:`canonicalize`.
        directed (bool): Store the edges as directed.
        seed (int): Seed of the shuffled edge stream.
        num_relations (int): Relation types (relational graphs).
        tables (dict): Extra Parquet tables (``node_ids``, ``relations``).
        before (callable): Called with the writer before the topology is
            written (features, labels, splits, extra arrays); it may set
            ``num_features`` / ``num_classes`` and add ``stats``. Raising in it
            removes the partial output.
        details (dict): Format-specific facts for the report and ``stats``.
        started (float): ``time.perf_counter()`` when the ingestion began.
    """
    started = time.perf_counter() if started is None else started
    plain_details: dict[str, Any] = plain(dict(details or {}))
    counts = {
        "format": fmt,
        "source": str(Path(source).absolute()),
        "num_input_edges": edges.num_input_edges,
        "self_loops_removed": edges.self_loops_removed,
        "duplicates_removed": edges.duplicates_removed,
    }
    with create_graph_dir(out_dir, name) as writer:
        if before is not None:
            stage("node data")
            before(writer)
        stage("writing CSR")
        writer.write_topology(
            int(num_nodes),
            edges.src,
            edges.dst,
            directed=directed,
            rel=edges.rel,
            num_relations=num_relations,
            shuffle_seed=seed,
        )
        for table, frame in (tables or {}).items():
            writer.write_table(table, frame)
        writer.stats.update(plain_details)
        writer.stats.update(counts)
        stage("checksums and manifest")
    return IngestReport(
        format=fmt,
        source=str(source),
        out_dir=str(out_dir),
        num_nodes=int(writer.num_nodes or 0),
        num_input_edges=edges.num_input_edges,
        self_loops_removed=edges.self_loops_removed,
        duplicates_removed=edges.duplicates_removed,
        num_canonical_edges=writer.num_canonical_edges,
        num_edges=writer.num_edges,
        directed=writer.directed,
        num_features=writer.num_features,
        num_classes=writer.num_classes,
        num_relations=writer.num_relations,
        seconds=round(time.perf_counter() - started, 3),
        details=plain_details,
    )
