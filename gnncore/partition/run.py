"""Run a partitioner end to end: graph directory in, partition directory out."""

from __future__ import annotations

import importlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.errors import InputError
from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.partition.hydra import DEFAULT_GROUP_SIZE
from gnncore.partition.metrics import PartitionMetrics
from gnncore.partition.postprocess_stream import DEFAULT_MEMORY_BUDGET, StreamBuffers
from gnncore.partition.store import PARTITION_FORMAT, PartitionDir
from gnncore.store import GraphDir
from gnncore.store.atomic import check_output_dir
from gnncore.store.graph_dir import SPLITS
from gnncore.store.manifest import MANIFEST_FILE, sha256_of
from gnncore.store.versioning import stage_key
from gnncore.tracking import RunTracker
from gnncore.usage import StageUsage, cost_metrics, peak_rss_bytes


@dataclass(frozen=True)
class MethodSettings:
    """Method-specific settings; each method reads the ones it understands.

    Args:
        chunk (float): GREM/greedy chunk size as a fraction of the edges.
        passes (int): GREM restreaming refinement passes (0: the thesis' GREM).
        seed_method (str, optional): GREM first-chunk seeding: metis, random,
            ldg or clusters (default: :func:`~gnncore.partition.grem.default_seed_method`:
            clusters with refinement passes, metis, the thesis' seed, without).
        hops (int): ByteGNN block radius.
        clusters (int, optional): GREM seed ``clusters``: target cluster size
            ``prefix nodes / clusters`` (default:
            :func:`~gnncore.partition.grem.default_clusters`).
        group_size (int): HyDRA: nodes per degree-balanced greedy group.
        workers (int): GREM/greedy bisections run at once, in spawned
            processes (1: serial, the memory bound of one chunk). Same labels;
            less time, more memory (reported RSS adds the workers' peaks).
        threads (int): KaMinPar's threads (1: deterministic for a seed; 0:
            every CPU this process may use).
    """

    chunk: float = 0.1
    passes: int = 3
    seed_method: str | None = None
    hops: int = 2
    clusters: int | None = None
    workers: int = 1
    group_size: int = DEFAULT_GROUP_SIZE
    threads: int = 1


# method -> (module, class, settings it takes, fixed keyword arguments)
_REGISTRY: dict[str, tuple[str, str, tuple[str, ...], dict[str, Any]]] = {
    "metis": ("gnncore.partition.metis", "MetisPartitioner", (), {"recursive": False}),
    "metis-recursive": ("gnncore.partition.metis", "MetisPartitioner", (), {"recursive": True}),
    "grem": (
        "gnncore.partition.grem",
        "GremPartitioner",
        ("chunk", "passes", "seed_method", "clusters", "workers"),
        {},
    ),
    "greedy": (
        "gnncore.partition.grem",
        "GremPartitioner",
        ("chunk", "seed_method", "workers"),
        {"refine": False, "passes": 0},
    ),
    "ldg": ("gnncore.partition.stream", "LdgPartitioner", (), {}),
    "fennel": ("gnncore.partition.stream", "FennelPartitioner", (), {}),
    "random": ("gnncore.partition.simple", "RandomPartitioner", (), {}),
    "range": ("gnncore.partition.simple", "RangePartitioner", (), {}),
    "bytegnn": ("gnncore.partition.bytegnn", "ByteGnnPartitioner", ("hops",), {}),
    "hydra": ("gnncore.partition.hydra", "HydraPartitioner", ("group_size",), {}),
    "kaminpar": ("gnncore.partition.kaminpar", "KaMinParPartitioner", ("threads",), {}),
}
METHODS = tuple(_REGISTRY)


def method_params(method: str, settings: MethodSettings) -> dict[str, Any]:
    """The settings ``method`` uses, by name (what reports and MLflow record).

    GREM's ``seed_method`` is resolved (``None`` becomes the default for its
    passes) and ``clusters`` is left out unless given.
    """
    params = {name: getattr(settings, name) for name in _registered(method)[2]}
    if "seed_method" in params and params["seed_method"] is None:
        from gnncore.partition.grem import default_seed_method

        fixed = _registered(method)[3]
        params["seed_method"] = default_seed_method(fixed.get("passes", settings.passes))
    if params.get("clusters", 0) is None:
        del params["clusters"]
    return params


def _registered(method: str) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    if method not in _REGISTRY:
        raise ValueError(
            f"unknown partitioning method {method!r}; choose from {', '.join(METHODS)}"
        )
    return _REGISTRY[method]


