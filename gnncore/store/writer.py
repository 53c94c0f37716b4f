"""Writing a graph directory: arrays, Parquet tables, then the manifest.

Use :func:`create_graph_dir`; everything is written into a temporary sibling
directory which replaces the target only when the manifest is complete::

    with create_graph_dir(out, name="cora") as w:
        w.write_topology(num_nodes, src, dst, directed=False)
        w.save_array("features", x)
        w.save_array("labels", y)
        w.save_splits(train, val, test)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnncore import _C
from gnncore.lazy import lazy_module
from gnncore.names import safe_name
from gnncore.store.atomic import atomic_directory
from gnncore.store.direct_read import sha256_past_cache
from gnncore.store.edge_keys import MAX_KEY_ID, pack_keys, shuffle_keys
from gnncore.store.edge_table import write_edge_table
from gnncore.store.graph_dir import GraphDir
from gnncore.store.manifest import FileEntry, Manifest, check_plain_name, sha256_of
from gnncore.store.npy import index_dtype
from gnncore.store.parquet_footer import parquet_num_rows
from gnncore.store.write_checks import WrittenCheck
from gnncore.typing import require_csrc

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")

INT32_MAX = np.iinfo(np.int32).max
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 1,
    "statistics": True,
}
"""How every Parquet file of a graph directory is written (zstd level 1: about
the size of Polars' default level 3 at two thirds of the time; bounded-memory
ingestion streams ``edges.parquet`` with the same options, so the bytes match)."""


def sort_order(
    src: np.ndarray, dst: np.ndarray, rel: np.ndarray | None, num_nodes: int, num_relations: int
) -> np.ndarray | None:
    """Permutation sorting edges by ``(src, dst[, rel])``; ``None`` if already sorted.

    Ingestion hands over sorted edges, so the O(E) check usually saves the
    sort; otherwise one packed int64 key is sorted (far faster than lexsort).
    """
    if len(src) < 2:
        return None
    ds, dd = np.diff(src), np.diff(dst)
    ordered = (ds > 0) | ((ds == 0) & (dd > 0))
    if rel is not None:
        ordered |= (ds == 0) & (dd == 0) & (np.diff(rel) >= 0)
    if ordered.all():
        return None
    n, r = max(num_nodes, 1), max(num_relations, 1)
    if n * n * r < np.iinfo(np.int64).max:
        key = src * n + dst
        if rel is not None:
            key = key * r + rel
        return np.argsort(key, kind="stable")
    return np.lexsort((dst, src)) if rel is None else np.lexsort((rel, dst, src))


def undirected_pairs(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, collapse: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct unordered pairs ``(u, v)``, ``u < v``, of canonical edges.

    Undirected canonical edges already are such pairs; directed or relational
    ones (``collapse``) are folded and deduplicated by one sort of packed keys.
    """
    if not collapse:
        return src, dst
    n = max(num_nodes, 1)
    key = np.minimum(src, dst) * n + np.maximum(src, dst)
    key.sort()
    if len(key):
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    return key // n, key % n


