"""Per-rank data of a distributed run: one directory, one sub-directory per rank.

Written by :func:`gnncore.distributed.rank_write.write_rank_data` from a graph
directory and one of its partition directories (DistDGL, ALGORITHMS.md §2):
nodes keep the partition directory's relabelling, so rank ``r`` owns the
global ids ``offsets[r] <= id < offsets[r + 1]`` and ``owner(id)`` is a binary
search over ``offsets`` that needs nothing but the manifest. ``rank_<r>/``
holds exactly what rank ``r`` needs, indexed by local id ``id - offsets[r]``:

* ``indptr.npy`` (int64 ``[n_r + 1]``) and ``indices.npy`` (int64 ``[E_r]``):
  the in-edges of the core nodes, row ``v`` listing the *global* ids of the
  sources of the edges into core node ``v`` (sorted), the layout the project's
  samplers read; ``edge_ids.npy`` (int64 ``[E_r]``): each entry's id in the
  graph's canonical edge table (``edges.parquet``);
* ``halo.npy`` (int64 ``[H_r]``, sorted global ids): the partition's 1-hop
  halo (the non-core neighbours, in either direction, of its core nodes);
* ``original_ids.npy`` (int64 ``[n_r]``): each core node's id in the graph;
* ``features.npy`` (float32 ``[n_r, F]``), ``labels.npy`` (int64 ``[n_r]``) and
  ``train_mask.npy`` / ``val_mask.npy`` / ``test_mask.npy`` (bool ``[n_r]``)
  where the graph has them;
* with an HDR replication plan (HyDRA, ALGORITHMS.md §3):
  ``replica_ids.npy`` (int64 ``[R_r]``, sorted global ids), the plan's
  replicated nodes this rank does not own, and their rows
  ``replica_features.npy`` / ``replica_labels.npy``, which the distributed
  feature store serves locally instead of fetching them from their owners;
* with ``link=True``, the link-prediction files ``link_*.npy``
  (:mod:`gnncore.distributed.link_data`).

``manifest.json`` records the format and version, the sha256 of the graph's
and the partition's manifests (and the stage key made of them), the counts,
the ownership ``offsets``, each rank's files with byte size, sha256, dtype and
shape, and the sha256 of all that (``body_sha256``), so an edited manifest is
refused. :meth:`RankData.open` reads the manifest and the opening rank's own
files only.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.distributed.link_data import LINK_NOT_CORE_ROWS
from gnncore.errors import InputError
from gnncore.store.manifest import MANIFEST_FILE, check_plain_name, read_json_manifest, sha256_of
from gnncore.store.npy import load_npy

RANK_DATA_FORMAT = "gnncore.rank_data"
RANK_DATA_FORMAT_VERSION = 1
#: Node attributes a rank may hold: attribute name -> file stem.
NODE_ATTRS = {"x": "features", "y": "labels"}
SPLITS = ("train", "val", "test")
#: Files every rank holds, and the dtype of each.
REQUIRED = {
    "indptr": "<i8",
    "indices": "<i8",
    "edge_ids": "<i8",
    "halo": "<i8",
    "original_ids": "<i8",
}
OPTIONAL = {
    "features": "<f4",
    "labels": "<i8",
    **{f"{s}_mask": "|b1" for s in SPLITS},
    "replica_ids": "<i8",
    "replica_features": "<f4",
    "replica_labels": "<i8",
    **{name: "<i8" for name in ("link_indptr", *LINK_NOT_CORE_ROWS)},
}
#: Files whose rows are not the rank's core nodes.
NOT_CORE_ROWS = (
    "indices",
    "edge_ids",
    "halo",
    "replica_ids",
    "replica_features",
    "replica_labels",
    *LINK_NOT_CORE_ROWS,
)


def rank_dir_name(rank: int) -> str:
    """The sub-directory of rank ``rank``: ``rank_<rank>``."""
    return f"rank_{rank}"


def body_sha256(info: dict[str, Any]) -> str:
    """sha256 of a manifest without its ``body_sha256`` (canonical JSON)."""
    body = {k: v for k, v in info.items() if k != "body_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def owner_of(global_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The rank owning each global id: a binary search over the range bounds.

    Raises:
        IndexError: An id outside ``[0, offsets[-1])``.
    """
    ids = np.asarray(global_ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= offsets[-1]):
        raise IndexError(f"global ids must lie in [0, {int(offsets[-1])})")
    return np.searchsorted(offsets, ids, side="right").astype(np.int64) - 1


