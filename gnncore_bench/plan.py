"""The plans' simulator tables: feature placement against partition layouts, HDR by rate.

Two benchmarks replay the project's sampler (:mod:`gnncore.plan.simulate`)
and report what the papers report, without several GPUs:

* :func:`bench_placement` -- Song & Jiang: the feature placement
  (:func:`~gnncore.plan.placement.compute_placement`, topology ``"all"``)
  against caches laid out by a random and a METIS partition of the same
  capacity. Read shares (local / peer / host), the largest per-device host
  reads, the cost model and the preprocessing time (placement with its
  estimator against METIS), as the paper's loading-time and preprocessing
  tables.
* :func:`gnncore_bench.plan_replication.bench_replication` -- HyDRA: neighbour ids
  crossing partitions under
  DSP-style sampling, whole-list memory sharing, HDR and HDR with threshold
  pruning for a range of replication rates over a METIS partition (with the
  memory each rate costs), and Table II's whole-list / DSP for range, random
  and METIS partitions.

Both return a JSON-ready dict with a ``markdown`` entry and, given
``out_dir``, write ``plans_placement.json`` / ``.md`` (resp.
``plans_replication.*``) there.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.partition.base import PartitionOptions
from gnncore.partition.metrics import partition_metrics
from gnncore.partition.run import make_partitioner
from gnncore.partition.simple import random_assignment
from gnncore.plan.placement import PlacementSettings, compute_placement, train_node_ids
from gnncore.plan.simulate import (
    FeatureReadCounts,
    dev_num_from_caches,
    simulate_feature_reads,
)
from gnncore.sampler import build_sampler
from gnncore.store import GraphDir

#: The peer-read cost every placement table also reports (NVLink pairs in the paper).
REFERENCE_ALPHA = 0.2
#: Layouts of :func:`bench_placement`, in table order (``metis`` rows only with METIS;
#: the ``own cache`` rows read no peer's cache, as PaGraph-style systems run).
LAYOUTS = (
    "placement",
    "random",
    "metis",
    "random, own cache only",
    "metis, own cache only",
)


def machine_info() -> dict[str, Any]:
    """Platform, CPU counts, memory, load and thread settings of this run."""
    memory_mib = None
    try:
        with open("/proc/meminfo") as fh:
            memory_mib = int(fh.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)),
        "memory_mib": memory_mib,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average_1min": os.getloadavg()[0],
    }


def graph_info(graph: GraphDir) -> dict[str, Any]:
    m = graph.manifest
    return {
        "path": str(graph.path),
        "name": m.name,
        "num_nodes": m.num_nodes,
        "num_edges": m.num_edges,
        "num_undirected_edges": m.num_undirected_edges,
        "directed": m.directed,
    }


def adjacency(graph: GraphDir) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.ascontiguousarray(graph.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(graph.indices)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    return indptr, indices


def timed_metis(graph: GraphDir, parts: int, seed: int) -> tuple[np.ndarray, float]:
    """METIS k-way labels (``make_partitioner("metis")``) and the seconds ``assign`` took."""
    partitioner = make_partitioner("metis")
    started = time.perf_counter()
    labels = partitioner.assign(graph, PartitionOptions(parts=parts, seed=seed))
    seconds = time.perf_counter() - started
    return np.asarray(labels, dtype=np.int64), seconds


def part_caches(labels: np.ndarray, parts: int, access: np.ndarray, slots: int) -> list[np.ndarray]:
    """Each part's ``slots`` nodes of highest ``access`` (ties: smaller id): the cache
    a partition-based system gives the device training that part."""
    order = np.argsort(-np.asarray(access, dtype=np.float64), kind="stable")
    ranked_labels = labels[order]
    return [order[ranked_labels == d][:slots].astype(np.int64) for d in range(parts)]


def write_result(out_dir: str | os.PathLike[str] | None, stem: str, result: dict[str, Any]) -> None:
    if out_dir is None:
        return
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    body = {k: v for k, v in result.items() if k != "markdown"}
    (out / f"{stem}.json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    (out / f"{stem}.md").write_text(result["markdown"])


def seconds_text(value: float) -> str:
    """Seconds to three significant digits (milliseconds stay readable)."""
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def ratio(num: float, den: float) -> float:
    return num / den if den else math.inf if num else math.nan


# Feature placement -----------------------------------------------------------


def _layout_row(
    name: str, counts: FeatureReadCounts, alpha: float, caches: Sequence[np.ndarray]
) -> dict[str, Any]:
    totals = counts.totals
    shares = counts.shares
    return {
        "layout": name,
        **totals,
        "local_share": shares["local"],
        "peer_share": shares["peer"],
        "host_share": shares["host"],
        "host_max_device": int(counts.host.max()),
        "batches_per_device": counts.batches.tolist(),
        "host_per_device": counts.host.tolist(),
        "cached_per_device": [int(len(c)) for c in caches],
        "distinct_cached_nodes": int(len(np.unique(np.concatenate(list(caches))))),
        "cost_reference_alpha": counts.cost(REFERENCE_ALPHA),
        "cost_alpha": counts.cost(alpha),
    }


def placement_markdown(result: dict[str, Any]) -> str:
    """The tables of :func:`bench_placement`."""
    g, s = result["graph"], result["settings"]
    alpha = s["alpha"]
    rows = result["layouts"]
    base = next(r for r in rows if r["layout"] == "placement")
    lines = [
        f"Feature placement against partition layouts: {g['name']} ({g['num_nodes']:,} nodes, "
        f"{g['num_edges']:,} stored edges, {g['num_undirected_edges']:,} undirected), "
        f"{s['devices']} devices caching {s['cache_nodes']:,} nodes each "
        f"({s['cache_fraction']:g} of the nodes), all peer-connected; training nodes: "
        f"{result['train_nodes']} ({result['num_train']:,}); {s['sampler']} sampler, fanouts "
        f"{','.join(map(str, s['fanouts']))}, batch {s['batch_size']}, {s['epochs']} epoch(s), "
        f"seed {s['seed']}; estimator {s['estimator']}, alpha {alpha:g}. The placement "
        "trains data parallel; a partition layout's device d caches the nodes of part d "
        "with the highest estimated access (the placement's estimate) and trains on part "
        "d's training nodes; 'own cache only' rows read no peer's cache.",
        "",
        f"| layout | local | peer | host | local % | peer % | host % | max host / device "
        f"| cost α={REFERENCE_ALPHA:g} | cost α={alpha:g} | host / placement's |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['layout']} | {r['local']:,} | {r['peer']:,} | {r['host']:,} "
            f"| {100 * r['local_share']:.2f} | {100 * r['peer_share']:.2f} "
            f"| {100 * r['host_share']:.2f} | {r['host_max_device']:,} "
            f"| {r['cost_reference_alpha']:,.0f} | {r['cost_alpha']:,.0f} "
            f"| {ratio(r['host'], base['host']):.3f} |"
        )
    t = result["times"]
    lines += [
        "",
        "| preprocessing | seconds |",
        "|---|---:|",
        f"| placement (estimator + placement + lookups), median of {len(t['placement_runs'])} "
        f"| {seconds_text(t['placement_seconds'])} |",
        f"| … of which the estimator | {seconds_text(t['estimator_seconds'])} |",
        f"| random partition | {seconds_text(t['random_seconds'])} |",
    ]
    if t.get("metis_seconds") is not None:
        lines.append(f"| METIS partition (one run) | {seconds_text(t['metis_seconds'])} |")
    r = result["ratios"]
    summary = [
        f"host({name}) / host(placement) = {r[f'host_{name}_over_placement']:.3f} "
        f"(host share: {r[f'host_share_{name}_over_placement']:.3f})"
        for name in ("random", "metis")
        if r.get(f"host_{name}_over_placement") is not None
    ]
    if r.get("metis_over_placement_seconds") is not None:
        summary.append(
            f"METIS seconds / placement seconds = {r['metis_over_placement_seconds']:.1f}"
        )
    lines += ["", "; ".join(summary) + ".", ""]
    return "\n".join(lines)


def bench_placement(
    graph_dir: str | os.PathLike[str],
    devices: int = 4,
    cache_fraction: float = 0.1,
    fanouts: Sequence[int] = (10, 5),
    batch_size: int = 1024,
    epochs: int = 1,
    seed: int = 0,
    sampler: str = "dense",
    alpha: float = 0.0,
    estimator: str = "spmv",
    metis: bool = True,
    repeats: int = 3,
    own_cache_rows: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Simulated feature reads of the placement against random and METIS partition layouts.

    Training nodes: the graph's train split, else every node. Each device
    caches ``B = round(cache_fraction · N)`` nodes:

    * ``placement`` -- :func:`~gnncore.plan.placement.compute_placement`
      (topology ``"all"``, ``alpha``, ``layers = len(fanouts)``, the
      ``estimator``); training is data parallel (batches round-robin).
      Timed ``repeats`` times (estimator included), the median reported.
    * ``random`` / ``metis`` -- a random / METIS (``make_partitioner("metis")``,
      ``assign`` timed once) partition into ``devices`` parts; device ``d``
      caches the ``B`` nodes of part ``d`` with the highest access estimate
      (the placement's own ``access``, so the ranking is not worse) and trains
      on part ``d``'s training nodes.

    Every device reads every other's cache. The three layouts replay the same
    sampler with the same ``seed`` (:func:`simulate_feature_reads`); the
    ``presample`` estimator samples with ``seed + 1``, so it never counts the
    simulated batches themselves. With ``own_cache_rows`` the partition
    layouts are replayed once more with no peer reads (each device reads only
    its own cache, as PaGraph-style partition caches do): rows ``"random, own
    cache only"`` and ``"metis, own cache only"``.

    Ratios: ``host_<layout>_over_placement`` (host reads),
    ``host_share_<layout>_over_placement`` (host share of all reads) and
    ``metis_over_placement_seconds``.

    Raises:
        ValueError: For bad counts, fractions or names.
    """
    _check_placement(devices, repeats, cache_fraction)
    fanouts = tuple(int(f) for f in fanouts)
    graph = GraphDir.open(graph_dir)
    num_nodes = graph.num_nodes
    if devices > max(num_nodes, 1):
        raise ValueError(f"cannot split {num_nodes} nodes over {devices} devices")
    indptr, indices = adjacency(graph)
    train, train_text = train_node_ids(graph, "auto")
    slots = int(round(cache_fraction * num_nodes))
    settings = _placement_settings(
        devices, slots, alpha, fanouts, estimator, train_text, batch_size, seed
    )
    load_before = os.getloadavg()[0]
    placement, runs = _timed_placements(indptr, indices, train, settings, slots, repeats)

    partitions, random_seconds, metis_seconds = _partitions(graph, devices, seed, metis)

    node_sampler = build_sampler(sampler, (indptr, indices), list(fanouts), seed=seed)
    sim: dict[str, Any] = {"batch_size": batch_size, "epochs": epochs, "seed": seed}

    def replay(dev_num: np.ndarray, owner: np.ndarray | None = None) -> FeatureReadCounts:
        """Every layout replays the same batches: the sampler, training nodes and seed."""
        return simulate_feature_reads(node_sampler, train, dev_num, owner=owner, **sim)

    layouts = [_layout_row("placement", replay(placement.dev_num), alpha, list(placement.caches))]
    partition_rows, partition_info = _partition_layouts(
        graph, devices, partitions, placement.access, slots, train, replay, alpha, own_cache_rows
    )
    layouts += partition_rows
    placement_seconds = statistics.median(r["seconds"] for r in runs)
    result: dict[str, Any] = {
        "benchmark": "plans_placement",
        "graph": graph_info(graph),
        "train_nodes": train_text,
        "num_train": int(len(train)),
        "settings": {
            "devices": devices,
            "cache_fraction": cache_fraction,
            "cache_nodes": slots,
            "fanouts": list(fanouts),
            "batch_size": batch_size,
            "epochs": epochs,
            "seed": seed,
            "sampler": sampler,
            "alpha": float(alpha),
            "reference_alpha": REFERENCE_ALPHA,
            "estimator": estimator,
            "topology": "all",
            "metis": metis,
            "repeats": repeats,
            "estimator_seed": seed + 1,
        },
        "layouts": layouts,
        "partitions": partition_info,
        "placement_metrics": {
            k: v
            for k, v in placement.metrics().items()
            if k in ("cache_nodes", "distinct_cached_nodes", "predicted_cost_max")
        },
        "times": {
            "placement_runs": runs,
            "placement_seconds": placement_seconds,
            "estimator_seconds": statistics.median(r["estimator_seconds"] for r in runs),
            "random_seconds": random_seconds,
            "metis_seconds": metis_seconds,
        },
        "ratios": _placement_ratios(layouts, metis_seconds, placement_seconds),
        "machine": {**machine_info(), "load_average_1min_before": load_before},
    }
    result["markdown"] = placement_markdown(result)
    write_result(out_dir, "plans_placement", result)
    return result


