"""Feature placement across devices (Song & Jiang; ALGORITHMS.md §4).

A placement decides which nodes' features each device caches. Nodes are
ranked by an estimated access frequency (:mod:`gnncore.plan.estimators`);
devices in one *peer group* (linked by NVLink/NVSwitch) share their caches:
the group's devices start with the same hottest nodes and Algorithm 1
(corrected) swaps the coldest of them for further nodes, spread over the
devices, while a new node is hotter than ``alpha`` times the one it replaces
(``alpha`` ≈ C_gpu / C_cpu). Devices in different groups cannot read each
other's caches, so every group gets the same layout (Rule 1: with topology
``"none"`` each device caches the hottest nodes).

At run time device ``d`` reads node ``v`` from its own cache, else from the
lowest-numbered peer caching it, else from host memory; the plan stores, per
device, the sorted ids it caches and their rows (:mod:`gnncore.plan.lookup`,
O(cache) per device), and training resolves a node by binary search. The
planner streams the CSR (memory-mapped) and holds O(N) vectors, so it runs on
graphs whose CSR does not fit in memory (:mod:`gnncore.plan.memory`). The cost
model prices a read 0 from the own cache, ``alpha`` from a peer's and 1 from
the host; :attr:`Placement.predicted_cost` is each device's expected cost per
training node, ``Σ_v p_v · cost_d(v)`` with ``p_v = f_v / |train|``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from gnncore import _C
from gnncore.errors import InputError
from gnncore.options import option
from gnncore.plan.estimators import ESTIMATORS, Estimator, estimate_access
from gnncore.plan.lookup import group_of, lookup_tables, read_masks, resolve, sorted_tables
from gnncore.plan.memory import check_budget, memory_metrics, placement_memory_bytes
from gnncore.plan.store import (
    PlanDir,
    PlanError,
    PlanReport,
    check_output_dir,
    reusable_plan,
    write_plan_dir,
)
from gnncore.plan.tracking import log_plan_run
from gnncore.plots import stacked_bars_png
from gnncore.store import GraphDir
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.store.versioning import stage_key, versioned_name
from gnncore.tracking import RunTracker
from gnncore.typing import require_csrc

#: How devices are linked: ``"all"`` (every pair, e.g. NVSwitch), ``"pairs"``
#: (NVLink pairs 0-1, 2-3, …) or ``"none"`` (PCIe only: no peer reads).
Topology = Literal["all", "pairs", "none"]
TOPOLOGIES: tuple[str, ...] = get_args(Topology)
#: ``alpha`` when none is given (the paper's hardware constants).
DEFAULT_ALPHA = {"all": 0.0, "pairs": 0.2, "none": 0.0}
#: Which nodes count as training nodes: the graph's train split, or every node.
TrainNodes = Literal["auto", "split", "all"]


@dataclass(frozen=True)
class PlacementSettings:
    """What a placement plan is computed from; each field is one CLI flag and one
    Dagster config field (:func:`~gnncore.options.describe_options`).

    The cache size is ``cache_nodes``, else ``cache_bytes``, else
    ``cache_fraction`` of the graph's nodes.
    """

    devices: int = option(4, "Devices n that cache features (>= 1).")
    cache_nodes: int | None = option(None, "Cache slots per device, in nodes.")
    cache_bytes: int | None = option(
        None, "Cache per device in bytes of float32 features (instead of cache_nodes)."
    )
    cache_fraction: float = option(
        0.1, "Cache per device as a share of the graph's nodes, when neither size is given."
    )
    alpha: float | None = option(
        None,
        "Peer-read cost relative to a host read, C_gpu / C_cpu (default: 0 for topology "
        "all, 0.2 for pairs).",
    )
    topology: Topology = option(
        "all", "How devices are linked: all (NVSwitch), pairs (NVLink pairs), none (PCIe)."
    )
    layers: int = option(2, "GNN layers L the access estimator looks ahead.")
    estimator: Estimator = option(
        "spmv",
        "Access-frequency estimator: spmv (path counts), reach (exact, small graphs), "
        "presample (sampled epochs).",
    )
    train_nodes: TrainNodes = option(
        "auto",
        "Training nodes: the graph's train split (split), every node (all), or the split "
        "when the graph has one, else every node (auto).",
    )
    fanouts: tuple[int, ...] | None = option(
        None, "presample: neighbours per hop (default: 10 per layer)."
    )
    presample_epochs: int = option(1, "presample: sampled epochs counted.")
    batch_size: int = option(1024, "presample: seeds per mini-batch.")
    seed: int = option(0, "presample: random seed.")

    @property
    def resolved_alpha(self) -> float:
        return DEFAULT_ALPHA[self.topology] if self.alpha is None else float(self.alpha)

    def validate(self) -> None:
        """Raise :class:`PlanError` naming the first bad argument."""
        if self.devices < 1:
            raise PlanError("devices", f"must be >= 1, got {self.devices}")
        if self.cache_nodes is not None and self.cache_bytes is not None:
            raise PlanError("cache_nodes", "and cache_bytes exclude each other (give one)")
        if not (np.isfinite(self.cache_fraction) and 0 <= self.cache_fraction <= 1):
            raise PlanError("cache_fraction", f"must be in [0, 1], got {self.cache_fraction}")
        if self.cache_nodes is not None and self.cache_nodes < 0:
            raise PlanError("cache_nodes", f"must be >= 0, got {self.cache_nodes}")
        if self.cache_bytes is not None and self.cache_bytes < 0:
            raise PlanError("cache_bytes", f"must be >= 0, got {self.cache_bytes}")
        if self.topology not in TOPOLOGIES:
            raise PlanError("topology", f"must be one of {', '.join(TOPOLOGIES)}")
        alpha = self.resolved_alpha
        if not (np.isfinite(alpha) and alpha >= 0):
            raise PlanError("alpha", f"must be a finite number >= 0, got {self.alpha}")
        if self.layers < 0:
            raise PlanError("layers", f"must be >= 0, got {self.layers}")
        if self.estimator not in ESTIMATORS:
            raise PlanError("estimator", f"must be one of {', '.join(ESTIMATORS)}")
        if self.train_nodes not in ("auto", "split", "all"):
            raise PlanError(
                "train_nodes", f"must be 'auto', 'split' or 'all', got {self.train_nodes!r}"
            )
        if self.presample_epochs < 1:
            raise PlanError("presample_epochs", f"must be >= 1, got {self.presample_epochs}")
        if self.batch_size < 1:
            raise PlanError("batch_size", f"must be >= 1, got {self.batch_size}")
        if self.fanouts is not None:
            if len(self.fanouts) != self.layers:
                raise PlanError(
                    "fanouts", f"needs one fan-out per layer ({self.layers}), got {self.fanouts}"
                )
            if any(f < -1 for f in self.fanouts):
                raise PlanError("fanouts", f"must be >= 0 or -1 (all), got {self.fanouts}")
        if self.estimator == "presample" and self.layers < 1:
            raise PlanError("layers", "must be >= 1 for the presample estimator")

    def key_settings(self) -> dict[str, Any]:
        """The settings that change the plan (all of them), for the stage key."""
        out = asdict(self)
        out["alpha"] = self.resolved_alpha
        return out


def peer_groups(devices: int, topology: str) -> list[list[int]]:
    """The device groups that read each other's caches under ``topology``."""
    if topology == "all":
        return [list(range(devices))]
    if topology == "pairs":
        return [list(range(d, min(d + 2, devices))) for d in range(0, devices, 2)]
    if topology == "none":
        return [[d] for d in range(devices)]
    raise PlanError("topology", f"must be one of {', '.join(TOPOLOGIES)}, got {topology!r}")


