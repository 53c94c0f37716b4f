"""The partitioned store: a graph laid out for out-of-core training (ALGORITHMS.md §6–7).

Written from a graph directory and any of its partition directories:

* nodes are relabelled so that each partition is one contiguous id range, in
  partition order and, within a partition, in original id order
  (``node_order.npy``: new → old; ``node_map.npy``: old → new;
  ``partition_offsets.npy``: ``p + 1`` range bounds);
* ``features.npy`` holds the features in the new order, so a partition's
  features are one contiguous block of rows; ``labels.npy`` and the splits
  (``train_idx.npy``, ...) use the new ids;
* ``edges.npy`` (int64 ``[E, 2]``: ``src``, ``dst`` in new ids) holds the graph's
  stored (directed) edges grouped into ``p²`` buckets ``(i, j)`` (source in
  partition ``i``, destination in ``j``), destination-major: bucket ``(i, j)``
  is the ``j·p + i``-th, each sorted by ``(dst, src)``; ``bucket_offsets.npy``
  (``p² + 1``) bounds them. So the in-edges of partition ``j`` (the buckets
  ``(0, j) … (p-1, j)``) are one contiguous range: HierBatching reads a
  partition's neighbour lists in one sequential read, the partition buffer
  reads bucket by bucket;
* the static set (HierBatching's static cache, the thesis' high-degree nodes):
  ``static_nodes.npy`` (the ``round(static_fraction·N)`` nodes of highest
  in-degree, new ids, ascending), ``static_features.npy`` and a contiguous copy
  of their in-neighbour lists (``static_indptr.npy``, ``static_indices.npy``).

``manifest.json`` records every file's dtype, shape, size and sha256, the
partition bounds and the sha256 of the graph's and the partition's manifests,
and the stage key (:func:`store_stage_key`: those two hashes, the static
fraction and the format version). The versioned pipeline writes a store to
:func:`store_dir` with ``reuse=True``: the same settings on the same graph and
partition find their store complete and reuse it instead of rewriting it.
The directory is written into a temporary sibling and renamed into place.
It is written within a memory budget (:func:`build_partitioned_store`;
:mod:`gnncore.outofcore.store_budget` sizes the buffers, refuses too small a
budget or disk): the features and the edges pass through bounded buffers in
sequential reads (:mod:`gnncore.outofcore.store_io`), never mapped whole.
:meth:`PartitionedStore.open` checks names, sizes and shapes;
:meth:`PartitionedStore.verify` checks contents (checksums), naming the file.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.errors import InputError
from gnncore.outofcore.reader import read_row_ranges, read_rows
from gnncore.outofcore.store_budget import (
    StoreBuffers,
    StoreReport,
    check_disk,
    fixed_overhead,
    store_buffers,
)
from gnncore.outofcore.store_io import (
    NpyWriter,
    bucket_counts,
    gather_rows,
    npy_entry_streamed,
    scatter_rows,
    write_buckets,
    write_lists,
)
from gnncore.partition.base import part_offsets, part_order
from gnncore.partition.store import PartitionDir, partition_stage_dir, partition_stage_inputs
from gnncore.progress import stage
from gnncore.store import GraphDir, atomic_directory
from gnncore.store.atomic import check_output_dir
from gnncore.store.manifest import (
    MANIFEST_FILE,
    check_plain_name,
    read_json_manifest,
    sha256_of,
)
from gnncore.store.npy import NpyFile, inspect_npy, load_npy
from gnncore.store.versioning import stage_key
from gnncore.usage import StageUsage, resolve_process_budget

STORE_FORMAT = "gnncore.partitioned_store"
STORE_FORMAT_VERSION = 2
#: The static features are read in one pass over the features, not row by row,
#: once they are more than one row in this many.
_SCAN_SHARE = 8
REQUIRED = (
    "node_order",
    "node_map",
    "partition_offsets",
    "edges",
    "bucket_offsets",
    "static_nodes",
    "static_indptr",
    "static_indices",
)

#: What ``static_fraction`` means (the Dagster asset's config shows it).
STATIC_FRACTION_HELP = (
    "Share of the nodes, highest in-degree first, kept as the static set "
    "(HierBatching's static cache: features and in-neighbour lists always in memory), "
    "in [0, 1]."
)


def relabel_by_partition(assignment: np.ndarray, parts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(node_order, offsets)``: old ids grouped by partition (stable, so in id
    order within one) and the ``parts + 1`` bounds of the groups; the labels lie
    in ``[0, parts)`` (:meth:`PartitionDir.open` checks them)."""
    return part_order(assignment, parts), part_offsets(assignment, parts)


