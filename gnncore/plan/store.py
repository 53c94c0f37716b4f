"""A plan directory: named ``.npy`` arrays plus a JSON manifest.

Placement and replication plans are written the same way: into a temporary
sibling that is renamed into place (no half-written plan), with a manifest
that records the plan's kind, its settings and metrics, every array's dtype,
shape, byte size and sha256, and the sha256 of the manifests it was computed
from (the graph's; a replication plan also its partition's). Opening a plan
against a graph (or partition) whose manifest hash differs raises
:class:`~gnncore.errors.InputError`, so a plan of another graph, or of an older
version of the same graph, is never applied by mistake.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.errors import InputError
from gnncore.store import GraphDir, atomic_directory
from gnncore.store.atomic import check_output_dir as guard_output_dir
from gnncore.store.manifest import (
    MANIFEST_FILE,
    check_plain_name,
    npy_entry,
    read_json_manifest,
    sha256_of,
)
from gnncore.store.npy import load_npy

PLAN_FORMAT = "gnncore.plan"
#: Version 2: a placement stores per-device sorted lookup tables
#: (``cached_ids`` / ``cached_rows``, O(cache) per device) in place of v1's
#: ``[devices, N]`` ``dev_num`` / ``buf_pos``. Replication plans are the same in
#: both versions, so v1 replication plans still open.
PLAN_FORMAT_VERSION = 2
PLAN_KINDS = ("placement", "replication")
#: The arrays each kind of plan must hold.
REQUIRED_ARRAYS = {
    "placement": ("caches", "access", "cached_ids", "cached_rows"),
    "replication": ("replicated", "owner", "stored_ids"),
}


def _read_manifest(path: Path) -> tuple[dict[str, Any], Path]:
    """The manifest of a plan directory at :data:`PLAN_FORMAT_VERSION`, or a v1
    replication plan; a v1 placement is refused with what to run instead."""
    file = path / MANIFEST_FILE
    try:
        return read_json_manifest(path, PLAN_FORMAT, PLAN_FORMAT_VERSION, "plan directory")
    except InputError:
        info, _ = _peek(file)
        if info.get("format") != PLAN_FORMAT or info.get("format_version") != 1:
            raise
    if info.get("kind") == "replication":
        return read_json_manifest(path, PLAN_FORMAT, 1, "plan directory")
    raise InputError(
        "is a plan format v1 placement, whose [devices, N] lookup tables this version no "
        f"longer reads (format v{PLAN_FORMAT_VERSION} stores O(cache) tables per device): "
        "re-run `gnncore plan placement` (or materialize placement_plan) to rewrite it",
        path,
    )


def _peek(file: Path) -> tuple[dict[str, Any], Path]:
    """The manifest's JSON object, or ``{}`` when it cannot be read."""
    try:
        info = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}, file
    return (info if isinstance(info, dict) else {}), file


class PlanError(InputError):
    """A bad planning argument; the message names it."""

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        super().__init__(f"{argument} {problem}", path=None)

    def _format(self) -> str:
        return self.problem


@dataclass
class PlanReport:
    """What a planning call did: where the plan is and its summary metrics."""

    kind: str
    path: str
    metrics: dict[str, Any]
    settings: dict[str, Any]
    stage_key: str
    reused: bool = False
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reusable_plan(out_dir: str | os.PathLike[str], key: str, graph: GraphDir) -> PlanDir | None:
    """The plan at ``out_dir`` when it is complete, of ``graph`` as it is now, and
    records stage key ``key``; else ``None``."""
    if not (Path(out_dir) / MANIFEST_FILE).is_file():
        return None
    try:
        existing = PlanDir.open(out_dir, graph)
    except InputError:
        return None
    return existing if existing.info.get("stage_key") == key else None