def _checked_offsets(info: dict[str, Any], file: Path) -> np.ndarray:
    try:
        offsets = np.asarray(info["offsets"], dtype=np.int64)
        parts, n = int(info["parts"]), int(info["num_nodes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"manifest field missing or malformed: {exc}", file) from exc
    if (
        offsets.shape != (parts + 1,)
        or offsets[0] != 0
        or offsets[-1] != n
        or np.any(np.diff(offsets) < 0)
    ):
        raise InputError("ownership offsets do not cover the nodes in rank order", file)
    return offsets


def _check_npy(file: Path, entry: dict[str, Any]) -> None:
    """Size, then header dtype and shape, against the manifest entry."""
    if not file.is_file():
        raise InputError("listed in the manifest but missing", file)
    size = file.stat().st_size
    if size != entry.get("bytes"):
        raise InputError(
            f"size is {size} bytes, manifest says {entry.get('bytes')} (truncated?)", file
        )
    array = load_npy(file)  # one line naming the file for any unsound header or size
    if array.dtype.str != entry.get("dtype") or list(array.shape) != entry.get("shape"):
        raise InputError(
            f"holds {array.dtype.str}{list(array.shape)}, manifest says "
            f"{entry.get('dtype')}{entry.get('shape')}",
            file,
        )


@dataclass(frozen=True)
class RankData:
    """One rank's data (see the module docstring), memory-mapped lazily.

    Attributes:
        path (Path): The rank-data directory (holding every rank's folder).
        rank (int): The rank this view belongs to.
        info (dict): The directory's manifest.
    """

    path: Path
    rank: int
    info: dict[str, Any]

    # Opening -------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], rank: int, verify: bool = False) -> RankData:
        """Open rank ``rank``'s data, reading the manifest and that rank's files only.

        Checks the manifest's format, version and ``body_sha256``, the
        ownership offsets, and each of the rank's files: present, of the
        recorded size, dtype and shape, and of the rank's row count; with
        ``verify`` also its sha256.

        Raises:
            InputError: One line naming the file and the problem.
        """
        path = Path(path)
        info, file = read_json_manifest(
            path, RANK_DATA_FORMAT, RANK_DATA_FORMAT_VERSION, "rank-data directory"
        )
        if info.get("body_sha256") != body_sha256(info):
            raise InputError("manifest does not match its body_sha256 (edited?)", file)
        offsets = _checked_offsets(info, file)
        parts = len(offsets) - 1
        if not 0 <= rank < parts:
            raise InputError(f"rank {rank} is outside [0, {parts})", file)
        ranks = info.get("ranks")
        if not isinstance(ranks, list) or len(ranks) != parts:
            raise InputError(f"manifest does not describe {parts} ranks", file)
        out = cls(path, rank, info)
        files = out._entries
        missing = [name for name in REQUIRED if f"{name}.npy" not in files]
        if missing:
            raise InputError(f"rank {rank} lists no {missing[0]}.npy", file)
        n_core = out.num_core
        for name, entry in files.items():
            check_plain_name(name, file)
            stem = name.removesuffix(".npy")
            expected = {**REQUIRED, **OPTIONAL}.get(stem)
            if expected is None or entry.get("dtype") != expected:
                raise InputError(f"rank {rank}: unexpected file or dtype for {name}", file)
            rows = entry.get("shape", [None])[0]
            want = n_core + 1 if stem in ("indptr", "link_indptr") else n_core
            if stem not in NOT_CORE_ROWS and rows != want:
                raise InputError(f"rank {rank}: {name} has {rows} rows, owns {want}", file)
            target = out.dir / name
            _check_npy(target, entry)
            if verify and sha256_of(target) != entry.get("sha256"):
                raise InputError("sha256 does not match the manifest (changed or corrupt)", target)
        edges = int(files["indices.npy"]["shape"][0])
        if files["edge_ids.npy"]["shape"] != [edges]:
            raise InputError(f"rank {rank}: edge_ids.npy and indices.npy differ in length", file)
        replica_rows = files.get("replica_ids.npy", {}).get("shape", [0])[0]
        for stem in ("replica_features", "replica_labels"):
            rows = files.get(f"{stem}.npy", {}).get("shape", [replica_rows])[0]
            if rows != replica_rows:
                raise InputError(
                    f"rank {rank}: {stem}.npy has {rows} rows for {replica_rows} replica ids", file
                )
        indptr = out.indptr
        if indptr[0] != 0 or indptr[-1] != edges or np.any(np.diff(indptr) < 0):
            raise InputError("row pointers do not span indices.npy", out.dir / "indptr.npy")
        if out.has("link_indptr"):
            link_edges = files.get("link_indices.npy", {}).get("shape", [None])[0]
            pointers = out.array("link_indptr")
            if (
                files.get("link_edge_ids.npy", {}).get("shape", [None])[0] != link_edges
                or pointers[0] != 0
                or pointers[-1] != link_edges
                or np.any(np.diff(pointers) < 0)
            ):
                raise InputError(
                    "link row pointers do not span link_indices.npy and link_edge_ids.npy",
                    out.dir / "link_indptr.npy",
                )
        return out

    # Layout --------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        """This rank's folder."""
        return self.path / rank_dir_name(self.rank)

    @property
    def _entries(self) -> dict[str, dict[str, Any]]:
        files = self.info["ranks"][self.rank].get("files")
        if not isinstance(files, dict):
            raise InputError(f"rank {self.rank} has no files mapping", self.path / MANIFEST_FILE)
        return files

    @cached_property
    def offsets(self) -> np.ndarray:
        """``int64[parts + 1]``: rank ``r`` owns global ids ``offsets[r]:offsets[r+1]``."""
        return np.asarray(self.info["offsets"], dtype=np.int64)

    @property
    def parts(self) -> int:
        """The number of ranks (partitions)."""
        return len(self.offsets) - 1

    @property
    def num_nodes(self) -> int:
        """Nodes of the whole graph."""
        return int(self.offsets[-1])

    @property
    def core_range(self) -> tuple[int, int]:
        """``(lo, hi)``: the global ids this rank owns."""
        return int(self.offsets[self.rank]), int(self.offsets[self.rank + 1])

    @property
    def num_core(self) -> int:
        lo, hi = self.core_range
        return hi - lo

    @property
    def num_features(self) -> int:
        return int(self.info.get("num_features", 0))

    @property
    def num_classes(self) -> int:
        return int(self.info.get("num_classes", 0))

    def owner(self, global_ids: np.ndarray) -> np.ndarray:
        """The rank owning each global id (no graph needed)."""
        return owner_of(global_ids, self.offsets)

    def is_core(self, global_ids: np.ndarray) -> np.ndarray:
        """Whether each global id is one of this rank's core nodes."""
        ids = np.asarray(global_ids, dtype=np.int64)
        lo, hi = self.core_range
        return (ids >= lo) & (ids < hi)

    def to_local(self, global_ids: np.ndarray) -> np.ndarray:
        """Local ids of core nodes given by global id (raises on a non-core id)."""
        ids = np.asarray(global_ids, dtype=np.int64)
        if not np.all(self.is_core(ids)):
            raise IndexError(f"not all ids are core nodes of rank {self.rank}")
        return ids - self.core_range[0]

    # Arrays --------------------------------------------------------------------

    def has(self, name: str) -> bool:
        """Whether this rank holds ``name.npy`` (``features``, ``labels``, ``train_mask``, …)."""
        return f"{name}.npy" in self._entries

    def array(self, name: str) -> np.ndarray:
        """``name.npy`` of this rank, memory-mapped read-only."""
        if not self.has(name):
            raise KeyError(f"{self.dir} has no {name}.npy")
        return load_npy(self.dir / f"{name}.npy")

    @cached_property
    def indptr(self) -> np.ndarray:
        return self.array("indptr")

    @cached_property
    def indices(self) -> np.ndarray:
        return self.array("indices")

    @property
    def halo(self) -> np.ndarray:
        return self.array("halo")

    def split_ids(self, split: str) -> np.ndarray:
        """Global ids of this rank's core nodes in ``split`` (``train``, ``val``, ``test``)."""
        mask = np.asarray(self.array(f"{split}_mask"))
        return np.flatnonzero(mask).astype(np.int64) + self.core_range[0]

    def replica_rows(self) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
        """``(ids, {"x": rows, "y": rows})`` of the replicated nodes this rank
        holds (HDR; only the attributes the graph has), ``None`` without a plan."""
        if not self.has("replica_ids"):
            return None
        rows = {
            attr: np.array(self.array(f"replica_{stem}"))
            for attr, stem in NODE_ATTRS.items()
            if self.has(f"replica_{stem}")
        }
        return np.array(self.array("replica_ids")), rows

    def verify(self) -> None:
        """Check the sha256 of this rank's files against the manifest."""
        for name, entry in self._entries.items():
            if sha256_of(self.dir / name) != entry.get("sha256"):
                raise InputError(
                    "sha256 does not match the manifest (changed or corrupt)", self.dir / name
                )

    def __repr__(self) -> str:
        lo, hi = self.core_range
        return (
            f"{type(self).__name__}({str(self.path)!r}, rank={self.rank}/{self.parts}, "
            f"core=[{lo}, {hi}), edges={len(self.indices)}, halo={len(self.halo)})"
        )
