"""HDR: high-degree vertex replication on top of a partition (HyDRA; ALGORITHMS.md §3).

Every partition stores the neighbour lists of the nodes it owns. HDR also
gives every partition the lists of the ``round(rate · N)`` highest-degree
nodes ``V_r`` (degree in the symmetrised graph, ties to the smaller id), so
sampling a replicated node never leaves the partition. The price is memory:
each replicated list is stored ``M`` times instead of once.

By default the partition's labels are kept (the pipeline replicates on top of
GREM or METIS). With ``group_size`` the non-replicated nodes are re-assigned
as HyDRA's Algorithm 1 does: in descending-degree order, in groups of
``group_size``, each group to the partition with the smallest degree sum; the
replicated nodes then get owners round-robin in degree order (they are local
everywhere, so their owner only decides which partition trains on them).

Threshold pruning (a remote list is read as a window of
``θ = ceil(prune_alpha · avg_degree + prune_beta · fanout)`` ids) is a
sampling-time rule; the plan records its parameters.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.options import option
from gnncore.partition.base import symmetric_degree
from gnncore.partition.store import PartitionDir, partition_stage_dir, partition_stage_inputs
from gnncore.plan.memory import check_budget, memory_metrics, replication_memory_bytes
from gnncore.plan.store import (
    PlanDir,
    PlanError,
    PlanReport,
    check_output_dir,
    reusable_plan,
    write_plan_dir,
)
from gnncore.plan.tracking import log_plan_run
from gnncore.plots import panels_png
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.store.versioning import stage_key
from gnncore.tracking import RunTracker
from gnncore.typing import require_csrc


@dataclass(frozen=True)
class ReplicationSettings:
    """What an HDR replication plan is computed from.

    Args:
        rate: Replication rate ``p_r`` in [0, 1]: the share of nodes replicated.
        group_size: When set, re-assign non-replicated nodes with HyDRA's
            degree-balanced greedy in groups of this size (see module docs).
        prune_alpha, prune_beta: Threshold-pruning weights (default 1, 1).
    """

    rate: float = option(0.01, "Replication rate p_r in [0, 1]: the share of nodes replicated.")
    group_size: int | None = option(
        None,
        "Re-assign the non-replicated nodes with HyDRA's degree-balanced greedy in "
        "groups of this size (default: keep the partition's labels).",
    )
    prune_alpha: float = option(1.0, "Threshold pruning: weight of the average degree in θ.")
    prune_beta: float = option(1.0, "Threshold pruning: weight of the fanout in θ.")

    def validate(self) -> None:
        """Raise :class:`PlanError` naming the first bad argument."""
        if not (np.isfinite(self.rate) and 0.0 <= self.rate <= 1.0):
            raise PlanError("rate", f"must be in [0, 1], got {self.rate}")
        if self.group_size is not None and self.group_size < 1:
            raise PlanError("group_size", f"must be >= 1, got {self.group_size}")
        for name in ("prune_alpha", "prune_beta"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise PlanError(name, f"must be a finite number >= 0, got {value}")


def degree_order(degree: np.ndarray) -> np.ndarray:
    """Node ids by descending degree, ties to the smaller id (``int64[N]``)."""
    order = np.argsort(-np.asarray(degree, dtype=np.int64), kind="stable")
    return order.astype(np.int64, copy=False)


def replicated_nodes(
    degree: np.ndarray, rate: float, order: np.ndarray | None = None
) -> np.ndarray:
    """``V_r``: the ``round(rate · N)`` highest-degree nodes (ties: smaller id),
    ascending; ``order`` is :func:`degree_order` when the caller has it."""
    count = int(round(rate * len(degree)))
    if count == 0:
        return np.empty(0, dtype=np.int64)
    if order is None:
        order = degree_order(degree)
    return np.sort(order[:count]).astype(np.int64)


def hydra_owners(
    degree: np.ndarray, parts: int, group_size: int, replicated: np.ndarray
) -> np.ndarray:
    """HyDRA's Algorithm 1 assignment: degree-balanced groups for ``V \\ V_r``,
    then ``V_r`` round-robin in descending-degree order."""
    require_csrc()
    degree = np.ascontiguousarray(degree, dtype=np.int64)
    skip = np.zeros(len(degree), dtype=np.uint8)
    skip[replicated] = 1
    owner = np.asarray(_C.degree_greedy_assign(degree, parts, group_size, skip), dtype=np.int64)
    if len(replicated):
        by_degree = replicated[np.argsort(-degree[replicated], kind="stable")]
        owner[by_degree] = np.arange(len(by_degree), dtype=np.int64) % parts
    return owner


def stored_ids(
    list_lengths: np.ndarray, owner: np.ndarray, parts: int, replicated: np.ndarray
) -> np.ndarray:
    """Neighbour ids each partition stores: its own nodes' lists plus the lists
    of the replicated nodes it does not own. ``int64[parts]``."""
    own = np.bincount(owner, weights=list_lengths, minlength=parts).astype(np.int64)
    if not len(replicated):
        return own
    rep_total = int(list_lengths[replicated].sum())
    rep_own = np.bincount(
        owner[replicated], weights=list_lengths[replicated], minlength=parts
    ).astype(np.int64)
    return own + rep_total - rep_own


@dataclass
class Replication:
    """A computed replication plan."""

    settings: ReplicationSettings
    parts: int
    replicated: np.ndarray  # int64[|V_r|], ascending
    owner: np.ndarray  # int64[N]
    stored: np.ndarray  # int64[parts]: neighbour ids stored per partition
    num_ids: int  # neighbour ids stored without replication (E)
    avg_degree: float
    seconds: float
    curve: dict[str, list[float]]

    @property
    def memory_increase(self) -> float:
        """Extra neighbour ids stored / ids stored without replication."""
        return float(self.stored.sum() - self.num_ids) / max(self.num_ids, 1)

    def prune_threshold(self, fanout: int) -> int:
        """θ for a hop of ``fanout`` (ids of a remote list read under pruning)."""
        s = self.settings
        return int(np.ceil(s.prune_alpha * self.avg_degree + s.prune_beta * max(fanout, 0)))

    def metrics(self) -> dict[str, Any]:
        return {
            "parts": self.parts,
            "rate": self.settings.rate,
            "replicated_nodes": int(len(self.replicated)),
            "memory_increase": self.memory_increase,
            "stored_ids": [int(x) for x in self.stored],
            "stored_ids_without_replication": self.num_ids,
            "avg_degree": self.avg_degree,
            "prune_alpha": self.settings.prune_alpha,
            "prune_beta": self.settings.prune_beta,
            "seconds": self.seconds,
            "memory_curve": self.curve,
        }


def compute_replication(
    graph: GraphDir,
    assignment: np.ndarray,
    parts: int,
    settings: ReplicationSettings,
    progress: Callable[[str], None] | None = None,
) -> Replication:
    """Choose ``V_r`` and the owners (nothing written). Holds O(N) arrays: the
    degrees (from ``indptr``, or streamed pairs of a directed graph), one degree
    order shared by the plan and its memory curve, the owners and the list
    lengths; the CSR's ``indices`` are never read."""
    settings.validate()
    started = time.perf_counter()
    degree = symmetric_degree(graph)
    order = degree_order(degree)
    replicated = replicated_nodes(degree, settings.rate, order)
    if progress is not None:
        progress(f"degrees of {len(degree)} nodes ranked in {time.perf_counter() - started:.1f}s")
    if settings.group_size is not None:
        owner = hydra_owners(degree, parts, settings.group_size, replicated)
    else:
        owner = np.array(assignment, dtype=np.int64)  # one copy, whatever the dtype
    m = graph.manifest
    if not m.directed and not m.num_relations:
        lengths = degree  # the CSR's row lengths (symmetric_degree read them)
    else:
        lengths = np.diff(np.asarray(graph.indptr, dtype=np.int64))
    stored = stored_ids(lengths, owner, parts, replicated)
    num_ids = int(lengths.sum())
    curve = memory_curve(degree, lengths, owner, parts, order)
    return Replication(
        settings,
        parts,
        replicated,
        owner,
        stored,
        num_ids,
        num_ids / max(graph.num_nodes, 1),
        time.perf_counter() - started,
        curve,
    )