def place_caches(
    access: np.ndarray, devices: int, slots: int, alpha: float, topology: str = "all"
) -> np.ndarray:
    """``int64[devices, min(slots, N)]``: the nodes each device caches.

    Algorithm 1 (corrected, ``_C.place_features``) runs once per distinct
    peer-group size; every group of that size gets the same layout.
    """
    require_csrc()
    p = np.ascontiguousarray(access, dtype=np.float64)
    width = min(slots, len(p))
    caches = np.empty((devices, width), dtype=np.int64)
    layouts: dict[int, np.ndarray] = {}
    for group in peer_groups(devices, topology):
        size = len(group)
        if size not in layouts:
            layouts[size] = np.asarray(_C.place_features(p, size, slots, alpha))
        caches[group] = layouts[size]
    return caches


def predicted_costs(
    access: np.ndarray, caches: np.ndarray, groups: Sequence[Sequence[int]], alpha: float
) -> np.ndarray:
    """Each device's expected read cost per training node under the cost model
    (0 own cache, ``alpha`` peer, 1 host), with ``access`` scaled to reads per
    training node by the caller. Holds two bool[N] masks at a time."""
    num_nodes, devices = len(access), len(caches)
    costs = np.empty(devices, dtype=np.float64)
    for d in range(devices):
        local, peer = read_masks(caches, num_nodes, d, groups)
        costs[d] = access[~(local | peer)].sum() + alpha * access[peer].sum()
    return costs