@dataclass(frozen=True)
class PlanDir:
    """A read-only plan directory (see the module docstring)."""

    path: Path
    info: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.info["kind"])

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.info.get("settings", {}))

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.info.get("metrics", {}))

    @property
    def num_nodes(self) -> int:
        return int(self.info["num_nodes"])

    def array(self, name: str) -> np.ndarray:
        """The plan array ``name`` (memory-mapped), checked against the manifest."""
        entry = self.info["files"].get(f"{name}.npy")
        if entry is None:
            raise KeyError(f"{self.path} has no {name}.npy")
        file = self.path / f"{name}.npy"
        array = load_npy(file, mmap_mode="r")
        if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
            raise InputError(
                f"holds {array.dtype.str}{list(array.shape)}, manifest says "
                f"{entry['dtype']}{entry['shape']}",
                file,
            )
        return array

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        graph: GraphDir | None = None,
        kind: str | None = None,
    ) -> PlanDir:
        """Open and check a plan directory.

        Args:
            path: The plan directory.
            graph: When given, the plan must have been computed from this
                graph as it is now (same manifest sha256 and node count).
            kind: When given, the plan must be of this kind.

        Raises:
            InputError: Naming the file and the problem.
        """
        path = Path(path)
        info, file = _read_manifest(path)
        if info.get("kind") not in PLAN_KINDS:
            raise InputError(f"unknown plan kind {info.get('kind')!r}", file)
        if kind is not None and info["kind"] != kind:
            raise InputError(f"is a {info['kind']} plan, expected a {kind} plan", path)
        files = info.get("files")
        if not isinstance(files, dict):
            raise InputError("manifest lists no files", file)
        for key, kinds in (("num_nodes", (int,)), ("settings", (dict,)), ("metrics", (dict,))):
            if not isinstance(info.get(key), kinds) or isinstance(info.get(key), bool):
                raise InputError(f"manifest has no valid {key!r}", file)
        for name in REQUIRED_ARRAYS[info["kind"]]:
            if f"{name}.npy" not in files:
                raise InputError(f"manifest lists no {name}.npy", file)
        groups = info.get("peer_groups")
        if info["kind"] == "placement" and not (
            isinstance(groups, list)
            and all(
                isinstance(g, list) and all(isinstance(d, int) and d >= 0 for d in g)
                for g in groups
            )
        ):
            raise InputError("manifest has no valid 'peer_groups' (lists of devices)", file)
        for name, entry in files.items():
            check_plain_name(name, path)
            if not isinstance(entry, dict) or not all(
                k in entry for k in ("bytes", "dtype", "shape")
            ):
                raise InputError(f"manifest entry of {name} lacks bytes, dtype or shape", file)
            array = path / name
            if not array.is_file() or array.stat().st_size != entry.get("bytes"):
                raise InputError("missing, or its size differs from the manifest", array)
        plan = cls(path, info)
        if graph is not None:
            plan.check_graph(graph)
        return plan

    def check_graph(self, graph: GraphDir) -> None:
        """Raise :class:`InputError` unless this plan was computed from ``graph`` as it is."""
        if self.num_nodes != graph.num_nodes:
            raise InputError(
                f"plan covers {self.num_nodes} nodes, graph {graph.path} has {graph.num_nodes}",
                self.path / MANIFEST_FILE,
            )
        if self.info.get("graph_manifest_sha256") != sha256_of(graph.path / MANIFEST_FILE):
            raise InputError(
                f"plan was computed from another graph (or another version of "
                f"{graph.path}): graph manifest sha256 differs",
                self.path / MANIFEST_FILE,
            )


def check_output_dir(out: str | os.PathLike[str], inputs: list[Path]) -> None:
    """:func:`gnncore.store.atomic.check_output_dir` for a plan directory."""
    guard_output_dir(out, inputs, PLAN_FORMAT, "plan")


def write_plan_dir(
    out: str | os.PathLike[str],
    kind: str,
    graph: GraphDir,
    arrays: dict[str, np.ndarray],
    info: dict[str, Any],
    inputs: list[Path] | None = None,
) -> PlanDir:
    """Atomically write ``arrays`` (``<name>.npy``) and the manifest of a ``kind``
    plan of ``graph`` to ``out``; ``info`` adds keys (settings, metrics, inputs).
    ``out`` must not be (or hold) the graph or another of ``inputs``, nor an
    existing directory other than a plan (:func:`check_output_dir`)."""
    if kind not in PLAN_KINDS:
        raise ValueError(f"kind must be one of {PLAN_KINDS}, got {kind!r}")
    check_output_dir(out, [graph.path, *(inputs or [])])
    with atomic_directory(out) as tmp:
        files = {}
        for name, array in arrays.items():
            check_plain_name(f"{name}.npy", tmp)
            array = np.ascontiguousarray(array)
            np.save(tmp / f"{name}.npy", array)
            files[f"{name}.npy"] = npy_entry(tmp / f"{name}.npy")
        manifest = {
            "format": PLAN_FORMAT,
            "format_version": PLAN_FORMAT_VERSION,
            "kind": kind,
            "graph": str(graph.path.absolute()),
            "graph_manifest_sha256": sha256_of(graph.path / MANIFEST_FILE),
            "num_nodes": graph.num_nodes,
            "files": files,
            **info,
        }
        text = json.dumps(manifest, indent=2, sort_keys=True, default=str)
        (tmp / MANIFEST_FILE).write_text(text + "\n")
    return PlanDir.open(out, graph, kind)