def replication_stage_key(
    graph: GraphDir, partition: PartitionDir, settings: ReplicationSettings
) -> str:
    """Stage key: the settings and the graph and partition manifests' sha256."""
    return stage_key("replication", asdict(settings), partition_stage_inputs(graph, partition))


def replication_dir(
    plans_root: str | os.PathLike[str],
    graph: GraphDir,
    partition: PartitionDir,
    settings: ReplicationSettings,
) -> Path:
    """Where the versioned pipeline keeps this plan:
    ``<plans_root>/<partition dir name>-hdr-r<rate>-<stage key>``."""
    key = replication_stage_key(graph, partition, settings)
    return partition_stage_dir(plans_root, partition, f"hdr-r{settings.rate:g}", key)


def plan_replication(
    graph_dir: str | os.PathLike[str],
    partition_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    settings: ReplicationSettings,
    *,
    reuse: bool = False,
    progress: Callable[[str], None] | None = None,
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
    memory_budget: int | None = None,
) -> PlanReport:
    """Compute an HDR replication plan of a partitioned graph into ``out_dir``.

    Writes ``replicated.npy`` (int64, ascending ids of ``V_r``), ``owner.npy``
    (int64[N], the partition each node's list lives in) and ``stored_ids.npy``
    (int64[M]) with a manifest recording the graph's and the partition's
    manifest sha256, atomically. Needs O(N) memory
    (:func:`~gnncore.plan.memory.replication_memory_bytes`); with
    ``memory_budget`` (bytes) below that estimate it refuses before any work.

    Raises:
        PlanError: For a rate outside [0, 1], a bad group size or a memory
            budget below the estimate.
        InputError: When the partition was not computed from this graph.
    """
    settings.validate()
    graph = GraphDir.open(graph_dir)
    graph.check_structure()
    partition = PartitionDir.open(partition_dir, graph)
    check_output_dir(out_dir, [graph.path, partition.path])
    key = replication_stage_key(graph, partition, settings)
    existing = reusable_plan(out_dir, key, graph) if reuse else None
    if existing is not None:
        if progress is not None:
            progress(f"{out_dir} already holds this replication plan (stage key {key}): reused")
        return PlanReport(
            "replication", str(out_dir), existing.metrics, existing.settings, key, True
        )
    needed = replication_memory_bytes(graph.num_nodes)
    line = check_budget(f"replication plan of {graph.num_nodes} nodes", needed, memory_budget)
    if progress is not None:
        progress(line)
        progress(
            f"choosing the top {settings.rate:.4%} nodes by degree over {partition.parts} parts"
        )
    plan = compute_replication(graph, partition.assignment(), partition.parts, settings, progress)
    metrics = {**plan.metrics(), **memory_metrics(needed, memory_budget)}
    if progress is not None:
        progress(
            f"{len(plan.replicated)} nodes replicated, memory +{plan.memory_increase:.2%}; "
            f"writing {out_dir}"
        )
    write_plan_dir(
        out_dir,
        "replication",
        graph,
        {"replicated": plan.replicated, "owner": plan.owner, "stored_ids": plan.stored},
        {
            "settings": asdict(settings),
            "metrics": metrics,
            "stage_key": key,
            "partition": str(partition.path.absolute()),
            "partition_manifest_sha256": sha256_of(partition.path / MANIFEST_FILE),
            "partition_method": partition.method,
        },
        inputs=[partition.path],
    )
    report = PlanReport("replication", str(out_dir), metrics, asdict(settings), key)
    if tracking is not None:
        name = graph.manifest.name
        report.run_id = log_plan_run(
            tracking,
            f"{name}-hdr-r{settings.rate:g}",
            {"dataset": name, "task": "replication", "stage_key": key, **(tags or {})},
            {**asdict(settings), "parts": partition.parts, "partition_method": partition.method},
            metrics,
            {"memory_increase.png": memory_chart(metrics)},
        )
    return report