def make_partitioner(method: str, settings: MethodSettings | None = None) -> Partitioner:
    """The partitioner registered under ``method``, configured by ``settings``."""
    module, cls, _, fixed = _registered(method)
    factory = getattr(importlib.import_module(module), cls)
    return factory(**method_params(method, settings or MethodSettings()), **fixed)


@dataclass
class PartitionReport:
    """What ``gnncore partition`` reports (the CLI contract's JSON keys)."""

    method: str
    parts: int
    seed: int
    out_dir: str
    seconds: float
    peak_rss_bytes: int
    metrics: PartitionMetrics
    params: dict[str, Any]
    halo_sizes: list[int] = field(default_factory=list)
    balancing: dict[str, Any] | None = None
    run_id: str | None = None
    stage_key: str = ""
    reused: bool = False
    command_peak_rss_bytes: int | None = None
    postprocess_seconds: float | None = None
    #: seconds of ``partition`` (the method), ``split balancing`` and
    #: ``post-processing`` (metrics, relabelling, halos, writing)
    phases: dict[str, float] = field(default_factory=dict)
    #: bytes the command read from and wrote to storage (``/proc/self/io``)
    storage_read_bytes: int | None = None
    storage_written_bytes: int | None = None
    #: size of the partition directory written
    output_bytes: int | None = None

    @classmethod
    def from_dir(cls, partition: PartitionDir) -> PartitionReport:
        """The report a partition directory records (``reused=True``)."""
        info = partition.info
        names = _registered(partition.method)[2]
        return cls(
            partition.method,
            partition.parts,
            int(info["seed"]),
            str(partition.path),
            float(info["seconds"]),
            int(info["peak_rss_bytes"]),
            PartitionMetrics(**info["metrics"]),
            {name: info[name] for name in names if name in info},
            halo_sizes=list(info.get("halo_sizes", [])),
            balancing=info.get("split_balancing"),
            run_id=info.get("mlflow_run_id"),
            stage_key=str(info.get("stage_key", "")),
            reused=True,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parts": self.parts,
            "seed": self.seed,
            **self.params,
            "out_dir": self.out_dir,
            "edge_cut_fraction": self.metrics.edge_cut_fraction,
            "max_part_ratio": self.metrics.max_part_ratio,
            "split_balance": self.metrics.split_balance,
            "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "command_peak_rss_bytes": self.command_peak_rss_bytes,
            "postprocess_seconds": self.postprocess_seconds,
            "phases": self.phases,
            "storage_read_bytes": self.storage_read_bytes,
            "storage_written_bytes": self.storage_written_bytes,
            "output_bytes": self.output_bytes,
            "halo_sizes": self.halo_sizes,
            "split_balancing": self.balancing,
            "stage_key": self.stage_key,
            "reused": self.reused,
            **({"mlflow_run_id": self.run_id} if self.run_id else {}),
        }


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