def write_partitioned_store(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    static_fraction: float = 0.01,
    reuse: bool = False,
    memory_budget: int | str | None = "auto",
) -> PartitionedStore:
    """Write the partitioned store of a graph and one of its partitions (see the
    module docstring) within ``memory_budget``; returns it opened
    (:func:`build_partitioned_store` also returns what it cost).

    With ``reuse``, a complete store at ``out_dir`` whose manifest records the
    same stage key (:func:`store_stage_key`) is returned as it is, not rewritten.

    Raises:
        InputError: The partition is not of this graph, ``out_dir`` would destroy
            an input or other data, ``static_fraction`` is outside [0, 1], the
            budget is below what the stage needs or the disk cannot hold the store.
    """
    return build_partitioned_store(
        graph_dir, partition_dir, out_dir, static_fraction, reuse=reuse, memory_budget=memory_budget
    ).store


def build_partitioned_store(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    static_fraction: float = 0.01,
    *,
    reuse: bool = False,
    memory_budget: int | str | None = "auto",
    buffers: StoreBuffers | None = None,
) -> StoreReport:
    """:func:`write_partitioned_store`, returning the store with its cost.

    Features, edges and the static set stream through buffers sized from
    ``memory_budget`` (bounding the whole process; ``"auto"``:
    :func:`~gnncore.usage.process_budget`;
    a size string or bytes; ``None``: the largest buffers, no check) once the
    fixed overhead (this process's memory now plus the per-node arrays) is
    taken off; ``buffers`` sets them directly instead. Same bytes whatever the
    buffers. Refuses before writing anything when the budget leaves less than
    :data:`MIN_BUFFER_BYTES` or the disk has less room than the store.
    """
    if not 0.0 <= static_fraction <= 1.0:
        raise InputError(f"static_fraction must lie in [0, 1], not {static_fraction}")
    try:
        budget = resolve_process_budget(memory_budget)
    except ValueError as exc:
        raise InputError(f"memory budget: {exc}") from None
    started = time.perf_counter()
    with StageUsage() as usage:
        graph = GraphDir.open(graph_dir)
        graph.check_structure()
        partition = PartitionDir.open(partition_dir, graph)
        check_output_dir(out_dir, [graph.path, partition.path], STORE_FORMAT, "partitioned store")
        key = store_stage_key(graph, partition, static_fraction)
        existing = reusable_store(out_dir, key) if reuse else None
        fixed = fixed_overhead(graph.num_nodes, partition.parts)
        reused, disk = existing is not None, 0
        if existing is not None:
            stage(f"reused {existing.path} (stage key {key})")
        else:
            features = _npy_file(graph, "features")
            if buffers is None:
                row = 0 if features is None else features.data_bytes // max(graph.num_nodes, 1)
                buffers = store_buffers(budget, fixed, row)
            stage("relabelling nodes")
            layout = _Layout.build(graph, partition, static_fraction, buffers.edge_rows)
            disk = layout.output_bytes(graph, features)
            check_disk(out_dir, disk)
            with atomic_directory(out_dir) as tmp:
                _write_arrays(tmp, graph, layout, features, buffers)
                _write_manifest(tmp, graph, partition, layout, static_fraction, key, started)
            existing = PartitionedStore.open(out_dir)
    usage.set_outputs([existing.path])
    return StoreReport(existing, reused, budget, fixed, buffers, disk, usage)


def store_stage_key(graph: GraphDir, partition: PartitionDir, static_fraction: float) -> str:
    """Stage key of the store of ``graph`` and ``partition``: the static fraction,
    the store format version and the graph's and the partition's manifest sha256."""
    return stage_key(
        "partitioned_store",
        {"static_fraction": float(static_fraction), "format_version": STORE_FORMAT_VERSION},
        partition_stage_inputs(graph, partition),
    )


def store_dir(
    stores_root: str | os.PathLike[str],
    graph: GraphDir,
    partition: PartitionDir,
    static_fraction: float,
) -> Path:
    """Where the versioned pipeline keeps this store:
    ``<stores_root>/<partition dir name>-store-s<static_fraction>-<stage key>``."""
    key = store_stage_key(graph, partition, static_fraction)
    return partition_stage_dir(stores_root, partition, f"store-s{static_fraction:g}", key)