#: Replication rates of the memory-increase curve every plan reports.
CURVE_RATES = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1)


def memory_curve(
    degree: np.ndarray,
    lengths: np.ndarray,
    owner: np.ndarray,
    parts: int,
    order: np.ndarray | None = None,
) -> dict[str, list[float]]:
    """Memory increase at each of :data:`CURVE_RATES` with these owners (one
    degree sort for all rates: ``order``, else :func:`degree_order`)."""
    increase = []
    total = max(int(lengths.sum()), 1)
    if order is None:
        order = degree_order(degree)
    for rate in CURVE_RATES:
        stored = stored_ids(lengths, owner, parts, replicated_nodes(degree, rate, order))
        increase.append(float(stored.sum() - total) / total)
    return {"rates": list(CURVE_RATES), "memory_increase": increase}


def memory_chart(metrics: Mapping[str, Any]) -> bytes:
    """PNG: memory increase against the replication rate, this plan's rate marked."""
    curve = metrics["memory_curve"]
    rates = [100 * r for r in curve["rates"]]
    return panels_png(
        {
            "memory increase (extra ids / ids)": {
                "HDR": (rates, curve["memory_increase"]),
                "this plan": ([100 * metrics["rate"]], [metrics["memory_increase"]]),
            }
        },
        "replicated nodes p_r (%)",
    )