@dataclass
class Placement:
    """A computed placement (see the module docstring)."""

    settings: PlacementSettings
    caches: np.ndarray  # int64[n, B]
    access: np.ndarray  # float64[N], the estimated f
    predicted_cost: list[float]
    num_train: int
    estimator_seconds: float
    placement_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """Estimator plus placement (and lookup tables) wall time."""
        return self.estimator_seconds + self.placement_seconds

    @property
    def groups(self) -> list[list[int]]:
        """The peer groups of the settings' topology."""
        return peer_groups(self.settings.devices, self.settings.topology)

    @property
    def dev_num(self) -> np.ndarray:
        """The dense ``int16[n, N]`` read-source table (:func:`lookup_tables`),
        built on each call: for simulations of small graphs."""
        return lookup_tables(self.caches, len(self.access), self.groups)[0]

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cached_ids, cached_rows)``, what the plan stores (:func:`sorted_tables`)."""
        return sorted_tables(self.caches)

    def metrics(self) -> dict[str, Any]:
        """Summary numbers: cache size, predicted cost, access shares per device."""
        devices, width = self.caches.shape
        total = float(self.access.sum()) or 1.0
        shares = []
        for d in range(devices):
            here, there = read_masks(self.caches, len(self.access), d, self.groups)
            local = float(self.access[here].sum()) / total
            peer = float(self.access[there].sum()) / total
            shares.append({"local": local, "peer": peer, "host": 1.0 - local - peer})
        distinct = int(len(np.unique(self.caches))) if self.caches.size else 0
        return {
            "devices": devices,
            "cache_nodes": width,
            "distinct_cached_nodes": distinct,
            "num_train_nodes": self.num_train,
            "alpha": self.settings.resolved_alpha,
            "predicted_cost": self.predicted_cost,
            "predicted_cost_max": max(self.predicted_cost),
            "predicted_shares": shares,
            "estimator_seconds": self.estimator_seconds,
            "placement_seconds": self.placement_seconds,
            "seconds": self.seconds,
        }


def cache_slots(settings: PlacementSettings, num_nodes: int, num_features: int) -> int:
    """Cache slots per device; raises :class:`PlanError` for a cache over the graph."""
    if settings.cache_nodes is not None:
        slots = int(settings.cache_nodes)
        if slots > num_nodes:
            raise PlanError("cache_nodes", f"{slots} exceeds the graph's {num_nodes} nodes")
        return slots
    if settings.cache_bytes is None:
        return int(round(settings.cache_fraction * num_nodes))
    if num_features < 1:
        raise PlanError("cache_bytes", "needs a graph with node features (use cache_nodes)")
    row = 4 * num_features
    if settings.cache_bytes > row * num_nodes:
        raise PlanError(
            "cache_bytes",
            f"{settings.cache_bytes} exceeds the graph's feature bytes ({row * num_nodes})",
        )
    return int(settings.cache_bytes // row)


def train_node_ids(graph: GraphDir, which: str) -> tuple[np.ndarray, str]:
    """``(ids, description)`` of the training nodes a plan is computed for:
    ``"split"`` (the train split), ``"all"``, or ``"auto"`` (the split when the
    graph has one, else every node). Raises :class:`PlanError` for a missing
    or empty split."""
    has_split = graph.has("train_idx")
    if which == "all" or (which == "auto" and not has_split):
        reason = "requested" if which == "all" else "the graph has no train split"
        return np.arange(graph.num_nodes, dtype=np.int64), f"all nodes ({reason})"
    if not has_split:
        raise PlanError(
            "train_nodes",
            f"'split': {graph.path} has no train split (use 'all' or 'auto')",
        )
    train = np.unique(np.asarray(graph.split("train"), dtype=np.int64))
    if len(train) == 0:
        raise PlanError("train_nodes", f"the train split of {graph.path} is empty (use 'all')")
    return train, "train split"


def compute_placement(
    indptr: np.ndarray,
    indices: np.ndarray,
    train: np.ndarray,
    settings: PlacementSettings,
    slots: int,
    num_threads: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Placement:
    """Estimate access frequencies and place caches (nothing written). The CSR
    may be memory-mapped: ``spmv`` streams it in blocks, and the placement holds
    O(N) vectors and the ``[n, B]`` caches, never an ``[n, N]`` table."""
    settings.validate()
    started = time.perf_counter()
    access = estimate_access(
        indptr,
        indices,
        train,
        settings.layers,
        settings.estimator,
        fanouts=settings.fanouts,
        presample_epochs=settings.presample_epochs,
        batch_size=settings.batch_size,
        seed=settings.seed,
        num_threads=num_threads,
        progress=progress,
    )
    estimated = time.perf_counter()
    alpha = settings.resolved_alpha
    caches = place_caches(access, settings.devices, slots, alpha, settings.topology)
    groups = peer_groups(settings.devices, settings.topology)
    num_train = len(np.unique(train))
    costs = predicted_costs(access / max(num_train, 1), caches, groups, alpha)
    placed = time.perf_counter()
    return Placement(
        settings,
        caches,
        access,
        [float(c) for c in costs],
        num_train,
        estimated - started,
        placed - estimated,
    )


def placement_stage_key(graph: GraphDir, settings: PlacementSettings) -> str:
    """Stage key of a placement: every setting and the graph manifest's sha256."""
    return stage_key(
        "placement", settings.key_settings(), {"graph": sha256_of(graph.path / MANIFEST_FILE)}
    )


