"""Writing per-rank data from a graph directory and one of its partitions.

See :mod:`gnncore.distributed.rank_data` for the layout. The writer takes the
relabelling (``relabel_old_of_new``, ``relabel_new_of_old``, ``offsets``) and
the 1-hop halos (``halo_<i>``) from the partition directory and walks the
partitions one at a time: a partition's adjacency rows, features and labels
are gathered from the graph's memory maps, so the writer holds one
partition's data (plus the ``N``-sized maps, memory-mapped) at a time, never
the whole feature matrix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.distributed.link_data import LINK_FORMAT_VERSION, LinkArrays
from gnncore.distributed.rank_data import (
    RANK_DATA_FORMAT,
    RANK_DATA_FORMAT_VERSION,
    SPLITS,
    RankData,
    body_sha256,
    rank_dir_name,
)
from gnncore.errors import InputError
from gnncore.partition.store import PartitionDir, partition_stage_inputs
from gnncore.plan.replication import ReplicationPlan, replication_problems
from gnncore.progress import stage
from gnncore.store import GraphDir, atomic_directory
from gnncore.store.atomic import check_output_dir
from gnncore.store.manifest import MANIFEST_FILE, npy_entry, read_json_manifest, sha256_of
from gnncore.store.versioning import stage_key

#: Feature rows copied per block.
_ROWS = 1 << 16


def rank_data_stage_key(
    graph: GraphDir,
    partition: PartitionDir,
    replication: ReplicationPlan | None = None,
    link: bool = False,
) -> str:
    """The stage key of the rank data of ``graph`` and ``partition`` (and of the
    HDR ``replication`` plan, when given; and of the link files with ``link``):
    the format version and the manifests' sha256."""
    inputs = partition_stage_inputs(graph, partition)
    if replication is not None:  # absent without a plan, so earlier keys stay valid
        inputs["replication"] = sha256_of(replication.plan.path / MANIFEST_FILE)
    if link:  # likewise
        inputs["link_format_version"] = str(LINK_FORMAT_VERSION)
    return stage_key("rank_data", {"format_version": RANK_DATA_FORMAT_VERSION}, inputs)


def _open_replication(
    path: str | os.PathLike[str], graph: GraphDir, partition: PartitionDir
) -> ReplicationPlan:
    """The replication plan at ``path``, checked to be a plan of ``graph`` with
    ``partition``'s number of parts."""
    plan = ReplicationPlan.open(path, graph)
    problems = replication_problems(plan, graph)
    if plan.parts != partition.parts:
        problems.append(f"it plans {plan.parts} parts, the partition has {partition.parts}")
    if problems:
        raise InputError(f"not a replication plan for this rank data: {problems[0]}", Path(path))
    return plan


