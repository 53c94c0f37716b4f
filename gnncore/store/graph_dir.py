"""Reading a graph directory: check the manifest, then map the arrays.

:meth:`GraphDir.open` checks what is cheap (every listed file exists with the
recorded byte size, dtype and shape; the format's required files are present)
before anything is memory-mapped. :meth:`GraphDir.validate` checks contents
(CSR bounds and order, label range, disjoint splits, finite features) and,
with ``checksums=True``, every file's sha256.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from gnncore.errors import InputError
from gnncore.store.manifest import Manifest, sha256_of
from gnncore.store.npy import read_npy_header
from gnncore.typing import require_csrc

SPLITS = ("train_idx", "val_idx", "test_idx")
REQUIRED = ("indptr.npy", "indices.npy", "eid.npy", "edges.parquet", "edges_shuffled.npy")
INDEX_DTYPES = ("<i4", "<i8")
ROW_CHUNK = 1 << 18
VALIDATE_ENTRIES = 1 << 22
"""Adjacency entries and edge ids read at a time by :meth:`GraphDir.validate`."""


class GraphDir:
    """A validated, read-only view of a graph directory.

    Arrays are memory-mapped lazily (``mmap_mode="r"``) so a graph larger than
    memory can be opened; nothing is mapped before the manifest checks pass.
    """

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.manifest = manifest

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
        try:
            with open(file, "rb") as fh:
                real_shape, fortran, real_dtype = read_npy_header(fh)
        except ValueError as exc:
            raise InputError(f"not a valid .npy file: {exc}", file) from exc
        if fortran or real_dtype.hasobject:
            raise InputError("array must be C-ordered plain numbers", file)
        if real_dtype.str != dtype or tuple(real_shape) != shape:
            raise InputError(
                f"holds {real_dtype.str}{tuple(real_shape)}, manifest says {dtype}{shape}", file
            )

    # Arrays ------------------------------------------------------------------

    def array(self, name: str) -> np.ndarray:
        """Memory-map ``name.npy`` read-only."""
        file = f"{name}.npy"
        if file not in self.manifest.files:
            raise KeyError(f"{self.path} has no {file}")
        return np.load(self.path / file, mmap_mode="r", allow_pickle=False)

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
        return pl.read_parquet(self.path / "edges.parquet")

    def node_ids(self) -> pl.DataFrame | None:
        """The raw-id to node-id map (``raw_id``, ``node_id``), when ingested."""
        if not self.has("node_ids"):
            return None
        return pl.read_parquet(self.path / "node_ids.parquet")

    # Deep validation -----------------------------------------------------------

    def validate(self, checksums: bool = False) -> None:
        """Check contents; raise :class:`InputError` naming file, row and problem."""
        require_csrc()

        m = self.manifest
        if checksums:
            for name, entry in m.files.items():
                if sha256_of(self.path / name) != entry.sha256:
                    raise InputError(
                        "sha256 does not match the manifest (file changed or corrupt)",
                        self.path / name,
                    )
        # indptr (O(|V|)) in memory; indices and eid read in blocks, not mapped:
        # mapped pages stay in the process's memory, and graphs may exceed it
        indptr = np.array(self.indptr)
        bad = self._first_invalid_row(indptr, m.num_nodes, m.num_relations == 0)
        if bad >= 0:
            raise InputError(
                "adjacency row is unsorted, repeated or out of range",
                self.path / "indices.npy",
                row=int(bad),
            )
        for block in _npy_blocks(self.path / "eid.npy", VALIDATE_ENTRIES):
            if len(block) and (block.min() < 0 or block.max() >= m.num_canonical_edges):
                raise InputError("edge id out of range", self.path / "eid.npy")
        self._validate_labels()
        self._validate_splits()
        self._validate_features()

    def _first_invalid_row(self, indptr: np.ndarray, num_nodes: int, strict: bool) -> int:
        """The first invalid adjacency row (``gnncore._C.find_invalid_csr_block``
        over row ranges of at most :data:`VALIDATE_ENTRIES` entries), -1 if none."""
        from gnncore import _C

        file = self.path / "indices.npy"
        with open(file, "rb") as fh:
            shape, _, dtype = read_npy_header(fh)
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

    def _validate_labels(self) -> None:
        labels = self.labels()
        if labels is None:
            return
        c = self.manifest.num_classes
        bad = np.flatnonzero((labels < -1) | (labels >= c))
        if len(bad):
            raise InputError(
                f"label {int(labels[bad[0]])} is outside [0, {c}) (-1 marks unlabelled)",
                self.path / "labels.npy",
                row=int(bad[0]),
            )

    def _validate_splits(self) -> None:
        present = [s for s in SPLITS if self.has(s)]
        seen = np.zeros(self.manifest.num_nodes, dtype=np.int8)
        labels = self.labels()
        for split in present:
            idx = self.array(split)
            file = self.path / f"{split}.npy"
            bad = np.flatnonzero((idx < 0) | (idx >= self.manifest.num_nodes))
            if len(bad):
                raise InputError(f"node id {int(idx[bad[0]])} out of range", file, row=int(bad[0]))
            if np.any(seen[idx]):
                first = int(idx[np.flatnonzero(seen[idx])[0]])
                raise InputError(f"node {first} is also in another split (splits overlap)", file)
            if len(np.unique(idx)) != len(idx):
                raise InputError("repeated node id", file)
            seen[idx] = 1
            if labels is not None and np.any(labels[idx] < 0):
                row = int(np.flatnonzero(labels[idx] < 0)[0])
                raise InputError("split holds an unlabelled node", file, row=row)

    def _validate_features(self) -> None:
        x = self.features()
        if x is None:
            return
        for start in range(0, len(x), ROW_CHUNK):
            block = np.asarray(x[start : start + ROW_CHUNK])
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                raise InputError(
                    "feature row holds NaN or inf",
                    self.path / "features.npy",
                    row=start + int(np.flatnonzero(~finite)[0]),
                )


def _npy_blocks(path: Path, entries: int) -> Iterator[np.ndarray]:
    """The data of a 1-D ``.npy`` file read (not mapped) in blocks of ``entries``."""
    with open(path, "rb") as fh:
        _, _, dtype = read_npy_header(fh)
        while len(block := np.fromfile(fh, dtype=dtype, count=entries)):
            yield block


def open_graph(path: str | os.PathLike[str], validate: bool = False) -> GraphDir:
    """Open a graph directory, optionally validating its contents too."""
    graph = GraphDir.open(path)
    if validate:
        graph.validate()
    return graph
