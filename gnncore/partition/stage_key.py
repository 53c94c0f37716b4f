"""The fingerprint of a partitioning (its stage key, :mod:`gnncore.store.versioning`)
and the reuse check of an existing partition directory against it."""

from __future__ import annotations

import os
from pathlib import Path

from gnncore.errors import InputError
from gnncore.partition.methods import MethodSettings, method_params
from gnncore.partition.store import PartitionDir
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.store.versioning import stage_key

#: Method settings that change how fast a partitioning runs, never its labels:
#: left out of the stage key, so a re-run with more workers reuses the output.
SPEED_ONLY = frozenset({"workers"})


def partition_stage_key(
    graph: GraphDir,
    method: str,
    parts: int,
    seed: int = 0,
    imbalance: float = 0.03,
    settings: MethodSettings | None = None,
    balance: bool = True,
    split_tolerance: float = 0.10,
) -> str:
    """The stage key (:mod:`gnncore.store.versioning`) of partitioning ``graph``
    so: the method, its label-changing settings, the options, and the sha256 of
    the graph's manifest. The partition manifest records it as ``stage_key``."""
    params = method_params(method, settings or MethodSettings())
    chosen = {k: v for k, v in params.items() if k not in SPEED_ONLY}
    return stage_key(
        "partition",
        {
            "method": method,
            "parts": parts,
            "seed": seed,
            "imbalance": imbalance,
            "balance": balance,
            "split_tolerance": split_tolerance,
            **chosen,
        },
        {"graph": sha256_of(graph.path / MANIFEST_FILE)},
    )


def reusable_partition(
    out_dir: str | os.PathLike[str], key: str, graph: GraphDir
) -> PartitionDir | None:
    """The partition at ``out_dir`` when it is complete, was computed from
    ``graph`` as it is now, and records stage key ``key``; else ``None``."""
    if not (Path(out_dir) / MANIFEST_FILE).is_file():
        return None
    try:
        existing = PartitionDir.open(out_dir, graph)
    except InputError:
        return None
    return existing if existing.info.get("stage_key") == key else None


__all__ = ["SPEED_ONLY", "partition_stage_key", "reusable_partition"]