def placement_dir(
    plans_root: str | os.PathLike[str], graph: GraphDir, settings: PlacementSettings
) -> Path:
    """Where the versioned pipeline keeps this plan:
    ``<plans_root>/<graph dir name>-placement-n<devices>-<stage key>``."""
    name = versioned_name(
        f"{graph.path.name}-placement-n{settings.devices}", placement_stage_key(graph, settings)
    )
    return Path(plans_root).absolute() / name


def plan_placement(
    graph_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    settings: PlacementSettings,
    *,
    reuse: bool = False,
    progress: Callable[[str], None] | None = None,
    num_threads: int = 0,
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
    memory_budget: int | None = None,
) -> PlanReport:
    """Compute a placement plan of the graph at ``graph_dir`` into ``out_dir``.

    Writes ``caches.npy`` (int64[n, B]: row ``i`` of device ``d``'s cache holds
    node ``caches[d, i]``), ``cached_ids.npy`` (int64[n, B], each row sorted)
    and ``cached_rows.npy`` (int32[n, B], their rows in the cache), and
    ``access.npy`` (float64[N], the estimated frequencies), with a manifest
    (settings, peer groups, metrics, the graph manifest's sha256, the stage
    key), atomically. The CSR is read memory-mapped. With ``reuse`` an
    ``out_dir`` already holding this plan (same stage key, same graph) is
    returned as is. With ``tracking`` the plan is one run (settings, metrics,
    the read-share chart). ``memory_budget`` (bytes): refuse, before any work,
    when the estimate (:func:`~gnncore.plan.memory.placement_memory_bytes`)
    exceeds it.

    Raises:
        PlanError: For a bad setting (naming it), a cache over the graph's
            size, ``train_nodes="split"`` on a graph without a train split, or
            a memory budget below the estimate.
    """
    settings.validate()
    graph = GraphDir.open(graph_dir)
    graph.check_structure()
    check_output_dir(out_dir, [graph.path])
    key = placement_stage_key(graph, settings)
    existing = reusable_plan(out_dir, key, graph) if reuse else None
    if existing is not None:
        if progress is not None:
            progress(f"{out_dir} already holds this placement (stage key {key}): reused")
        return PlanReport("placement", str(out_dir), existing.metrics, existing.settings, key, True)
    slots = cache_slots(settings, graph.num_nodes, graph.manifest.num_features)
    needed = placement_memory_bytes(graph.num_nodes, settings.devices, slots)
    what = f"placement of {graph.num_nodes} nodes ({settings.devices} devices x {slots} slots)"
    line = check_budget(what, needed, memory_budget)
    train, _ = train_node_ids(graph, settings.train_nodes)
    if progress is not None:
        progress(line)
        progress(
            f"estimating access frequencies ({settings.estimator}, L={settings.layers}, "
            f"{len(train)} training nodes)"
        )
    placement = compute_placement(
        graph.indptr, graph.indices, train, settings, slots, num_threads, progress
    )
    del train
    if progress is not None:
        progress(
            f"placed {slots} nodes on each of {settings.devices} devices in "
            f"{placement.seconds:.2f}s; writing {out_dir}"
        )
    metrics = {**placement.metrics(), **memory_metrics(needed, memory_budget)}
    cached_ids, cached_rows = placement.tables()
    write_plan_dir(
        out_dir,
        "placement",
        graph,
        {
            "caches": placement.caches,
            "access": placement.access,
            "cached_ids": cached_ids,
            "cached_rows": cached_rows,
        },
        {
            "settings": settings.key_settings(),
            "metrics": metrics,
            "stage_key": key,
            "peer_groups": placement.groups,
        },
    )
    report = PlanReport("placement", str(out_dir), metrics, settings.key_settings(), key)
    if tracking is not None:
        name = graph.manifest.name
        report.run_id = log_plan_run(
            tracking,
            f"{name}-placement-n{settings.devices}",
            {"dataset": name, "task": "placement", "stage_key": key, **(tags or {})},
            {**settings.key_settings(), "cache_slots": slots, "num_nodes": graph.num_nodes},
            metrics,
            {"read_shares.png": shares_chart(metrics)},
        )
    return report