def partition_graph(
    graph_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    method: str = "metis",
    parts: int = 2,
    seed: int = 0,
    imbalance: float = 0.03,
    settings: MethodSettings | None = None,
    balance: bool = True,
    split_tolerance: float = 0.10,
    tracking: RunTracker | None = None,
    tags: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    reuse: bool = False,
    memory_budget: int | None = None,
) -> PartitionReport:
    """Partition the graph at ``graph_dir`` into ``out_dir`` (written atomically).

    Args:
        graph_dir: A graph directory (see docs/FORMAT.md).
        out_dir: The partition directory to create or replace.
        method (str): A name from :data:`METHODS` (default: ``"metis"``).
        parts (int): Number of partitions (default: 2).
        seed (int): Random seed (default: 0).
        imbalance (float): Allowed excess of the largest part (default: 0.03).
        settings (MethodSettings, optional): Method-specific settings.
        balance (bool): When the graph has train/val/test splits, move nodes
            (least cut cost first) until every split's per-part count is within
            ``split_tolerance`` of its mean; the cut cost is reported.
            (default: ``True``)
        split_tolerance (float): Relative band for the split counts (0.10).
        tracking (RunTracker, optional): Log one run per partitioning (params:
            method, parts, seed, imbalance and the method's settings; metrics:
            cut, balance, seconds, peak RSS; a part-size chart). A failure
            marks the run failed.
        tags (Mapping, optional): Extra run tags (e.g. the Dagster run id).
        progress (callable, optional): Receives one line per stage (the
            method, each GREM bisection, split balancing, post-processing,
            writing): the CLI prints them, the Dagster assets log them.
        reuse (bool): When ``out_dir`` already holds this partitioning (same
            :func:`partition_stage_key`: method, settings, options and graph
            version), return its report (``reused=True``) without recomputing
            or logging a new run. (default: ``False``: recompute and replace)
        memory_budget (int, optional): Bytes the post-processing (split
            balancing, metrics, relabelling, halos: streaming passes over the
            edge file) may hold beyond its O(|V|) arrays: its edge chunk, halo
            bits and external sort
            (:class:`~gnncore.partition.postprocess_stream.StreamBuffers`).
            The method's own memory is its own (GREM's: ``settings.chunk``).
            Changes no output. (default: 128 MiB)

    The report's ``peak_rss_bytes`` is the method's peak (before the
    post-processing, recorded in the manifest); ``command_peak_rss_bytes``
    is this process's peak at the end, post-processing included.
    """
    buffers = StreamBuffers.of(DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    graph = GraphDir.open(graph_dir)
    graph.check_structure()
    settings = settings or MethodSettings()
    partitioner = make_partitioner(method, settings)
    params = method_params(method, settings)
    options = PartitionOptions(
        parts=parts,
        seed=seed,
        imbalance=imbalance,
        balance_splits=balance,
        split_tolerance=split_tolerance,
    )
    options.validate(graph.num_nodes)
    check_output_dir(out_dir, [graph.path], PARTITION_FORMAT, "partition")
    key = partition_stage_key(
        graph, method, parts, seed, imbalance, settings, balance, split_tolerance
    )
    existing = reusable_partition(out_dir, key, graph) if reuse else None
    if existing is not None:
        if progress is not None:
            progress(f"{out_dir} already holds this partitioning (stage key {key}): reused")
        return PartitionReport.from_dir(existing)
    partitioner.progress = progress
    if tracking is None:
        return _measured_partition(
            graph, out_dir, partitioner, method, options, params, key, buffers
        )
    name = graph.manifest.name
    run_tags = {"dataset": name, "task": "partition", "method": method, **(tags or {})}
    with tracking.start_run(f"{name}-{method}-p{parts}", run_tags) as run:
        run.log_params(
            {
                "method": method,
                "parts": parts,
                "seed": seed,
                "imbalance": imbalance,
                "num_nodes": graph.num_nodes,
                "num_edges": graph.manifest.num_undirected_edges,
                **params,
            }
        )
        report = _measured_partition(
            graph, out_dir, partitioner, method, options, params, key, buffers, run.run_id
        )
        m = report.metrics
        run.log_metrics(
            {
                "edge_cut_fraction": m.edge_cut_fraction,
                "max_part_ratio": m.max_part_ratio,
                "seconds": report.seconds,
                "peak_rss_bytes": float(report.peak_rss_bytes),
                "halo_nodes_max": float(max(report.halo_sizes, default=0)),
                **{f"split_balance_{k}": v for k, v in m.split_balance.items()},
                **(
                    {"balancing_cut_cost": float(report.balancing["cut_cost"])}
                    if report.balancing
                    else {}
                ),
                **cost_metrics(
                    report.phases,
                    output_bytes=report.output_bytes,
                    storage_read_bytes=report.storage_read_bytes,
                    storage_written_bytes=report.storage_written_bytes,
                ),
                **(
                    {"command_peak_rss_bytes": float(report.command_peak_rss_bytes)}
                    if report.command_peak_rss_bytes is not None
                    else {}
                ),
            }
        )
        _log_part_chart(run, report)
        report.run_id = run.run_id
    return report


def _measured_partition(*args: Any, **kwargs: Any) -> PartitionReport:
    """:func:`_partition` with the bytes it read and wrote, and its output's size."""
    with StageUsage() as usage:
        report = _partition(*args, **kwargs)
    usage.set_outputs([report.out_dir])
    report.storage_read_bytes = usage.storage_read_bytes
    report.storage_written_bytes = usage.storage_written_bytes
    report.output_bytes = usage.output_bytes
    return report


def _partition(
    graph: GraphDir,
    out_dir: str | os.PathLike[str],
    partitioner: Partitioner,
    method: str,
    options: PartitionOptions,
    params: dict[str, Any],
    key: str,
    buffers: StreamBuffers,
    run_id: str | None = None,
) -> PartitionReport:
    say = partitioner.progress or (lambda message: None)
    settings = "".join(f", {k}={v}" for k, v in params.items())
    say(
        f"{method}: {graph.num_nodes:,} nodes, "
        f"{graph.manifest.num_undirected_edges:,} undirected edges into {options.parts} "
        f"parts (seed={options.seed}{settings})"
    )
    start = time.perf_counter()
    assignment = np.asarray(partitioner.assign(graph, options), dtype=np.int64)
    seconds = time.perf_counter() - start
    # the method's own peak (with its worker processes'), before post-processing
    rss = peak_rss_bytes() + partitioner.helper_peak_rss_bytes
    say(f"{method}: assigned in {seconds:.2f} s, peak RSS {rss / 2**20:,.0f} MiB")
    balancing = None
    if options.balance_splits and any(graph.has(s) for s in SPLITS):
        from gnncore.partition.postprocess import balance_splits

        say(
            f"balancing train/val/test counts to within {options.split_tolerance:.0%} "
            "of their per-part mean"
        )
        started = time.perf_counter()
        balanced = balance_splits(
            graph,
            assignment,
            options.parts,
            tolerance=options.split_tolerance,
            imbalance=options.imbalance,
            chunk_rows=buffers.chunk_rows,
            tmp_dir=Path(out_dir).absolute().parent,
            sort_budget=buffers.sort_budget,
        )
        assignment = balanced.assignment
        balancing = {
            "tolerance": options.split_tolerance,
            "moved": balanced.moved,
            "cut_before": balanced.cut_before,
            "cut_after": balanced.cut_after,
            "cut_cost": balanced.cut_cost,
            "satisfied": balanced.satisfied,
            "seconds": time.perf_counter() - started,
        }
        say(
            f"balancing moved {balanced.moved:,} nodes (cut cost {balanced.cut_cost:+,} "
            f"edges){'' if balanced.satisfied else '; tolerance NOT reached'}"
        )
    from gnncore.partition.postprocess_stream import write_postprocessed

    say("metrics, relabelling and 1-hop halos (streaming passes over the edge file)")
    post_started = time.perf_counter()
    info = {
        "method": method,
        "parts": options.parts,
        "seed": options.seed,
        "imbalance": options.imbalance,
        **params,
        "seconds": seconds,
        "peak_rss_bytes": rss,
        "split_balancing": balancing,
        "stage_key": key,
        **({"mlflow_run_id": run_id} if run_id else {}),
    }
    written = write_postprocessed(
        out_dir,
        graph,
        assignment,
        options.parts,
        info,
        chunk_rows=buffers.chunk_rows,
        halo_budget=buffers.halo_budget,
    )
    metrics, halos = written.metrics, written.halo_sizes
    post_seconds = time.perf_counter() - post_started + (balancing or {}).get("seconds", 0.0)
    command_rss = peak_rss_bytes() + partitioner.helper_peak_rss_bytes
    say(
        f"wrote {out_dir}: edge cut {metrics.edge_cut_fraction:.2%}, "
        f"max part {metrics.max_part_ratio:.4f} x N/p; post-processing "
        f"{post_seconds:.2f} s ({written.edge_reads} reads of the edges), "
        f"peak RSS of the command {command_rss / 2**20:,.0f} MiB"
    )
    return PartitionReport(
        method,
        options.parts,
        options.seed,
        str(Path(out_dir)),
        seconds,
        rss,
        metrics,
        params,
        halo_sizes=halos,
        balancing=balancing,
        stage_key=key,
        command_peak_rss_bytes=command_rss,
        postprocess_seconds=post_seconds,
        phases={
            "partition": seconds,
            **({"split balancing": balancing["seconds"]} if balancing else {}),
            "post-processing": time.perf_counter() - post_started,
        },
    )


def part_size_chart(report: PartitionReport) -> bytes:
    """PNG bar chart of the part sizes against the balanced size N/p."""
    from gnncore.plots import bar_chart_png

    m = report.metrics
    return bar_chart_png(
        m.part_sizes,
        f"{report.method} p={report.parts}: nodes per part",
        "part",
        "nodes",
        reference=m.num_nodes / report.parts,
    )


def _log_part_chart(run: Any, report: PartitionReport) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part_sizes.png"
        path.write_bytes(part_size_chart(report))
        run.log_artifact(path)


__all__ = [
    "METHODS",
    "MethodSettings",
    "PartitionDir",
    "PartitionReport",
    "make_partitioner",
    "method_params",
    "partition_graph",
]