@dataclass(frozen=True)
class ReplicationPlan:
    """An opened replication plan directory."""

    plan: PlanDir

    @classmethod
    def open(cls, path: str | os.PathLike[str], graph: GraphDir | None = None) -> ReplicationPlan:
        return cls(PlanDir.open(path, graph, kind="replication"))

    @property
    def parts(self) -> int:
        return int(self.plan.metrics["parts"])

    def replicated(self) -> np.ndarray:
        return self.plan.array("replicated")

    def owner(self) -> np.ndarray:
        return self.plan.array("owner")

    def replicated_mask(self) -> np.ndarray:
        mask = np.zeros(self.plan.num_nodes, dtype=bool)
        mask[np.asarray(self.replicated())] = True
        return mask


def replication_problems(
    plan: ReplicationPlan, graph: GraphDir, partition: PartitionDir | None = None
) -> list[str]:
    """What is wrong with ``plan`` as a replication plan of ``graph`` (empty: nothing):
    computed from ``graph`` as it is (and from ``partition`` as it is, when
    given: same manifest sha256, and the partition's labels as owners unless
    ``group_size`` re-assigned them); replicated ids unique nodes of the graph;
    every owner a partition; the replicated count ``round(rate · N)``."""
    try:
        plan.plan.check_graph(graph)
    except InputError as exc:
        return [str(exc)]
    problems = []
    if partition is not None:
        if plan.plan.info.get("partition_manifest_sha256") != sha256_of(
            partition.path / MANIFEST_FILE
        ):
            problems.append(f"the plan was computed from another version of {partition.path}")
        elif plan.plan.settings.get("group_size") is None and not np.array_equal(
            np.asarray(plan.owner()), np.asarray(partition.assignment())
        ):
            problems.append("owners differ from the partition's labels")
    n = graph.num_nodes
    replicated = np.asarray(plan.replicated())
    owner = np.asarray(plan.owner())
    if len(replicated) and (replicated.min() < 0 or replicated.max() >= n):
        problems.append(f"a replicated id is outside [0, {n})")
    if len(np.unique(replicated)) != len(replicated):
        problems.append("a node is replicated twice")
    if len(owner) != n or (n and (owner.min() < 0 or owner.max() >= plan.parts)):
        problems.append(f"owners must be {n} partitions in [0, {plan.parts})")
    expected = int(round(float(plan.plan.settings["rate"]) * n))
    if len(replicated) != expected:
        problems.append(f"{len(replicated)} nodes replicated, the rate asks for {expected}")
    return problems
