"""Reading a graph directory: check the manifest, then map the arrays.

:meth:`GraphDir.open` checks what is cheap (every listed file exists with the
recorded byte size, dtype and shape; the format's required files are present)
before anything is memory-mapped. :meth:`GraphDir.check_structure` checks the
values every reader relies on, in bounded memory (CSR offsets, id ranges,
labels, splits): every verb runs it before its work starts.
:meth:`GraphDir.validate` runs it too, then checks the rest of the contents
(adjacency rows sorted without repeats, finite features) and, with
``checksums=True``, every file's sha256. Every ``.npy`` file is read through
:mod:`gnncore.store.npy`, so a bad one is one error naming it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.store.manifest import Manifest, sha256_of
from gnncore.store.npy import inspect_npy, load_npy, npy_blocks, read_npy_header
from gnncore.store.write_checks import WrittenCheck, pairs_ok
from gnncore.typing import require_csrc

if TYPE_CHECKING:  # Polars (33 MiB of RSS) is imported by the two readers that use it
    import polars as pl

SPLITS = ("train_idx", "val_idx", "test_idx")
REQUIRED = ("indptr.npy", "indices.npy", "eid.npy", "edges.parquet", "edges_shuffled.npy")
INDEX_DTYPES = ("<i4", "<i8")
ROW_CHUNK = 1 << 18
VALIDATE_ENTRIES = 1 << 22
"""Adjacency entries and edge ids read at a time by :meth:`GraphDir.validate`."""
CHECK_ENTRIES = 1 << 22
"""Array entries read at a time by :meth:`GraphDir.check_structure`."""
TRIPLES = ("train_triples", "valid_triples", "test_triples")


class GraphDir:
    """A validated, read-only view of a graph directory.

    Arrays are memory-mapped lazily (``mmap_mode="r"``) so a graph larger than
    memory can be opened; nothing is mapped before the manifest checks pass.
    """

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.manifest = manifest
        self._structure_checked = False

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> GraphDir:
        """Read the manifest of ``path`` and check files against it."""
        path = Path(path)
        manifest = Manifest.read(path)
        graph = cls(path, manifest)
        graph._check_files()
        return graph

    # Cheap structural checks ---------------------------------------------------

    def _check_files(self) -> None:
        m = self.manifest
        for required in REQUIRED:
            if required not in m.files:
                raise InputError(f"manifest lists no {required}", self.path)
        for name, entry in m.files.items():
            file = self.path / name
            if not file.is_file():
                raise InputError(f"{name} is listed in the manifest but missing", self.path)
            size = file.stat().st_size
            if size != entry.bytes:
                raise InputError(f"size is {size} bytes, manifest says {entry.bytes}", file)
            if entry.kind == "npy":
                self._check_npy_header(file, entry.dtype, entry.shape)
        n, e, ec = m.num_nodes, m.num_edges, m.num_canonical_edges
        self._expect("indptr.npy", ("<i8",), (n + 1,))
        self._expect("indices.npy", INDEX_DTYPES, (e,))
        self._expect("eid.npy", ("<i8",), (e,))
        self._expect("edges_shuffled.npy", INDEX_DTYPES, (m.num_undirected_edges, 2))
        if m.files["edges.parquet"].rows != ec:
            raise InputError(
                f"has {m.files['edges.parquet'].rows} rows, manifest counts {ec} canonical edges",
                self.path / "edges.parquet",
            )
        if "features.npy" in m.files:
            self._expect("features.npy", ("<f4",), (n, m.num_features))
        if "labels.npy" in m.files:
            self._expect("labels.npy", ("<i8",), (n,))
        if "node_ids.parquet" in m.files and m.files["node_ids.parquet"].rows != n:
            raise InputError("row count differs from num_nodes", self.path / "node_ids.parquet")
        for split in SPLITS:
            if f"{split}.npy" in m.files:
                self._expect(f"{split}.npy", ("<i8",), None)
                self._expect_ndim(f"{split}.npy", 1)
        for triples in TRIPLES:
            if f"{triples}.npy" in m.files:
                self._expect_ndim(f"{triples}.npy", 2, width=3)

    def _expect_ndim(self, name: str, ndim: int, width: int | None = None) -> None:
        """``name``'s manifest shape has ``ndim`` dimensions (the last ``width``)."""
        shape = self.manifest.files[name].shape or ()
        if len(shape) != ndim or (width is not None and shape[-1] != width):
            wanted = f"[T, {width}]" if width is not None else f"{ndim}-D"
            raise InputError(f"shape {shape} is not {wanted}", self.path / name)

    def _expect(self, name: str, dtypes: tuple[str, ...], shape: tuple[int, ...] | None) -> None:
        entry = self.manifest.files[name]
        if entry.dtype not in dtypes:
            raise InputError(f"dtype {entry.dtype} is not one of {dtypes}", self.path / name)
        if shape is not None and entry.shape != shape:
            raise InputError(
                f"shape {entry.shape} does not match the manifest's counts {shape}",
                self.path / name,
            )

    @staticmethod
    def _check_npy_header(file: Path, dtype: str | None, shape: tuple[int, ...] | None) -> None:
        info = inspect_npy(file)
        if info.dtype.str != dtype or info.shape != shape:
            raise InputError(
                f"holds {info.dtype.str}{info.shape}, manifest says {dtype}{shape}", file
            )

    # Arrays ------------------------------------------------------------------

    def array(self, name: str) -> np.ndarray:
        """Memory-map ``name.npy`` read-only."""
        file = f"{name}.npy"
        if file not in self.manifest.files:
            raise KeyError(f"{self.path} has no {file}")
        return load_npy(self.path / file, mmap_mode="r")

    def has(self, name: str) -> bool:
        """Whether the directory holds ``name.npy`` or ``name.parquet``."""
        return f"{name}.npy" in self.manifest.files or f"{name}.parquet" in self.manifest.files

    @cached_property
    def indptr(self) -> np.ndarray:
        return self.array("indptr")

    @cached_property
    def indices(self) -> np.ndarray:
        return self.array("indices")

    @property
    def num_nodes(self) -> int:
        return self.manifest.num_nodes

    def features(self) -> np.ndarray | None:
        return self.array("features") if self.has("features") else None

    def labels(self) -> np.ndarray | None:
        return self.array("labels") if self.has("labels") else None

    def split(self, name: str) -> np.ndarray:
        """``train``, ``val`` or ``test`` node ids."""
        return np.asarray(self.array(f"{name}_idx"))

    def edges(self) -> pl.DataFrame:
        """The canonical edge table (``src``, [``rel``], ``dst``)."""
        import polars as pl

        return pl.read_parquet(self.path / "edges.parquet")

    def node_ids(self) -> pl.DataFrame | None:
        """The raw-id to node-id map (``raw_id``, ``node_id``), when ingested."""
        if not self.has("node_ids"):
            return None
        import polars as pl

        return pl.read_parquet(self.path / "node_ids.parquet")

    # Structure: the values every reader relies on --------------------------------

    def check_structure(self) -> None:
        """Check the values every reader of the graph relies on, so that a corrupt
        array is refused with one :class:`InputError` naming its file and row
        before any work starts (not later, inside a sampler, a partitioner or a
        prefetch thread). Every verb that reads a graph runs it; so does
        :meth:`validate`.

        - ``indptr.npy`` starts at 0, never decreases and ends at ``len(indices)``;
        - ``indices.npy`` holds node ids in ``[0, num_nodes)`` (the row named is
          the adjacency row, as :meth:`validate` names it);
        - ``eid.npy`` holds rows of ``edges.parquet``, ``[0, num_canonical_edges)``;
        - ``edges_shuffled.npy`` holds pairs ``u < v`` of node ids;
        - ``labels.npy`` lies in ``[-1, num_classes)``;
        - each split holds node ids in range, without repeats, only labelled
          nodes (when the graph has labels) and no node of another split;
        - knowledge-graph triples hold node ids and relation ids in range.

        Arrays are read (not mapped) in blocks of :data:`CHECK_ENTRIES` entries
        with vectorised numpy: the memory is a block plus one byte per node (the
        splits' owners), the time one sequential read of the arrays. The first
        call does the work; later calls on the same object return at once.
        Order and repeats within adjacency rows, finite features and checksums
        are left to :meth:`validate`.

        Raises:
            InputError: Naming the file, the row and the problem.
        """
        self._check_structure(frozenset())

    def _check_structure(self, done: frozenset[str]) -> None:
        """:meth:`check_structure`, but for the files in ``done``, whose checks
        their writer made (:meth:`_written`)."""
        if self._structure_checked:
            return
        m = self.manifest
        if "indptr.npy" not in done:
            self._check_indptr()
        bad = None if "indices.npy" in done else self._first_outside("indices", 0, m.num_nodes)
        if bad is not None:
            entry, value = bad
            row = int(np.searchsorted(self.indptr, entry, side="right")) - 1
            raise InputError(
                f"node id {value} (entry {entry}) is outside [0, {m.num_nodes})",
                self.path / "indices.npy",
                row=row,
            )
        bad = None if "eid.npy" in done else self._first_outside("eid", 0, m.num_canonical_edges)
        if bad is not None:
            raise InputError(
                f"edge id {bad[1]} is outside [0, {m.num_canonical_edges}) "
                "(the rows of edges.parquet)",
                self.path / "eid.npy",
                row=bad[0],
            )
        if "edges_shuffled.npy" not in done:
            self._check_pairs()
        if self.has("labels"):
            bad = self._first_outside("labels", -1, m.num_classes)
            if bad is not None:
                raise InputError(
                    f"label {bad[1]} is outside [0, {m.num_classes}) (-1 marks unlabelled)",
                    self.path / "labels.npy",
                    row=bad[0],
                )
        self._check_splits()
        self._check_triples()
        self._structure_checked = True

    def _first_outside(self, name: str, lo: int, hi: int) -> tuple[int, int] | None:
        """``(entry, value)`` of the first entry of 1-D ``name.npy`` outside
        ``[lo, hi)``, or :obj:`None` when all lie inside."""
        entry = 0
        for block in npy_blocks(self.path / f"{name}.npy", CHECK_ENTRIES):
            if len(block) and (block.min() < lo or block.max() >= hi):
                i = int(np.flatnonzero((block < lo) | (block >= hi))[0])
                return entry + i, int(block[i])
            entry += len(block)
        return None

    def _check_indptr(self) -> None:
        """``indptr.npy``: 0 first, never decreasing, ``len(indices)`` last."""
        file = self.path / "indptr.npy"
        end = self.manifest.num_edges  # len(indices): _check_files compared the shapes
        last: int | None = None
        row = 0  # file row of block[0]
        for block in npy_blocks(file, CHECK_ENTRIES):
            if last is None:
                if block[0] != 0:
                    raise InputError(f"first offset is {int(block[0])}, not 0", file, row=0)
                joined, base = block, row
            else:
                joined, base = np.concatenate((np.array([last], block.dtype), block)), row - 1
            down = np.flatnonzero(joined[1:] < joined[:-1])
            if len(down):
                i = int(down[0]) + 1
                raise InputError(
                    f"offset {int(joined[i])} is below the previous row's {int(joined[i - 1])} "
                    "(offsets never decrease)",
                    file,
                    row=base + i,
                )
            last = int(block[-1])
            row += len(block)
        if last != end:
            raise InputError(
                f"last offset is {last}, not {end} (the entries of indices.npy)", file, row=row - 1
            )

    def _check_pairs(self) -> None:
        """``edges_shuffled.npy``: node id pairs ``u < v``."""
        file = self.path / "edges_shuffled.npy"
        n = self.manifest.num_nodes
        row = 0
        for block in npy_blocks(file, CHECK_ENTRIES // 2):
            if not pairs_ok(block, n):  # the writer's check (write_checks); then find the row
                u, v = block[:, 0], block[:, 1]
                bad = np.flatnonzero((u < 0) | (u >= v) | (v >= n))
                if len(bad):
                    i = int(bad[0])
                    raise InputError(
                        f"pair ({int(u[i])}, {int(v[i])}) is not u < v of node ids in [0, {n})",
                        file,
                        row=row + i,
                    )
            row += len(block)

    def _check_splits(self) -> None:
        """Each split: node ids in range, no repeats, labelled, disjoint."""
        present = [s for s in SPLITS if self.has(s)]
        if not present:
            return
        n = self.manifest.num_nodes
        labels = self.labels()
        owner = np.zeros(n, dtype=np.int8)  # 1 + the index in `present` of the node's split
        for k, split in enumerate(present, start=1):
            file = self.path / f"{split}.npy"
            row = 0
            for idx in npy_blocks(file, CHECK_ENTRIES):
                bad = np.flatnonzero((idx < 0) | (idx >= n))
                if len(bad):
                    i = int(bad[0])
                    raise InputError(
                        f"node id {int(idx[i])} is outside [0, {n})", file, row=row + int(i)
                    )
                held = owner[idx]
                order = np.argsort(idx, kind="stable")  # equal ids: later rows after earlier
                ranked = idx[order]
                repeats = np.concatenate(
                    (order[1:][ranked[1:] == ranked[:-1]], np.flatnonzero(held == k))
                )
                if len(repeats):
                    i = int(repeats.min())
                    raise InputError(f"node {int(idx[i])} is repeated", file, row=row + i)
                other = np.flatnonzero(held != 0)
                if len(other):
                    i = int(other[0])
                    raise InputError(
                        f"node {int(idx[i])} is also in another split "
                        f"({present[held[i] - 1]}.npy): splits overlap",
                        file,
                        row=row + i,
                    )
                if labels is not None:
                    unlabelled = np.flatnonzero(labels[idx] < 0)
                    if len(unlabelled):
                        i = int(unlabelled[0])
                        raise InputError(
                            f"split holds node {int(idx[i])}, which is unlabelled",
                            file,
                            row=row + i,
                        )
                owner[idx] = k
                row += len(idx)

    def _check_triples(self) -> None:
        """Knowledge-graph triples: head and tail node ids, relation ids in range."""
        n = self.manifest.num_nodes
        r = max(self.manifest.num_relations, 1)  # as the link trainer reads them
        for name in TRIPLES:
            if not self.has(name):
                continue
            file = self.path / f"{name}.npy"
            row = 0
            for block in npy_blocks(file, CHECK_ENTRIES // 3):
                if len(block):
                    head, rel, tail = block[:, 0], block[:, 1], block[:, 2]
                    bad = np.flatnonzero(
                        (head < 0) | (head >= n) | (tail < 0) | (tail >= n) | (rel < 0) | (rel >= r)
                    )
                    if len(bad):
                        i = int(bad[0])
                        raise InputError(
                            f"triple ({int(head[i])}, {int(rel[i])}, {int(tail[i])}) is not "
                            f"(head, relation, tail) with node ids in [0, {n}) and relation ids "
                            f"in [0, {r})",
                            file,
                            row=row + i,
                        )
                row += len(block)

    # Deep validation -----------------------------------------------------------

    def validate(self, checksums: bool = False, written: Iterable[WrittenCheck] = ()) -> None:
        """Check contents; raise :class:`InputError` naming file, row and problem.

        First :meth:`check_structure`, then (what it leaves out) every adjacency
        row sorted and, outside knowledge graphs, without repeats, and features
        finite; with ``checksums``, first every file's sha256 (the deep check).

        Args:
            checksums (bool): Check every file's sha256 first.
            written: Checks the directory's writer made on every entry it wrote
                (:mod:`gnncore.store.write_checks`): a file whose check's counts
                and bounds match the manifest is not read again.
        """
        require_csrc()
        done = self._written(written)

        m = self.manifest
        if checksums:
            for name, entry in m.files.items():
                if sha256_of(self.path / name) != entry.sha256:
                    raise InputError(
                        "sha256 does not match the manifest (file changed or corrupt)",
                        self.path / name,
                    )
        self._check_structure(done)
        if "indices.npy" not in done:
            # indptr (O(|V|)) in memory; indices read in blocks, not mapped: mapped
            # pages stay in the process's memory, and graphs may exceed it
            indptr = load_npy(self.path / "indptr.npy", mmap_mode=None)
            bad = self._first_invalid_row(indptr, m.num_nodes, m.num_relations == 0)
            if bad >= 0:
                raise InputError(
                    "adjacency row is unsorted or repeats a neighbour",
                    self.path / "indices.npy",
                    row=int(bad),
                )
        self._validate_features()

    def _written(self, written: Iterable[WrittenCheck]) -> frozenset[str]:
        """The files of ``written`` whose checks cover what validation checks of
        them against this manifest: every entry, the manifest's bounds."""
        m = self.manifest
        expected = {
            "indptr.npy": (m.num_nodes + 1, m.num_edges),
            "indices.npy": (m.num_edges, m.num_nodes),
            "eid.npy": (m.num_edges, m.num_canonical_edges),
            "edges_shuffled.npy": (m.num_undirected_edges, m.num_nodes),
        }
        done = set()
        for check in written:
            if expected.get(check.file) != (check.count, check.bound):
                continue
            if check.file == "indices.npy" and not (check.strict or m.num_relations):
                continue
            done.add(check.file)
        if "indptr.npy" not in done:  # indices' rows were checked against its offsets
            done.discard("indices.npy")
        return frozenset(done)

    def _first_invalid_row(self, indptr: np.ndarray, num_nodes: int, strict: bool) -> int:
        """The first invalid adjacency row (``gnncore._C.find_invalid_csr_block``
        over row ranges of at most :data:`VALIDATE_ENTRIES` entries), -1 if none."""
        file = self.path / "indices.npy"
        with open(file, "rb") as fh:
            shape, _, dtype = read_npy_header(fh, file)
            if len(indptr) != num_nodes + 1 or indptr[0] != 0 or indptr[-1] != shape[0]:
                return 0
            # rows before the first whose offsets decrease are read; that row is invalid
            decreasing = np.flatnonzero(indptr[1:] < indptr[:-1])
            limit = int(decreasing[0]) if len(decreasing) else num_nodes
            offsets = indptr[: limit + 1]
            row = 0
            while row < limit:
                base = int(indptr[row])
                end = int(np.searchsorted(offsets, base + VALIDATE_ENTRIES, side="right")) - 1
                end = min(max(end, row + 1), limit)
                indices = np.fromfile(fh, dtype=dtype, count=int(indptr[end]) - base)
                if len(indices) != int(indptr[end]) - base:
                    raise InputError(f"truncated: ends within row {row}", file)
                bad = _C.find_invalid_csr_block(indptr[row : end + 1], indices, row, num_nodes,
                                                strict)  # fmt: skip
                if bad >= 0:
                    return int(bad)
                row = end
        return limit if limit < num_nodes else -1

    def _validate_features(self) -> None:
        if not self.has("features"):
            return
        # read in blocks, not mapped (as the indices): a bounded-memory ingestion
        # of 2 GiB of features held them all as mapped pages here
        file = self.path / "features.npy"
        with open(file, "rb") as fh:
            shape, _, dtype = read_npy_header(fh, file)
            width = int(np.prod(shape[1:], dtype=np.int64))
            step = max(1, min(ROW_CHUNK, (32 << 20) // max(width * dtype.itemsize, 1)))
            for start in range(0, shape[0], step):
                rows = min(step, shape[0] - start)
                block = np.fromfile(fh, dtype=dtype, count=rows * width).reshape(-1, width)
                finite = np.isfinite(block).all(axis=1)
                if not finite.all():
                    raise InputError(
                        "feature row holds NaN or inf", file,
                        row=start + int(np.flatnonzero(~finite)[0]),
                    )  # fmt: skip


def open_graph(path: str | os.PathLike[str], validate: bool = False) -> GraphDir:
    """Open a graph directory, optionally validating its contents too."""
    graph = GraphDir.open(path)
    if validate:
        graph.validate()
    return graph
