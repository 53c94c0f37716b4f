"""A drop folder of datasets: what a user puts there, what the pipeline sees.

Every edge-list file (``.csv``, ``.tsv``, ``.txt``, ``.edges``, ``.parquet``,
``.pq``, optionally ``.gz``) directly in the folder is one dataset, named by its
file name without extensions (lower-cased, characters other than letters,
digits, ``_`` and ``-`` turned into ``_``). Its node table, when there is one,
lies beside it as ``<stem>.nodes.<ext>`` or ``<stem>.features.<ext>``
(:mod:`gnncore.io.readers.node_table`). A dataset's **digest** is the sha256 of its
files' bytes, so a rewritten file with the same content is not new, and any
change to either file is.

Files still being written are left for a later look: a file counts only once
its size and modification time have stayed unchanged for ``settle_seconds``.
Hidden files (``.name``) and partial downloads (``*.part``, ``*.tmp``,
``*.crdownload``) are skipped. Two files that would give the same dataset name
(``a.csv`` and ``a.parquet``) are reported as a problem, not guessed between.

:class:`InboxState` remembers each file's size, mtime and digest, so only
changed files are read again (the sensor keeps it as its cursor, as JSON).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EDGE_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".parquet", ".pq")
NODE_TABLE_MARKERS = (".nodes", ".features")
PARTIAL_SUFFIXES = (".part", ".tmp", ".crdownload", ".partial")
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_CHUNK = 1 << 20


def dataset_name(path: Path) -> str:
    """The dataset name of an edge-list file (see the module docstring)."""
    name = path.name.lower()
    for suffix in (".gz", *EDGE_SUFFIXES):
        name = name.removesuffix(suffix)
    name = _UNSAFE.sub("_", name).strip("_-")
    return name or "dataset"


def _split_name(path: Path) -> tuple[str, str] | None:
    """``(stem, role)`` of a file in the folder (role ``edges`` or ``nodes``), or
    ``None`` for files that are no dataset file."""
    name = path.name.lower()
    if name.startswith(".") or name.endswith(PARTIAL_SUFFIXES):
        return None
    bare = name.removesuffix(".gz")
    suffix = next((s for s in EDGE_SUFFIXES if bare.endswith(s)), None)
    if suffix is None:
        return None
    stem = bare.removesuffix(suffix)
    for marker in NODE_TABLE_MARKERS:
        if stem.endswith(marker):
            return stem.removesuffix(marker), "nodes"
    return stem, "edges"


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class DroppedDataset:
    """One dataset in the drop folder.

    Attributes:
        name (str): The dataset name (safe as a directory name).
        edges (Path): The edge-list file.
        nodes (Path | None): Its node table, if any.
        digest (str): sha256 over the edge list's and the node table's digests.
    """

    name: str
    edges: Path
    nodes: Path | None
    digest: str

    @property
    def run_key(self) -> str:
        """A key unique to this name and content (the sensor's run key)."""
        return f"{self.name}-{self.digest[:16]}"


@dataclass
class InboxState:
    """What a previous look saw: per file its size, mtime and sha256, and per
    dataset the digest last requested (JSON round trip: :meth:`dumps` / :meth:`loads`)."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    requested: dict[str, str] = field(default_factory=dict)

    def dumps(self) -> str:
        return json.dumps({"files": self.files, "requested": self.requested}, sort_keys=True)

    @classmethod
    def loads(cls, text: str | None) -> InboxState:
        """The state a cursor holds; an empty or unreadable cursor starts afresh."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(dict(data.get("files", {})), dict(data.get("requested", {})))
        except (ValueError, AttributeError, TypeError):
            return cls()

    def digest_of(self, path: Path, stat: os.stat_result) -> str:
        """The file's sha256, read again only when its size or mtime changed."""
        seen = self.files.get(path.name)
        if seen and seen["size"] == stat.st_size and seen["mtime_ns"] == stat.st_mtime_ns:
            return str(seen["sha256"])
        digest = file_sha256(path)
        self.files[path.name] = {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": digest,
        }
        return digest


@dataclass(frozen=True)
class InboxScan:
    """One look at the folder: settled datasets, files still settling, problems."""

    datasets: list[DroppedDataset]
    settling: list[str]
    problems: list[str]


def scan_inbox(
    folder: str | os.PathLike[str],
    state: InboxState,
    settle_seconds: float = 10.0,
    now: float | None = None,
) -> InboxScan:
    """The datasets in ``folder`` whose files have settled, with their digests
    (``state`` is updated with the files' digests; a missing folder is empty)."""
    folder = Path(folder)
    now = time.time() if now is None else now
    groups: dict[str, dict[str, list[Path]]] = {}
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            parts = _split_name(path) if path.is_file() else None
            if parts is not None:
                stem, role = parts
                groups.setdefault(dataset_name(Path(stem)), {}).setdefault(role, []).append(path)
    present = {p.name for g in groups.values() for paths in g.values() for p in paths}
    state.files = {k: v for k, v in state.files.items() if k in present}
    datasets, settling, problems = [], [], []
    for name, roles in sorted(groups.items()):
        edges, nodes = roles.get("edges", []), roles.get("nodes", [])
        if not edges:
            problems.append(f"{nodes[0].name}: a node table without an edge list beside it")
            continue
        if len(edges) > 1 or len(nodes) > 1:
            clash = ", ".join(p.name for p in edges + nodes)
            problems.append(f"{clash}: several files give the dataset name {name!r}")
            continue
        files = edges + nodes
        stats = [p.stat() for p in files]
        if any(now - s.st_mtime < settle_seconds for s in stats):
            settling.append(name)
            continue
        digests = [state.digest_of(p, s) for p, s in zip(files, stats)]
        combined = hashlib.sha256("\n".join(digests).encode()).hexdigest()
        datasets.append(DroppedDataset(name, edges[0], nodes[0] if nodes else None, combined))
    return InboxScan(datasets, settling, problems)
