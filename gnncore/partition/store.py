"""A partition directory: ``assignment.npy`` plus a JSON manifest.

The manifest names the method, its options, the metrics, and the sha256 of
the graph manifest it was computed from, so a stale partition of a changed
graph is detected when it is opened against that graph.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from gnncore.errors import InputError
from gnncore.store import GraphDir, atomic_directory
from gnncore.store.atomic import check_output_dir
from gnncore.store.manifest import (
    MANIFEST_FILE,
    check_plain_name,
    read_json_manifest,
    sha256_of,
)
from gnncore.store.npy import load_npy
from gnncore.store.versioning import versioned_name

PARTITION_FORMAT = "gnncore.partition"
PARTITION_FORMAT_VERSION = 1


@dataclass(frozen=True)
class PartitionDir:
    """A read-only partition directory."""

    path: Path
    info: dict[str, Any]

    @property
    def parts(self) -> int:
        return int(self.info["parts"])

    @property
    def method(self) -> str:
        return str(self.info["method"])

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.info["metrics"])

    def assignment(self) -> np.ndarray:
        return load_npy(self.path / "assignment.npy", mmap_mode="r")

    def array(self, name: str) -> np.ndarray:
        """An extra array listed in the manifest (``offsets``, ``halo_0``, …)."""
        entry = self.info.get("files", {}).get(f"{name}.npy")
        file = self.path / f"{name}.npy"
        if entry is None:
            raise KeyError(f"{self.path} has no {name}.npy")
        if not file.is_file() or file.stat().st_size != entry["bytes"]:
            raise InputError("missing or its size differs from the manifest", file)
        return load_npy(file, mmap_mode="r")

    @classmethod
    def open(cls, path: str | os.PathLike[str], graph: GraphDir | None = None) -> PartitionDir:
        """Open and check a partition directory (against ``graph`` when given)."""
        path = Path(path)
        info, file = read_json_manifest(
            path, PARTITION_FORMAT, PARTITION_FORMAT_VERSION, "partition directory"
        )
        array = path / "assignment.npy"
        if not array.is_file() or array.stat().st_size != info.get("assignment_bytes"):
            raise InputError(
                "assignment.npy is missing or its size differs from the manifest", array
            )
        out = cls(path, info)
        assignment = out.assignment()
        if assignment.dtype != np.int64 or assignment.ndim != 1:
            raise InputError(
                f"assignment must be int64[N], got {assignment.dtype}{assignment.shape}", array
            )
        if len(assignment) and (assignment.min() < 0 or assignment.max() >= out.parts):
            raise InputError(f"assignment holds a part outside [0, {out.parts})", array)
        if graph is not None:
            if len(assignment) != graph.num_nodes:
                raise InputError(
                    f"assignment has {len(assignment)} entries, graph "
                    f"{graph.path} has {graph.num_nodes} nodes",
                    array,
                )
            if info.get("graph_manifest_sha256") != sha256_of(graph.path / MANIFEST_FILE):
                raise InputError(
                    f"partition was computed from a different version of {graph.path}", file
                )
        return out


def partition_stage_inputs(graph: GraphDir, partition: PartitionDir) -> dict[str, str]:
    """What a stage built on ``partition`` of ``graph`` (a plan, a partitioned
    store) hashes into its stage key beside its settings: both manifests' sha256."""
    return {
        "graph": sha256_of(graph.path / MANIFEST_FILE),
        "partition": sha256_of(partition.path / MANIFEST_FILE),
    }


def partition_stage_dir(
    root: str | os.PathLike[str], partition: PartitionDir, label: str, key: str
) -> Path:
    """Where the versioned pipeline keeps such a stage:
    ``<root>/<partition dir name>-<label>-<stage key>``."""
    return Path(root).absolute() / versioned_name(f"{partition.path.name}-{label}", key)