def reusable_store(out_dir: str | os.PathLike[str], key: str) -> PartitionedStore | None:
    """The store at ``out_dir`` when it is complete (:meth:`PartitionedStore.open`)
    and records stage key ``key``; else ``None``."""
    if not (Path(out_dir) / MANIFEST_FILE).is_file():
        return None
    try:
        existing = PartitionedStore.open(out_dir)
    except (InputError, KeyError, TypeError, ValueError, OSError):
        return None  # incomplete or damaged: rewritten
    return existing if existing.info.get("stage_key") == key else None


def _npy_file(graph: GraphDir, name: str) -> NpyFile | None:
    """The checked header of the graph's ``name.npy`` (``None`` when it has none)."""
    file = f"{name}.npy"
    return inspect_npy(graph.path / file) if file in graph.manifest.files else None


def _indices(graph: GraphDir) -> NpyFile:
    return inspect_npy(graph.path / "indices.npy")


@dataclass(frozen=True)
class _Layout:
    """The per-node arrays of a store: the relabelling, the partition of each
    old id, the graph's ``indptr`` and the static set (in memory: O(N))."""

    order: np.ndarray
    node_map: np.ndarray
    offsets: np.ndarray
    assignment: np.ndarray
    indptr: np.ndarray
    static: np.ndarray
    bucket_offsets: np.ndarray

    @classmethod
    def build(
        cls, graph: GraphDir, partition: PartitionDir, static_fraction: float, piece_edges: int
    ) -> _Layout:
        n, parts = graph.num_nodes, partition.parts
        assignment = load_npy(partition.path / "assignment.npy", mmap_mode=None).astype(np.int64)
        order, offsets = relabel_by_partition(assignment, parts)
        node_map = np.empty(n, dtype=np.int64)
        node_map[order] = np.arange(n, dtype=np.int64)
        indptr = load_npy(graph.path / "indptr.npy", mmap_mode=None).astype(np.int64, copy=False)
        static = _static_nodes(np.diff(indptr), static_fraction, node_map)
        stage("counting edge buckets")
        counts = bucket_counts(indptr, _indices(graph), assignment, parts, piece_edges)
        bucket_offsets = np.zeros(parts * parts + 1, dtype=np.int64)
        np.cumsum(counts, out=bucket_offsets[1:])
        return cls(order, node_map, offsets, assignment, indptr, static, bucket_offsets)

    @property
    def static_old(self) -> np.ndarray:
        return self.order[self.static]

    def static_entries(self) -> int:
        old = self.static_old
        return int((self.indptr[old + 1] - self.indptr[old]).sum())

    def output_bytes(self, graph: GraphDir, features: NpyFile | None) -> int:
        """Bytes the store's files will take (a header of at most 4 KiB each)."""
        n, e, k = graph.num_nodes, int(self.indptr[-1]), len(self.static)
        total = 8 * (3 * n + len(self.offsets) + len(self.bucket_offsets) + 2 * e + 2 * k + 1)
        total += 8 * self.static_entries()
        if features is not None:
            total += 4 * (n + k) * math.prod(features.shape[1:])
        for name in ("labels", "train_idx", "val_idx", "test_idx"):
            if f"{name}.npy" in graph.manifest.files:
                total += (graph.path / f"{name}.npy").stat().st_size
        return total + 16 * 4096


def _write_arrays(
    tmp: Path, graph: GraphDir, layout: _Layout, features: NpyFile | None, buffers: StoreBuffers
) -> None:
    """Every ``.npy`` file of the store into ``tmp`` (the manifest apart)."""
    order, node_map = layout.order, layout.node_map
    for name, array in (("node_order", order), ("node_map", node_map)):
        np.save(tmp / f"{name}.npy", array)
    np.save(tmp / "partition_offsets.npy", layout.offsets)
    n, sync = graph.num_nodes, buffers.sync_bytes
    if features is not None:
        stage("features by partition")
        with _writer(tmp / "features.npy", np.float32, (n, *features.shape[1:]), sync) as out:
            scatter_rows(features, node_map, out, buffers.feature_rows)
    if "labels.npy" in graph.manifest.files:
        np.save(tmp / "labels.npy", load_npy(graph.path / "labels.npy", mmap_mode=None)[order])
    for split in ("train", "val", "test"):
        if graph.has(f"{split}_idx"):
            np.save(tmp / f"{split}_idx.npy", np.sort(node_map[graph.split(split)]))
    stage("edge buckets")
    indices = _indices(graph)
    with _writer(tmp / "edges.npy", np.int64, (int(layout.indptr[-1]), 2), sync) as out:
        write_buckets(
            layout.indptr, indices, node_map, layout.assignment, layout.bucket_offsets, out,
            buffers.edge_rows,
        )  # fmt: skip
    np.save(tmp / "bucket_offsets.npy", layout.bucket_offsets)
    stage("static set")
    static, old = layout.static, layout.static_old
    np.save(tmp / "static_nodes.npy", static)
    lengths = (layout.indptr[old + 1] - layout.indptr[old]).astype(np.int64)
    static_indptr = np.zeros(len(static) + 1, dtype=np.int64)
    np.cumsum(lengths, out=static_indptr[1:])
    np.save(tmp / "static_indptr.npy", static_indptr)
    with _writer(tmp / "static_indices.npy", np.int64, (int(static_indptr[-1]),), sync) as out:
        write_lists(layout.indptr, indices, old, node_map, out, buffers.edge_rows)
    if features is not None:
        shape = (len(static), *features.shape[1:])
        with _writer(tmp / "static_features.npy", np.float32, shape, sync) as out:
            if len(old) * _SCAN_SHARE < n:  # few rows: read them alone
                gather_rows(features, old, out, buffers.feature_rows)
            else:  # many: one sequential pass costs less than that many random reads
                position = np.full(n, -1, dtype=np.int64)
                position[old] = np.arange(len(old), dtype=np.int64)
                scatter_rows(features, position, out, buffers.feature_rows)


