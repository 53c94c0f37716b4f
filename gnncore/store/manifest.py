"""The versioned JSON manifest of a graph directory.

A manifest lists every file of the directory with its dtype, shape, byte size
and sha256, plus the graph's counts. Readers check it before mapping any array:
file names must be plain names inside the directory, sizes must match, and the
declared dtypes must be the ones the format allows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gnncore.errors import InputError
from gnncore.names import safe_name

FORMAT_NAME = "gnncore.graph"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    """One file of a graph directory as the manifest records it."""

    name: str
    kind: str  # "npy" or "parquet"
    bytes: int
    sha256: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    rows: int | None = None  # parquet row count

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out

    @classmethod
    def from_json(cls, name: str, obj: dict[str, Any], where: Path) -> FileEntry:
        try:
            shape = obj.get("shape")
            return cls(
                name=name,
                kind=str(obj["kind"]),
                bytes=int(obj["bytes"]),
                sha256=str(obj["sha256"]),
                dtype=obj.get("dtype"),
                shape=None if shape is None else tuple(int(s) for s in shape),
                rows=None if obj.get("rows") is None else int(obj["rows"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"file entry {name!r} is malformed: {exc}", where) from exc


@dataclass(frozen=True)
class Manifest:
    """Counts and files of a graph directory.

    ``num_edges`` counts the stored adjacency entries (an undirected edge is
    stored in both directions); ``num_canonical_edges`` counts the rows of
    ``edges.parquet`` (each undirected edge once); ``num_undirected_edges``
    counts the distinct unordered node pairs (``edges_shuffled.npy``).
    """

    name: str
    num_nodes: int
    num_edges: int
    num_canonical_edges: int
    directed: bool
    num_undirected_edges: int = 0
    num_relations: int = 0
    num_features: int = 0
    num_classes: int = 0
    files: dict[str, FileEntry] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    #: How a versioned stage made this directory (:mod:`gnncore.store.versioning`):
    #: stage, stage_key, settings, inputs (name -> sha256). Empty, and left out
    #: of the JSON, for directories written outside a versioned stage.
    lineage: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["files"] = {k: v.to_json() for k, v in sorted(self.files.items())}
        if not self.lineage:
            del out["lineage"]
        return out

    def write(self, directory: Path) -> None:
        text = json.dumps(self.to_json(), indent=2, sort_keys=True)
        (directory / MANIFEST_FILE).write_text(text + "\n")

    @classmethod
    def read(cls, directory: str | Path) -> Manifest:
        """Read and structurally validate ``directory/manifest.json``; its ``name``
        must be a safe name (:func:`gnncore.names.safe_name`)."""
        directory = Path(directory)
        path = directory / MANIFEST_FILE
        if not path.is_file():
            raise InputError("not a gnncore graph directory (no manifest.json)", directory)
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise InputError("manifest is implausibly large", path)
        try:
            obj = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"manifest is not valid JSON: {exc}", path) from exc
        if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
            raise InputError(f"manifest format is not {FORMAT_NAME!r}", path)
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            raise InputError(
                f"unsupported format_version {version!r} (this gnncore reads {FORMAT_VERSION})",
                path,
            )
        files_obj = obj.get("files")
        if not isinstance(files_obj, dict):
            raise InputError("manifest has no 'files' mapping", path)
        files = {}
        for name, entry in files_obj.items():
            check_plain_name(name, path)
            if not isinstance(entry, dict):
                raise InputError(f"file entry {name!r} is not an object", path)
            files[name] = FileEntry.from_json(name, entry, path)
        undirected = obj.get("num_undirected_edges")  # absent in manifests before it existed
        lineage = obj.get("lineage", {})
        if not isinstance(lineage, dict):
            raise InputError("manifest 'lineage' is not an object", path)
        try:
            manifest = cls(
                name=str(obj["name"]),
                num_nodes=int(obj["num_nodes"]),
                num_edges=int(obj["num_edges"]),
                num_canonical_edges=int(obj["num_canonical_edges"]),
                directed=bool(obj["directed"]),
                num_undirected_edges=int(
                    obj["num_canonical_edges"] if undirected is None else undirected
                ),
                num_relations=int(obj.get("num_relations", 0)),
                num_features=int(obj.get("num_features", 0)),
                num_classes=int(obj.get("num_classes", 0)),
                files=files,
                stats=dict(obj.get("stats", {})),
                lineage=lineage,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"manifest field missing or malformed: {exc}", path) from exc
        # The name becomes paths (checkpoint directories, stage directories).
        safe_name(obj["name"], what="graph name", where=path)
        for count in (
            "num_nodes",
            "num_edges",
            "num_canonical_edges",
            "num_undirected_edges",
            "num_relations",
            "num_features",
            "num_classes",
        ):
            if getattr(manifest, count) < 0:
                raise InputError(f"manifest {count} is negative", path)
        return manifest


def check_plain_name(name: str, where: Path) -> None:
    """Reject names that could escape the directory (``..``, ``/``, absolute)."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or name.startswith(".")
        or "\x00" in name
    ):
        raise InputError(f"file name {name!r} in manifest is not a plain file name", where)


def sha256_of(path: Path, block: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def read_json_manifest(
    directory: str | Path, format_name: str, version: int, what: str
) -> tuple[dict[str, Any], Path]:
    """``(manifest, manifest path)`` of a directory of another gnncore format
    (partitions, plans, partitioned stores): the file must exist, hold a JSON
    object of ``format_name`` at ``version``; ``what`` names the directory kind in
    the error ("not a partition directory (no manifest.json)")."""
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        raise InputError(f"not a {what} (no manifest.json)", Path(directory))
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise InputError("manifest is implausibly large", path)
    try:
        info = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"manifest is not valid JSON: {exc}", path) from exc
    if (
        not isinstance(info, dict)
        or info.get("format") != format_name
        or info.get("format_version") != version
    ):
        raise InputError(f"not a {format_name} v{version} manifest", path)
    return info, path


def npy_entry(path: Path) -> dict[str, Any]:
    """The manifest entry of a written ``.npy`` file: bytes, sha256, dtype, shape
    (read from its header)."""
    import numpy as np

    array = np.load(path, mmap_mode="r", allow_pickle=False)
    entry = {
        "bytes": path.stat().st_size,
        "sha256": sha256_of(path),
        "dtype": array.dtype.str,
        "shape": list(array.shape),
    }
    del array
    return entry
