"""The in-memory partition post-processing, kept as the reference of the
bounded-memory one (:mod:`gnncore.partition.postprocess_stream`).

This is the code ``gnncore partition`` ran before the post-processing was made
to stream: it loads every undirected edge as ``int64`` (the edge cut), the
symmetric CSR (halos, split balancing) and gathers the assignment over all
edges. Use it on small graphs only. :func:`write_partition_reference` writes
the partition directory exactly as that path did, so the tests can demand the
same files, byte for byte.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.partition.base import symmetric_graph
from gnncore.partition.metrics import PartitionMetrics, balance_ratio, max_part_size
from gnncore.partition.postprocess import (
    SPLIT_NAMES,
    BalanceReport,
    relabel,
    split_bounds,
    split_codes,
    split_counts,
)
from gnncore.partition.store import PARTITION_FORMAT, PARTITION_FORMAT_VERSION
from gnncore.store import GraphDir, atomic_directory
from gnncore.store.atomic import check_output_dir
from gnncore.store.graph_dir import SPLITS
from gnncore.store.manifest import MANIFEST_FILE, check_plain_name, sha256_of


def undirected_edges_reference(graph: GraphDir) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct undirected pair as ``int64`` (a full copy of the edges)."""
    pairs = np.asarray(graph.array("edges_shuffled"), dtype=np.int64)
    return pairs[:, 0], pairs[:, 1]


def edge_cut_reference(u: np.ndarray, v: np.ndarray, assignment: np.ndarray) -> int:
    return int(np.count_nonzero(assignment[u] != assignment[v]))


def partition_metrics_reference(
    graph: GraphDir, assignment: np.ndarray, parts: int
) -> PartitionMetrics:
    """:class:`PartitionMetrics` with the edges loaded whole."""
    n = graph.num_nodes
    u, v = undirected_edges_reference(graph)
    cut = edge_cut_reference(u, v, assignment)
    sizes = np.bincount(assignment, minlength=parts)
    counts_of, balance_of = {}, {}
    for split in SPLITS:
        if graph.has(split):
            name = split.removesuffix("_idx")
            counts = np.bincount(assignment[graph.array(split)], minlength=parts)
            counts_of[name] = counts.tolist()
            balance_of[name] = balance_ratio(counts)
    return PartitionMetrics(
        parts=parts,
        num_nodes=n,
        num_edges=int(len(u)),
        edge_cut=cut,
        edge_cut_fraction=cut / len(u) if len(u) else 0.0,
        part_sizes=sizes.tolist(),
        max_part_ratio=float(sizes.max() / (n / parts)) if n else 1.0,
        split_counts=counts_of,
        split_balance=balance_of,
    )


def balance_splits_reference(
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    tolerance: float = 0.10,
    imbalance: float = 0.03,
) -> BalanceReport:
    """Split balancing over the symmetric CSR in memory (``_C.balance_splits``),
    the cuts over the edges loaded whole."""
    n = graph.num_nodes
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    codes = split_codes(graph)
    totals = np.bincount(codes[codes >= 0], minlength=3)
    bounds = [split_bounds(int(t), parts, tolerance) for t in totals]
    sym = symmetric_graph(graph)
    options = _C.SplitBalanceOptions(
        parts=parts,
        lo=(bounds[0][0], bounds[1][0], bounds[2][0]),
        hi=(bounds[0][1], bounds[1][1], bounds[2][1]),
        capacity=max_part_size(n, parts, imbalance),
    )
    balanced = _C.balance_splits(np.asarray(sym.indptr), np.asarray(sym.indices), a, codes, options)
    new = balanced.assignment
    u, v = undirected_edges_reference(graph)
    return BalanceReport(
        assignment=new,
        moved=int(np.count_nonzero(new != a)),
        cut_before=edge_cut_reference(u, v, a),
        cut_after=edge_cut_reference(u, v, new),
        split_moves=balanced.split_moves,
        evictions=balanced.evictions,
        satisfied=balanced.satisfied,
        bounds={name: bounds[c] for c, name in enumerate(SPLIT_NAMES) if totals[c]},
        counts_before=split_counts(codes, a, parts),
        counts_after=split_counts(codes, new, parts),
    )