def _placement_settings(
    devices: int,
    slots: int,
    alpha: float,
    fanouts: tuple[int, ...],
    estimator: str,
    train_text: str,
    batch_size: int,
    seed: int,
) -> PlacementSettings:
    """The placement's settings: topology ``"all"``, one layer per fanout."""
    settings = PlacementSettings(
        devices=devices,
        cache_nodes=slots,
        alpha=alpha,
        topology="all",
        layers=len(fanouts),
        estimator=estimator,  # type: ignore[arg-type]
        train_nodes="split" if train_text == "train split" else "all",
        fanouts=fanouts,
        batch_size=batch_size,
        # presample's batches must not be the simulated ones (it would count the very
        # reads it is scored on): it samples with the next seed
        seed=seed + 1,
    )
    settings.validate()
    return settings


def _partitions(
    graph: GraphDir, devices: int, seed: int, metis: bool
) -> tuple[dict[str, np.ndarray], float, float | None]:
    """The random (and, with ``metis``, METIS) labels, and the seconds each took."""
    started = time.perf_counter()
    random_labels = random_assignment(graph.num_nodes, devices, seed)
    random_seconds = time.perf_counter() - started
    partitions = {"random": random_labels}
    metis_seconds = None
    if metis:
        partitions["metis"], metis_seconds = timed_metis(graph, devices, seed)
    return partitions, random_seconds, metis_seconds