@contextmanager
def _writer(path: Path, dtype: Any, shape: tuple[int, ...], sync_bytes: int) -> Iterator[NpyWriter]:
    """An :class:`NpyWriter`, closed (checked complete) when the block succeeds."""
    out = NpyWriter(path, dtype, shape, sync_bytes)
    try:
        yield out
    except BaseException:
        os.close(out.fd)
        raise
    out.close()


def _write_manifest(
    tmp: Path,
    graph: GraphDir,
    partition: PartitionDir,
    layout: _Layout,
    static_fraction: float,
    key: str,
    started: float,
) -> None:
    stage("checksums and manifest")
    info: dict[str, Any] = {
        "format": STORE_FORMAT,
        "format_version": STORE_FORMAT_VERSION,
        "num_nodes": graph.num_nodes,
        "num_edges": int(layout.indptr[-1]),
        "parts": partition.parts,
        "num_features": graph.manifest.num_features,
        "num_classes": graph.manifest.num_classes,
        "static_fraction": static_fraction,
        "num_static": int(len(layout.static)),
        "partition_offsets": layout.offsets.tolist(),
        "graph_manifest_sha256": sha256_of(graph.path / MANIFEST_FILE),
        "partition_manifest_sha256": sha256_of(partition.path / MANIFEST_FILE),
        "graph": str(graph.path),
        "partition": str(partition.path),
        "stage_key": key,
        "seconds": round(time.perf_counter() - started, 3),
        "files": {},
    }
    for file in sorted(tmp.glob("*.npy")):
        info["files"][file.name] = npy_entry_streamed(file)
    (tmp / MANIFEST_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))


def _static_nodes(in_degree: np.ndarray, fraction: float, node_map: np.ndarray) -> np.ndarray:
    """New ids of the ``round(fraction·N)`` nodes of highest in-degree (ties: the
    smaller original id), ascending."""
    count = int(round(fraction * len(in_degree)))
    top = np.lexsort((np.arange(len(in_degree)), -in_degree.astype(np.int64)))[:count]
    return np.sort(node_map[top])