class GraphDirWriter:
    """Collects the files of a graph directory being written into ``root``."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.num_nodes: int | None = None
        self.num_edges = 0
        self.num_canonical_edges = 0
        self.num_undirected_edges = 0
        self.directed = False
        self.num_relations = 0
        self.num_features = 0
        self.num_classes = 0
        self.stats: dict[str, Any] = {}
        self._files: dict[str, str] = {}  # file name -> kind
        self._digests: dict[str, Future[str]] = {}
        self._hasher: ThreadPoolExecutor | None = None
        self._hasher_lock = threading.Lock()  # files may be handed over from writer threads
        self._checks: dict[str, WrittenCheck] = {}

    # Arrays and tables -------------------------------------------------------

    def save_array(self, name: str, array: np.ndarray, chunk_rows: int = 1 << 20) -> Path:
        """Write ``array`` as ``name.npy`` (copied in row chunks, so memmaps stream)."""
        out = self.open_array(name, array.dtype, array.shape)
        for start in range(0, max(len(array), 1), chunk_rows):
            out[start : start + chunk_rows] = array[start : start + chunk_rows]
        out.flush()
        del out
        return self.root / f"{name}.npy"

    def open_array(self, name: str, dtype: Any, shape: tuple[int, ...]) -> np.memmap:
        """Create ``name.npy`` and return it as a writable memmap to fill in place."""
        file = self._register(f"{name}.npy", "npy")
        return np.lib.format.open_memmap(self.root / file, mode="w+", dtype=dtype, shape=shape)

    def write_table(self, name: str, frame: pl.DataFrame | Mapping[str, np.ndarray]) -> Path:
        """Write a Polars frame as ``name.parquet`` (zstd), or integer columns
        (name to 1-D array, in file order) delta-coded as ``edges.parquet`` is
        (:func:`~gnncore.store.edge_table.write_edge_table`)."""
        file = self._register(f"{name}.parquet", "parquet")
        if isinstance(frame, Mapping):
            write_edge_table(self.root / file, frame)
        else:
            frame.write_parquet(self.root / file, **PARQUET_OPTIONS)
        return self.root / file

    def _register(self, file: str, kind: str) -> str:
        check_plain_name(file, self.root)
        self._files[file] = kind
        self._checks.pop(file, None)  # written again: its check no longer holds
        return file

    def file_path(self, file: str, kind: str) -> Path:
        """Register ``file`` (``"npy"`` or ``"parquet"``) and return the path to write it at.

        For writers that build a file in place (bounded-memory ingestion
        streams ``indptr.npy`` etc. straight into the directory); the file must
        exist when :meth:`finish` runs.
        """
        if kind not in ("npy", "parquet"):
            raise ValueError(f"kind must be 'npy' or 'parquet', not {kind!r}")
        return self.root / self._register(file, kind)

    def hash_in_background(self, file: str, past_cache: bool = False) -> None:
        """Start the sha256 of ``file``, registered and complete (it must not change
        any more), on a background thread; :meth:`finish` uses it. hashlib
        releases the GIL, so the hashing overlaps the writing of the next files.
        Safe to call from the thread that wrote the file. ``past_cache``: the
        file was written past the page cache, so it is read that way too
        (:func:`~gnncore.store.direct_read.sha256_past_cache`)."""
        if file not in self._files:
            raise ValueError(f"{file} is not a registered file of {self.root}")
        hash_file = sha256_past_cache if past_cache else sha256_of
        with self._hasher_lock:
            if self._hasher is None:
                self._hasher = ThreadPoolExecutor(1, thread_name_prefix="gnncore-sha256")
            self._digests[file] = self._hasher.submit(hash_file, self.root / file)

    def set_digest(self, file: str, digest: Future[str]) -> None:
        """Take the sha256 of ``file``, registered, from its writer, which hashed
        the bytes as it wrote them (``digest``: the hex digest, when done);
        :meth:`finish` uses it instead of reading the file again."""
        if file not in self._files:
            raise ValueError(f"{file} is not a registered file of {self.root}")
        self._digests[file] = digest

    def record_check(self, check: WrittenCheck) -> None:
        """Record that ``check.file``, registered and complete, passed its content
        check as it was written (:mod:`gnncore.store.write_checks`): the
        validation of :func:`create_graph_dir` then does not read it again when
        the check's counts and bounds match the manifest."""
        if check.file not in self._files:
            raise ValueError(f"{check.file} is not a registered file of {self.root}")
        self._checks[check.file] = check

    @property
    def written_checks(self) -> list[WrittenCheck]:
        """The checks recorded by :meth:`record_check`."""
        return list(self._checks.values())

    @property
    def files(self) -> list[str]:
        """The registered files so far."""
        return list(self._files)

    def close(self) -> None:
        """Stop the background hashing (waits for a file being hashed); idempotent."""
        with self._hasher_lock:
            hasher, self._hasher = self._hasher, None
        if hasher is not None:
            hasher.shutdown(wait=True, cancel_futures=True)

    # Graph pieces ------------------------------------------------------------

    def write_topology(
        self,
        num_nodes: int,
        src: np.ndarray,
        dst: np.ndarray,
        *,
        directed: bool,
        rel: np.ndarray | None = None,
        num_relations: int = 0,
        shuffle_seed: int = 0,
    ) -> None:
        """Write canonical edges, the adjacency and the shuffled edge stream.

        ``src``/``dst`` (``rel``) must already be canonical: deduplicated, no
        self-loops, and for undirected graphs each edge once with
        ``src < dst``. Writes ``edges.parquet`` (sorted), ``indptr.npy`` /
        ``indices.npy`` / ``eid.npy`` (row ``v`` lists the sources of the
        edges into ``v``; both directions for undirected graphs) and
        ``edges_shuffled.npy`` (the distinct undirected pairs ``u < v`` in
        random order: the stream that streaming partitioners read).
        """
        require_csrc()
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        if rel is not None:
            rel = np.ascontiguousarray(rel, dtype=np.int32)
        order = sort_order(src, dst, rel, num_nodes, max(num_relations, 1))
        if order is not None:
            src, dst = src[order], dst[order]
            rel = None if rel is None else rel[order]
        columns = {"src": src, "dst": dst} if rel is None else {"src": src, "rel": rel, "dst": dst}
        write_edge_table(self.file_path("edges.parquet", "parquet"), columns)
        del order

        int32 = index_dtype(num_nodes) == np.int32
        if directed:
            indptr, indices, eid = _C.build_csr(dst, src, num_nodes, int32)
        else:
            both_src = np.concatenate([dst, src])
            both_dst = np.concatenate([src, dst])
            indptr, indices, eid = _C.build_csr(both_src, both_dst, num_nodes, int32)
            del both_src, both_dst
            np.remainder(eid, max(len(src), 1), out=eid)
        self.save_array("indptr", indptr)
        self.save_array("indices", indices)
        self.save_array("eid", eid)
        del indices, eid

        pair_u, pair_v = undirected_pairs(src, dst, num_nodes, directed or rel is not None)
        num_pairs = len(pair_u)
        self._write_shuffled(pair_u, pair_v, num_nodes, shuffle_seed)
        del pair_u, pair_v

        self.num_nodes = int(num_nodes)
        self.num_edges = int(indptr[-1])
        self.num_canonical_edges = int(len(src))
        self.num_undirected_edges = int(num_pairs)
        self.directed = bool(directed)
        self.num_relations = int(num_relations)
        self.stats["shuffle_seed"] = int(shuffle_seed)

    def _write_shuffled(
        self, pair_u: np.ndarray, pair_v: np.ndarray, num_nodes: int, seed: int
    ) -> None:
        """``edges_shuffled.npy``: the pairs in the order of
        ``default_rng(seed).permutation`` -- drawn in C++ on packed keys
        (:func:`gnncore.store.edge_keys.shuffle_keys`, numpy's draws and order) when
        the ids fit 32 bits, else by numpy itself."""
        dtype = index_dtype(num_nodes)
        shuffled = self.open_array("edges_shuffled", dtype, (len(pair_u), 2))
        block_rows = 1 << 22
        if num_nodes - 1 <= MAX_KEY_ID:
            keys = pack_keys(pair_u, pair_v)
            shuffle_keys(keys, seed)
            for start in range(0, len(keys), block_rows):
                block = keys[start : start + block_rows]
                shuffled[start : start + len(block), 0] = block >> np.uint64(32)
                shuffled[start : start + len(block), 1] = block & np.uint64(0xFFFFFFFF)
        else:
            perm = np.random.default_rng(seed).permutation(len(pair_u))
            for start in range(0, len(perm), block_rows):
                block = perm[start : start + block_rows]
                shuffled[start : start + len(block), 0] = pair_u[block]
                shuffled[start : start + len(block), 1] = pair_v[block]
        shuffled.flush()

    def set_topology(
        self,
        num_nodes: int,
        *,
        num_edges: int,
        num_canonical_edges: int,
        num_undirected_edges: int,
        directed: bool,
        num_relations: int = 0,
        shuffle_seed: int = 0,
    ) -> None:
        """Record the counts of a topology whose files were built in place.

        The counterpart of :meth:`write_topology` for prebuilt files: the
        caller has written ``edges.parquet``, ``indptr.npy``, ``indices.npy``,
        ``eid.npy`` and ``edges_shuffled.npy`` through :meth:`file_path`, byte
        for byte what :meth:`write_topology` writes for the same edges.
        """
        self.num_nodes = int(num_nodes)
        self.num_edges = int(num_edges)
        self.num_canonical_edges = int(num_canonical_edges)
        self.num_undirected_edges = int(num_undirected_edges)
        self.directed = bool(directed)
        self.num_relations = int(num_relations)
        self.stats["shuffle_seed"] = int(shuffle_seed)

    def save_splits(self, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> None:
        """Write ``train_idx``/``val_idx``/``test_idx`` as sorted int64 arrays."""
        for name, idx in (("train_idx", train), ("val_idx", val), ("test_idx", test)):
            self.save_array(name, np.sort(np.asarray(idx, dtype=np.int64)))

    # Finishing ---------------------------------------------------------------

    def finish(self) -> Manifest:
        """Describe every file (bytes, sha256, dtype, shape) and write the manifest.

        The checksums started by :meth:`hash_in_background` are collected; the
        other files are hashed here, two at a time.
        """
        if self.num_nodes is None:
            raise ValueError("write_topology() was never called")
        entries = {}
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="gnncore-sha256") as pool:
            digests = {
                file: self._digests.get(file) or pool.submit(sha256_of, self.root / file)
                for file in self._files
            }
            sha256 = {file: digest.result() for file, digest in digests.items()}
        self.close()
        for file, kind in sorted(self._files.items()):
            path = self.root / file
            dtype = shape = rows = None
            if kind == "npy":
                arr = np.load(path, mmap_mode="r")
                dtype, shape = arr.dtype.str, tuple(arr.shape)
                del arr
            else:
                rows = parquet_num_rows(path)
            entries[file] = FileEntry(
                file,
                kind,
                os.path.getsize(path),
                sha256[file],
                dtype=dtype,
                shape=shape,
                rows=rows,
            )
        manifest = Manifest(
            name=self.name,
            num_nodes=self.num_nodes,
            num_edges=self.num_edges,
            num_canonical_edges=self.num_canonical_edges,
            num_undirected_edges=self.num_undirected_edges,
            directed=self.directed,
            num_relations=self.num_relations,
            num_features=self.num_features,
            num_classes=self.num_classes,
            files=entries,
            stats=self.stats,
        )
        manifest.write(self.root)
        return manifest


@contextmanager
def create_graph_dir(out: str | os.PathLike[str], name: str) -> Iterator[GraphDirWriter]:
    """Write a graph directory atomically; it is validated before it appears
    (the files whose content checks the writer recorded, :meth:`GraphDirWriter.record_check`,
    are not read again).

    Args:
        out (str or PathLike): The graph directory to create or replace.
        name (str): The dataset name recorded in the manifest: a safe name
            (:func:`gnncore.names.safe_name`), checked before anything is written.
    """
    safe_name(name, what="dataset name")

    with atomic_directory(out) as tmp:
        writer = GraphDirWriter(tmp, name)
        try:
            yield writer
            writer.finish()
        finally:
            writer.close()
        # files checked as they were written are not read again
        GraphDir.open(tmp).validate(written=writer.written_checks)