class NpyStream:
    """A 1-D ``.npy`` file written a chunk at a time: the header numpy's
    :func:`numpy.save` writes for ``length`` items of ``dtype``, then the
    chunks appended in order (byte for byte ``np.save`` of their concatenation).
    :meth:`close` checks that exactly ``length`` items came."""

    def __init__(self, path: Path, dtype: DTypeLike, length: int) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = int(length)
        self.written = 0
        self._fh = open(path, "wb")
        np.lib.format.write_array_header_1_0(
            self._fh,
            {
                "descr": np.lib.format.dtype_to_descr(self.dtype),
                "fortran_order": False,
                "shape": (self.length,),
            },
        )

    def append(self, chunk: np.ndarray) -> None:
        data = np.ascontiguousarray(chunk, dtype=self.dtype)
        if data.ndim != 1:
            raise ValueError(f"chunks must be 1-D, got shape {data.shape}")
        if self.written + len(data) > self.length:
            raise ValueError(f"{self.path}: more than the {self.length} items announced")
        self._fh.write(data.tobytes())
        self.written += len(data)

    def close(self) -> None:
        self._fh.close()
        if self.written != self.length:
            raise ValueError(
                f"{self.path}: {self.written} items written, the header announced {self.length}"
            )

    def __enter__(self) -> NpyStream:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self._fh.close()


class PartitionDirWriter:
    """Writes the files of a partition directory into its temporary directory
    (see :func:`partition_dir_writer`): the assignment, extra arrays whole
    (:meth:`save`) or a chunk at a time (:meth:`stream`), then the manifest."""

    def __init__(self, tmp: Path, graph: GraphDir) -> None:
        self.tmp = tmp
        self.graph = graph
        self._names: list[str] = []

    def save_assignment(self, assignment: np.ndarray) -> None:
        np.save(self.tmp / "assignment.npy", np.ascontiguousarray(assignment, dtype=np.int64))

    def save(self, name: str, array: np.ndarray) -> None:
        """``<name>.npy`` holding ``array`` (``np.save``)."""
        check_plain_name(f"{name}.npy", self.tmp)
        np.save(self.tmp / f"{name}.npy", np.ascontiguousarray(array))
        self._names.append(name)

    def stream(self, name: str, dtype: DTypeLike, length: int) -> NpyStream:
        """``<name>.npy`` of ``length`` items of ``dtype``, written by the
        returned :class:`NpyStream` (use it as a context manager)."""
        check_plain_name(f"{name}.npy", self.tmp)
        self._names.append(name)
        return NpyStream(self.tmp / f"{name}.npy", dtype, length)

    def write_manifest(self, info: dict[str, Any]) -> None:
        """The manifest: the graph it was computed from, every file's size and
        sha256 (read back in blocks), and ``info``."""
        tmp, graph = self.tmp, self.graph
        files = {
            f"{name}.npy": {
                "bytes": (tmp / f"{name}.npy").stat().st_size,
                "sha256": sha256_of(tmp / f"{name}.npy"),
            }
            for name in self._names
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


@contextmanager
def partition_dir_writer(
    out: str | os.PathLike[str], graph: GraphDir
) -> Iterator[PartitionDirWriter]:
    """A :class:`PartitionDirWriter` over a temporary directory that replaces
    ``out`` atomically when the block ends without error (and is removed if it
    raises); ``out`` must not be (or hold) the graph, nor an existing directory
    other than a partition."""
    check_output_dir(out, [graph.path], PARTITION_FORMAT, "partition")
    with atomic_directory(out) as tmp:
        yield PartitionDirWriter(tmp, graph)


def write_partition_dir(
    out: str | os.PathLike[str],
    graph: GraphDir,
    assignment: np.ndarray,
    info: dict[str, Any],
    arrays: dict[str, np.ndarray] | None = None,
) -> PartitionDir:
    """Atomically write ``assignment``, extra ``arrays`` (``<name>.npy``: relabelling
    maps, halos) and the manifest to ``out``; ``out`` must not be (or hold) the
    graph, nor an existing directory other than a partition."""
    with partition_dir_writer(out, graph) as writer:
        writer.save_assignment(assignment)
        for name, array in (arrays or {}).items():
            writer.save(name, array)
        writer.write_manifest(info)
    return PartitionDir.open(out, graph)