def shares_chart(metrics: Mapping[str, Any]) -> bytes:
    """PNG: each device's predicted local / peer / host share of feature reads."""
    shares = metrics["predicted_shares"]
    return stacked_bars_png(
        {tier: [s[tier] for s in shares] for tier in ("local", "peer", "host")},
        f"placement: predicted read shares ({metrics['cache_nodes']} slots/device)",
        "device",
        "share of reads",
    )


@dataclass(frozen=True)
class PlacementPlan:
    """An opened placement plan directory, as training and simulators use it."""

    plan: PlanDir

    @classmethod
    def open(cls, path: str | os.PathLike[str], graph: GraphDir | None = None) -> PlacementPlan:
        return cls(PlanDir.open(path, graph, kind="placement"))

    @property
    def devices(self) -> int:
        return int(self.plan.array("caches").shape[0])

    @property
    def groups(self) -> list[list[int]]:
        """The peer groups (devices that read each other's caches)."""
        return [[int(d) for d in g] for g in self.plan.info["peer_groups"]]

    def caches(self) -> np.ndarray:
        return self.plan.array("caches")

    def cached_ids(self) -> np.ndarray:
        """int64[n, B]: each device's cached ids, ascending."""
        return self.plan.array("cached_ids")

    def cached_rows(self) -> np.ndarray:
        """int32[n, B]: the cache row of each ``cached_ids`` entry."""
        return self.plan.array("cached_rows")

    def access(self) -> np.ndarray:
        return self.plan.array("access")

    def resolve(self, device: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, row)`` of ``nodes`` for ``device`` (:func:`~gnncore.plan.lookup.resolve`)."""
        return resolve(
            device, nodes, self.cached_ids(), self.cached_rows(), group_of(device, self.groups)
        )

    def readable(self, device: int) -> np.ndarray:
        """The sorted ids ``device`` reads from a GPU cache (its own or a peer's)."""
        ids = self.cached_ids()
        return np.unique(np.concatenate([ids[e] for e in group_of(device, self.groups)]))

    def peer_ids(self, device: int) -> np.ndarray:
        """The sorted ids ``device`` reads from a peer's cache (not its own)."""
        own = np.asarray(self.cached_ids()[device])
        return np.setdiff1d(self.readable(device), own, assume_unique=True)


def placement_problems(
    plan: PlacementPlan, graph: GraphDir, budget: int | None = None
) -> list[str]:
    """What is wrong with ``plan`` as a placement of ``graph`` (empty: nothing).

    Checks that it was computed from ``graph`` as it is, that every cached id is
    a node of the graph and cached at most once per device, that no device
    caches more than ``budget`` nodes (default: the budget its recorded settings
    give on this graph, :func:`cache_slots`), that the peer groups are disjoint
    groups of the plan's devices, and that the sorted lookup tables point at
    the cached rows. Reads O(n · B), never O(N) per device.
    """
    try:
        plan.plan.check_graph(graph)
    except InputError as exc:
        return [str(exc)]
    problems = []
    caches = np.asarray(plan.caches())
    n = graph.num_nodes
    if budget is None:
        fields = {f.name for f in dataclasses.fields(PlacementSettings)}
        recorded = {k: v for k, v in plan.plan.settings.items() if k in fields}
        if isinstance(recorded.get("fanouts"), list):
            recorded["fanouts"] = tuple(recorded["fanouts"])
        try:
            budget = cache_slots(PlacementSettings(**recorded), n, graph.manifest.num_features)
        except (TypeError, PlanError) as exc:
            return [f"the plan's recorded settings give no cache budget: {exc}"]
    if caches.shape[1] > budget:
        problems.append(f"devices cache {caches.shape[1]} nodes, over the budget of {budget}")
    if caches.size and (caches.min() < 0 or caches.max() >= n):
        problems.append(f"a cached id is outside [0, {n})")
        return problems
    members = [d for g in plan.groups for d in g]
    if sorted(members) != list(range(plan.devices)):
        problems.append(f"peer groups {plan.groups} are not a partition of the devices")
    ids, rows = np.asarray(plan.cached_ids()), np.asarray(plan.cached_rows())
    if ids.shape != caches.shape or rows.shape != caches.shape:
        return [*problems, "the lookups do not match the caches: their shapes differ"]
    for d, row in enumerate(caches):
        if len(np.unique(row)) != len(row):
            problems.append(f"device {d} caches a node twice")
        if not (
            np.all(ids[d][1:] > ids[d][:-1])
            and np.all((rows[d] >= 0) & (rows[d] < len(row)))
            and np.array_equal(row[rows[d]], ids[d])
        ):
            problems.append(f"device {d}'s lookups do not match its cache")
    return problems