@dataclass(frozen=True)
class PartitionedStore:
    """A read-only partitioned store (see the module docstring).

    Its partition and bucket reads use ``O_DIRECT`` (``direct_reads``, where the
    file system allows it): read once per epoch, the data gains nothing from the
    page cache, and under a memory limit that counts the cache, caching it would
    only make the kernel reclaim pages while training runs. With
    ``direct_reads=False`` they go through the page cache, which helps when the
    whole store fits in memory and is read again each epoch.
    """

    path: Path
    info: dict[str, Any]
    direct_reads: bool = True

    @property
    def parts(self) -> int:
        return int(self.info["parts"])

    @property
    def num_nodes(self) -> int:
        return int(self.info["num_nodes"])

    @property
    def offsets(self) -> np.ndarray:
        """Partition ``i`` holds the new ids ``offsets[i] .. offsets[i + 1] - 1``."""
        return np.asarray(self.info["partition_offsets"], dtype=np.int64)

    @property
    def num_static(self) -> int:
        """Nodes in the static set."""
        return int(self.info["num_static"])

    def has(self, name: str) -> bool:
        return f"{name}.npy" in self.info["files"]

    def array(self, name: str) -> np.ndarray:
        """The array ``name``, memory-mapped (for small arrays and tests; training
        reads partitions and buckets with :meth:`partition_features` /
        :meth:`bucket`)."""
        if not self.has(name):
            raise KeyError(f"{self.path} has no {name}.npy")
        return load_npy(self.path / f"{name}.npy", mmap_mode="r")

    def _layout(self, name: str) -> tuple[Path, int, np.dtype[Any], tuple[int, ...]]:
        """``(file, header bytes, dtype, row shape)`` of ``name.npy`` from the manifest."""
        entry = self.info["files"][f"{name}.npy"]
        shape, dtype = tuple(entry["shape"]), np.dtype(entry["dtype"])
        header = entry["bytes"] - int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.path / f"{name}.npy", int(header), dtype, shape[1:]

    def _rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of ``name.npy`` in one sequential read (``pread``
        in C++, the GIL released)."""
        return read_rows(*self._layout(name), start, stop, direct=self.direct_reads)

    def read_rows(
        self, name: str, ranges: list[tuple[int, int]], out: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows of ``name.npy`` in each ``(start, stop)`` range, concatenated: one
        open, one sequential ``pread`` pass per range, the GIL released (into
        ``out`` when given: see :func:`~gnncore.outofcore.reader.read_row_ranges`)."""
        return read_row_ranges(*self._layout(name), ranges, out=out, direct=self.direct_reads)

    def partition_features(self, part: int) -> np.ndarray:
        """The features of partition ``part``, rows ``offsets[part]:offsets[part+1]``."""
        lo, hi = self.offsets[part], self.offsets[part + 1]
        return self._rows("features", int(lo), int(hi))

    def bucket(self, i: int, j: int) -> np.ndarray:
        """Edge bucket ``(i, j)`` (sources in partition ``i``, destinations in
        ``j``): int64 ``[E_ij, 2]`` (src, dst), sorted by ``(dst, src)``."""
        lo, hi = self.bucket_range(i, j)
        return self._rows("edges", lo, hi)

    def bucket_range(self, i: int, j: int) -> tuple[int, int]:
        """Rows of ``edges.npy`` holding bucket ``(i, j)``."""
        bounds = self.array("bucket_offsets")
        k = j * self.parts + i
        return int(bounds[k]), int(bounds[k + 1])

    def in_edge_range(self, part: int) -> tuple[int, int]:
        """Rows of ``edges.npy`` holding every edge into partition ``part``
        (the buckets ``(0, part) … (p-1, part)``, contiguous)."""
        bounds = self.array("bucket_offsets")
        return int(bounds[part * self.parts]), int(bounds[(part + 1) * self.parts])

    def in_edges(self, part: int) -> np.ndarray:
        """Every edge into partition ``part``: int64 ``[E, 2]`` (src, dst), one
        sequential read, grouped by source partition."""
        return self._rows("edges", *self.in_edge_range(part))

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PartitionedStore:
        """Open a store, checking its manifest, every file's presence, size, dtype
        and shape (not contents: :meth:`verify`). Raises :class:`InputError`
        naming the file."""
        path = Path(path)
        info, file = read_json_manifest(
            path, STORE_FORMAT, STORE_FORMAT_VERSION, "partitioned store"
        )
        files = info.get("files")
        if not isinstance(files, dict) or any(f"{r}.npy" not in files for r in REQUIRED):
            raise InputError("manifest does not list every required array", file)
        for name, entry in files.items():
            check_plain_name(name, path)
            target = path / name
            if not target.is_file() or target.stat().st_size != entry["bytes"]:
                raise InputError(
                    "missing, or its size differs from the manifest (truncated?)", target
                )
            array = load_npy(target, mmap_mode="r")
            if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
                raise InputError(
                    f"holds {array.dtype.str}{list(array.shape)}, manifest says "
                    f"{entry['dtype']}{entry['shape']}",
                    target,
                )
        store = cls(path, info)
        n, parts = store.num_nodes, store.parts
        if len(store.offsets) != parts + 1 or store.offsets[-1] != n:
            raise InputError("partition bounds do not cover the nodes", file)
        return store

    def verify(self) -> None:
        """Check every file's sha256 against the manifest (:class:`InputError`
        naming the first file that differs)."""
        for name, entry in self.info["files"].items():
            if sha256_of(self.path / name) != entry["sha256"]:
                raise InputError(
                    "sha256 does not match the manifest (file changed or corrupt)",
                    self.path / name,
                )