def postprocess_arrays_reference(
    graph: GraphDir, assignment: np.ndarray, parts: int
) -> dict[str, np.ndarray]:
    """Relabelling maps and halos, the halos over the symmetric CSR in memory."""
    r = relabel(assignment, parts)
    out = {
        "relabel_new_of_old": r.new_of_old,
        "relabel_old_of_new": r.old_of_new,
        "offsets": r.offsets,
    }
    sym = symmetric_graph(graph)
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    offsets, nodes = _C.halo_nodes(np.asarray(sym.indptr), np.asarray(sym.indices), a, parts)
    for i in range(parts):
        out[f"halo_{i}"] = nodes[offsets[i] : offsets[i + 1]]
    return out


def write_partition_dir_reference(
    out: str | os.PathLike[str],
    graph: GraphDir,
    assignment: np.ndarray,
    info: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> None:
    """Every array saved whole with ``np.save``, then the manifest."""
    check_output_dir(out, [graph.path], PARTITION_FORMAT, "partition")
    with atomic_directory(out) as tmp:
        np.save(tmp / "assignment.npy", np.ascontiguousarray(assignment, dtype=np.int64))
        files = {}
        for name, array in arrays.items():
            check_plain_name(f"{name}.npy", tmp)
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
            files[f"{name}.npy"] = {
                "bytes": (tmp / f"{name}.npy").stat().st_size,
                "sha256": sha256_of(tmp / f"{name}.npy"),
            }
        manifest = {
            "format": PARTITION_FORMAT,
            "format_version": PARTITION_FORMAT_VERSION,
            "graph": str(graph.path.absolute()),
            "graph_manifest_sha256": sha256_of(graph.path / MANIFEST_FILE),
            "num_nodes": graph.num_nodes,
            "assignment_bytes": (tmp / "assignment.npy").stat().st_size,
            "assignment_sha256": sha256_of(tmp / "assignment.npy"),
            "files": files,
            **info,
        }
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def write_partition_reference(
    out: str | os.PathLike[str],
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    info: dict[str, Any],
    balance: bool = True,
    tolerance: float = 0.10,
    imbalance: float = 0.03,
    balancing_seconds: float = 0.0,
) -> dict[str, Any]:
    """What ``gnncore partition`` did after the method's ``assign``: balance the
    splits (when ``balance`` and the graph has any), compute the metrics, the
    relabelling maps and halos, and write the directory with ``info`` (method,
    options, seconds, peak RSS, stage key) plus ``split_balancing``,
    ``metrics`` and ``halo_sizes``. ``balancing_seconds`` stands for the
    balancing's wall time (a measurement, not a result). Returns the manifest
    entries added to ``info``."""
    a = np.asarray(assignment, dtype=np.int64)
    balancing = None
    if balance and any(graph.has(s) for s in SPLITS):
        balanced = balance_splits_reference(graph, a, parts, tolerance, imbalance)
        a = balanced.assignment
        balancing = {
            "tolerance": tolerance,
            "moved": balanced.moved,
            "cut_before": balanced.cut_before,
            "cut_after": balanced.cut_after,
            "cut_cost": balanced.cut_cost,
            "satisfied": balanced.satisfied,
            "seconds": balancing_seconds,
        }
    metrics = partition_metrics_reference(graph, a, parts)
    arrays = postprocess_arrays_reference(graph, a, parts)
    halos = [len(arrays[f"halo_{i}"]) for i in range(parts)]
    added = {"metrics": metrics.to_dict(), "halo_sizes": halos, "split_balancing": balancing}
    write_partition_dir_reference(out, graph, a, {**info, **added}, arrays)
    return added


__all__ = [
    "balance_splits_reference",
    "edge_cut_reference",
    "partition_metrics_reference",
    "postprocess_arrays_reference",
    "undirected_edges_reference",
    "write_partition_dir_reference",
    "write_partition_reference",
]