def write_rank_data(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    reuse: bool = True,
    replication: str | os.PathLike[str] | None = None,
    link: bool = False,
) -> Path:
    """Write the per-rank data of ``graph_dir`` split by ``partition_dir`` into
    ``out_dir`` (one ``rank_<i>/`` per partition; written into a temporary
    sibling, then renamed into place). Returns ``out_dir``.

    Args:
        graph_dir: A graph directory.
        partition_dir: A partition directory of that graph, with its relabelling
            maps and halos (as ``gnncore partition`` writes them).
        out_dir: The rank-data directory to create or replace.
        reuse (bool): When ``out_dir`` already holds the rank data of this graph
            and partition (same stage key) and it opens cleanly, keep it as it
            is. (default: ``True``)
        replication: An HDR replication plan of the graph (``gnncore plan
            replication``) with as many parts: every rank also gets the
            features and labels of the plan's replicated nodes it does not
            own (``replica_*.npy``), served locally by the feature store.
        link (bool): Also write each rank's link-prediction files
            (:mod:`gnncore.distributed.link_data`: its edge splits, the
            message-passing graph of its core, the known answers it filters).

    Raises:
        InputError: The partition is not of this graph or lacks its maps, the
            maps disagree with the assignment, or ``out_dir`` would destroy an
            input or other data; the message names the file.
    """
    graph = GraphDir.open(graph_dir)
    partition = PartitionDir.open(partition_dir, graph)
    check_output_dir(out_dir, [graph.path, partition.path], RANK_DATA_FORMAT, "rank-data directory")
    plan = None if replication is None else _open_replication(replication, graph, partition)
    key = rank_data_stage_key(graph, partition, plan, link)
    if reuse and _reusable(out_dir, key, partition.parts):
        stage(f"reused {out_dir} (stage key {key})")
        return Path(out_dir)
    maps = _partition_maps(partition, graph.num_nodes)
    replicated = (
        None
        if plan is None
        else np.sort(np.asarray(maps["relabel_new_of_old"][np.asarray(plan.replicated())]))
    )
    links = LinkArrays.of(graph, maps["relabel_new_of_old"]) if link else None
    with atomic_directory(out_dir) as tmp:
        ranks = []
        for part in range(partition.parts):
            stage(f"rank {part} of {partition.parts}")
            folder = tmp / rank_dir_name(part)
            ranks.append(_write_rank(graph, partition, maps, part, folder))
            if replicated is not None:
                _write_replica(graph, maps, part, replicated, folder, ranks[-1])
            if links is not None:
                files = ranks[-1]["files"]
                lo, hi = int(maps["offsets"][part]), int(maps["offsets"][part + 1])
                links.write_rank(
                    lo, hi, folder, lambda f, name, a, files=files: _save(f, name, a, files)
                )
        m = graph.manifest
        hashes = partition_stage_inputs(graph, partition)
        info: dict[str, Any] = {
            "format": RANK_DATA_FORMAT,
            "format_version": RANK_DATA_FORMAT_VERSION,
            "graph_name": m.name,
            "graph_manifest_sha256": hashes["graph"],
            "partition_manifest_sha256": hashes["partition"],
            "partition_method": partition.method,
            "stage_key": key,
            "num_nodes": m.num_nodes,
            "num_edges": m.num_edges,
            "directed": m.directed,
            "num_features": m.num_features,
            "num_classes": m.num_classes,
            "parts": partition.parts,
            "offsets": maps["offsets"].tolist(),
            "ranks": ranks,
            **(
                {
                    "replication_plan_sha256": sha256_of(plan.plan.path / MANIFEST_FILE),
                    "replicated_nodes": len(replicated),
                }
                if plan is not None and replicated is not None
                else {}
            ),
            **({"link": links.info} if links is not None else {}),
        }
        info["body_sha256"] = body_sha256(info)
        (tmp / MANIFEST_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return Path(out_dir)


#: Bytes the writer holds per in-edge of the rank it writes: the row, position,
#: source and edge-id arrays of :func:`_in_edges`, its sort order and the two
#: sorted copies, all int64 and alive together at its end.
EDGE_BYTES = 7 * 8
#: Bytes per core node: its original id, start, length, CSR offset and label
#: (int64), the split masks and room for the halo check's temporaries.
NODE_BYTES = 6 * 8
#: Nodes of the degree sums per read in :func:`rank_write_bytes`.
_DEGREE_CHUNK = 1 << 22


def rank_write_bytes(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    replication: str | os.PathLike[str] | None = None,
) -> int:
    """Bytes :func:`write_rank_data` holds at its peak beyond the process's own,
    estimated from sizes alone: its largest rank's in-edges (:data:`EDGE_BYTES`
    each) and core nodes (:data:`NODE_BYTES` each), one block of feature rows
    and, with ``replication``, every replicated node's feature row, label and
    ids. The graph, the maps and the features are memory-mapped and read, not
    held: their pages are the kernel's to drop under a memory limit, so they
    are not counted. Reads the CSR offsets and the assignment in chunks of
    :data:`_DEGREE_CHUNK` nodes (the edges each rank receives); link files
    (``link=True``) are not counted."""
    graph = GraphDir.open(graph_dir)
    partition = PartitionDir.open(partition_dir, graph)
    parts, n = partition.parts, graph.num_nodes
    assignment, indptr = partition.assignment(), graph.indptr
    edges = np.zeros(parts, dtype=np.int64)
    for lo in range(0, n, _DEGREE_CHUNK):
        hi = min(lo + _DEGREE_CHUNK, n)
        degree = np.diff(np.asarray(indptr[lo : hi + 1], dtype=np.int64))
        edges += np.bincount(np.asarray(assignment[lo:hi]), weights=degree, minlength=parts).astype(
            np.int64
        )
    cores = np.bincount(np.asarray(assignment), minlength=parts)
    row_bytes = 4 * graph.manifest.num_features
    needed = int(np.max(EDGE_BYTES * edges + NODE_BYTES * cores, initial=0))
    needed += min(int(np.max(cores, initial=0)), _ROWS) * (row_bytes + 8)
    if replication is not None:
        replicas = len(_open_replication(replication, graph, partition).replicated())
        needed += replicas * (row_bytes + 4 * 8)
    return needed


def _reusable(out_dir: str | os.PathLike[str], key: str, parts: int) -> bool:
    """Whether ``out_dir`` holds complete rank data with stage key ``key``."""
    try:
        info, _ = read_json_manifest(
            Path(out_dir), RANK_DATA_FORMAT, RANK_DATA_FORMAT_VERSION, "rank-data directory"
        )
        if info.get("stage_key") != key:
            return False
        for rank in range(parts):
            RankData.open(out_dir, rank, verify=True)
    except (InputError, OSError, KeyError, TypeError, ValueError):
        return False
    return True


def _partition_maps(partition: PartitionDir, num_nodes: int) -> dict[str, np.ndarray]:
    """The partition directory's relabelling maps, checked against its assignment."""
    file = partition.path / MANIFEST_FILE
    try:
        maps = {
            name: partition.array(name)
            for name in ("offsets", "relabel_old_of_new", "relabel_new_of_old")
        }
        for part in range(partition.parts):
            partition.array(f"halo_{part}")
    except KeyError as exc:
        raise InputError(
            f"partition directory lacks its relabelling maps or halos ({exc.args[0]}); "
            "re-run gnncore partition",
            file,
        ) from exc
    offsets = np.asarray(maps["offsets"], dtype=np.int64)
    counts = np.bincount(partition.assignment(), minlength=partition.parts)
    if offsets.shape != (partition.parts + 1,) or np.any(np.diff(offsets) != counts):
        raise InputError("offsets disagree with the assignment", partition.path / "offsets.npy")
    for name in ("relabel_old_of_new", "relabel_new_of_old"):
        if maps[name].shape != (num_nodes,) or maps[name].dtype != np.int64:
            raise InputError(f"is not int64[{num_nodes}]", partition.path / f"{name}.npy")
    maps["offsets"] = offsets
    return maps


def _save(folder: Path, name: str, array: np.ndarray, files: dict[str, Any]) -> None:
    np.save(folder / f"{name}.npy", array)
    files[f"{name}.npy"] = npy_entry(folder / f"{name}.npy")


def _write_rank(
    graph: GraphDir,
    partition: PartitionDir,
    maps: dict[str, np.ndarray],
    part: int,
    folder: Path,
) -> dict[str, Any]:
    """Write partition ``part``'s folder; returns its manifest entry."""
    folder.mkdir()
    offsets, new_of_old = maps["offsets"], maps["relabel_new_of_old"]
    lo, hi = int(offsets[part]), int(offsets[part + 1])
    core_old = np.asarray(maps["relabel_old_of_new"][lo:hi], dtype=np.int64)
    if np.any(np.asarray(partition.assignment()[core_old]) != part) or np.any(
        np.asarray(new_of_old[core_old]) != np.arange(lo, hi)
    ):
        raise InputError(
            f"the relabelling maps do not list partition {part}'s nodes as its range",
            partition.path / "relabel_old_of_new.npy",
        )
    files: dict[str, Any] = {}
    _save(folder, "original_ids", core_old, files)
    indptr, sources, edge_ids = _in_edges(graph, core_old, new_of_old)
    _save(folder, "indptr", indptr, files)
    _save(folder, "indices", sources, files)
    _save(folder, "edge_ids", edge_ids, files)
    halo = np.sort(np.asarray(new_of_old[np.asarray(partition.array(f"halo_{part}"))]))
    outside = np.unique(sources[(sources < lo) | (sources >= hi)])
    if not np.all(np.isin(outside, halo, assume_unique=True)) or np.any((halo >= lo) & (halo < hi)):
        raise InputError(
            f"halo of partition {part} disagrees with the graph's edges",
            partition.path / f"halo_{part}.npy",
        )
    _save(folder, "halo", halo.astype(np.int64), files)
    x = graph.features()
    if x is not None:
        _copy_rows(x, core_old, folder / "features.npy")
        files["features.npy"] = npy_entry(folder / "features.npy")
    labels = graph.labels()
    if labels is not None:
        _save(folder, "labels", np.asarray(labels[core_old], dtype=np.int64), files)
    for split in SPLITS:
        if graph.has(f"{split}_idx"):
            ids = np.asarray(new_of_old[graph.split(split)], dtype=np.int64)
            mask = np.zeros(hi - lo, dtype=bool)
            mask[ids[(ids >= lo) & (ids < hi)] - lo] = True
            _save(folder, f"{split}_mask", mask, files)
    return {
        "num_core": hi - lo,
        "num_edges": int(len(sources)),
        "num_halo": int(len(halo)),
        "files": files,
    }


def _write_replica(
    graph: GraphDir,
    maps: dict[str, np.ndarray],
    part: int,
    replicated: np.ndarray,
    folder: Path,
    entry: dict[str, Any],
) -> None:
    """Add the replicated nodes partition ``part`` does not own (``replicated``:
    sorted global ids) and their feature and label rows to its folder and entry."""
    lo, hi = int(maps["offsets"][part]), int(maps["offsets"][part + 1])
    ids = replicated[(replicated < lo) | (replicated >= hi)]
    old = np.asarray(maps["relabel_old_of_new"][ids], dtype=np.int64)
    files = entry["files"]
    _save(folder, "replica_ids", ids.astype(np.int64), files)
    order = np.argsort(old)  # rows read in ascending original id, written back in id order
    x = graph.features()
    if x is not None:
        rows = np.empty((len(ids), *x.shape[1:]), dtype=np.float32)
        rows[order] = x[old[order]]
        _save(folder, "replica_features", rows, files)
    labels = graph.labels()
    if labels is not None:
        _save(folder, "replica_labels", np.asarray(labels[old], dtype=np.int64), files)
    entry["num_replica"] = int(len(ids))


def _in_edges(
    graph: GraphDir, core_old: np.ndarray, new_of_old: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, sources, edge_ids)`` of the in-edges of ``core_old`` (original
    ids, ascending): sources in new ids, sorted within each row."""
    g_indptr = graph.indptr
    starts = np.asarray(g_indptr[core_old], dtype=np.int64)
    lengths = np.asarray(g_indptr[core_old + 1], dtype=np.int64) - starts
    indptr = np.zeros(len(core_old) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    row = np.repeat(np.arange(len(core_old), dtype=np.int64), lengths)
    positions = starts[row] + (np.arange(indptr[-1], dtype=np.int64) - indptr[row])
    sources = np.asarray(new_of_old[np.asarray(graph.indices[positions])], dtype=np.int64)
    edge_ids = np.asarray(graph.array("eid")[positions], dtype=np.int64)
    order = np.lexsort((sources, row))
    return indptr, sources[order], edge_ids[order]


def _copy_rows(x: np.ndarray, rows: np.ndarray, out: Path) -> None:
    """``x[rows]`` (``rows`` ascending) written to ``out`` block by block."""
    target = np.lib.format.open_memmap(
        out, mode="w+", dtype=np.float32, shape=(len(rows), *x.shape[1:])
    )
    for start in range(0, len(rows), _ROWS):
        block = rows[start : start + _ROWS]
        target[start : start + len(block)] = x[block]
    target.flush()
    del target