def _check_placement(devices: int, repeats: int, cache_fraction: float) -> None:
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not 0.0 <= cache_fraction <= 1.0:
        raise ValueError(f"cache_fraction must be in [0, 1], got {cache_fraction}")


def _timed_placements(
    indptr: np.ndarray,
    indices: np.ndarray,
    train: np.ndarray,
    settings: PlacementSettings,
    slots: int,
    repeats: int,
) -> tuple[Any, list[dict[str, float]]]:
    """The placement computed ``repeats`` times: the last one and each run's seconds."""
    runs = []
    placement = None
    for _ in range(repeats):
        placement = compute_placement(indptr, indices, train, settings, slots)
        runs.append(
            {
                "seconds": placement.seconds,
                "estimator_seconds": placement.estimator_seconds,
                "placement_seconds": placement.placement_seconds,
            }
        )
    assert placement is not None
    return placement, runs


def _partition_layouts(
    graph: GraphDir,
    devices: int,
    partitions: dict[str, np.ndarray],
    access: np.ndarray,
    slots: int,
    train: np.ndarray,
    replay: Callable[..., FeatureReadCounts],
    alpha: float,
    own_cache_rows: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The partition layouts' rows (the ``own cache only`` ones last) and each
    partition's cut, balance and training nodes per part."""
    num_nodes = graph.num_nodes
    rows, own_rows = [], []
    partition_info: dict[str, Any] = {}
    alone = [[d] for d in range(devices)]
    for name, labels in partitions.items():
        caches = part_caches(labels, devices, access, slots)
        dev_num = dev_num_from_caches(caches, num_nodes)
        counts = replay(dev_num, owner=labels)
        rows.append(_layout_row(name, counts, alpha, caches))
        if own_cache_rows:
            dev_num = dev_num_from_caches(caches, num_nodes, alone)
            counts = replay(dev_num, owner=labels)
            own_rows.append(_layout_row(f"{name}, own cache only", counts, alpha, caches))
        metrics = partition_metrics(graph, labels, devices)
        partition_info[name] = {
            "edge_cut_fraction": metrics.edge_cut_fraction,
            "max_part_ratio": metrics.max_part_ratio,
            "part_sizes": metrics.part_sizes,
            "train_per_part": np.bincount(labels[train], minlength=devices).tolist(),
        }
    return rows + own_rows, partition_info


def _placement_ratios(
    layouts: list[dict[str, Any]], metis_seconds: float | None, placement_seconds: float
) -> dict[str, Any]:
    """Host reads and host shares of each partition layout over the placement's,
    and METIS's seconds over the placement's."""
    host = {r["layout"]: r["host"] for r in layouts}
    share = {r["layout"]: r["host_share"] for r in layouts}
    ratios: dict[str, Any] = {
        "metis_over_placement_seconds": (
            ratio(metis_seconds, placement_seconds) if metis_seconds is not None else None
        ),
    }
    for name in ("random", "metis"):
        for suffix, key in (("", name), ("_own_cache", f"{name}, own cache only")):
            ratios[f"host_{name}{suffix}_over_placement"] = (
                ratio(host[key], host["placement"]) if key in host else None
            )
            ratios[f"host_share_{name}{suffix}_over_placement"] = (
                ratio(share[key], share["placement"]) if key in share else None
            )
    return ratios


__all__ = [
    "LAYOUTS",
    "REFERENCE_ALPHA",
    "adjacency",
    "bench_placement",
    "graph_info",
    "machine_info",
    "part_caches",
    "placement_markdown",
    "ratio",
    "seconds_text",
    "timed_metis",
    "write_result",
]
