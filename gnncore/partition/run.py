"""Partition a graph directory end to end, in one walk down the floors:
check the inputs and the output, fingerprint (the stage key; an existing
identical partition is reused), compute the assignment (the method, then the
split balancing), store the partition directory (post-processing streams the
edges once more), and record the run (MLflow) in one place at the end."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gnncore.heap import trim_heap
from gnncore.partition.base import Partitioner, PartitionOptions
from gnncore.partition.methods import METHODS, MethodSettings, make_partitioner, method_params
from gnncore.partition.postprocess import balance_splits
from gnncore.partition.postprocess_stream import (
    DEFAULT_MEMORY_BUDGET,
    MIN_MEMORY_BUDGET,
    StreamBuffers,
    write_postprocessed,
)
from gnncore.partition.report import PartitionReport, part_size_chart
from gnncore.partition.stage_key import partition_stage_key, reusable_partition
from gnncore.partition.store import PARTITION_FORMAT, PartitionDir
from gnncore.store import GraphDir
from gnncore.store.atomic import check_output_dir
from gnncore.store.graph_dir import SPLITS
from gnncore.tracking import RunTracker
from gnncore.usage import (
    StageUsage,
    cost_metrics,
    default_memory_budget,
    peak_rss_bytes,
    resolve_memory_budget,
)


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
    memory_budget: int | str | None = None,
    reported_budget: tuple[str, int | None] | None = None,
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
            Changes no output. ``"auto"``: a quarter of what this process may
            take, between 128 MiB and 1 GiB (:func:`postprocess_budget`).
            (default: 128 MiB)
        reported_budget (tuple, optional): The budget the report, its JSON and
            the MLflow run record as the one this ran under: the setting
            (``auto``, ``none`` or a size) and its bytes (``None``: unbounded).
            The Dagster asset passes the deployment's stage budget here.
            (default: ``memory_budget`` as given, ``none`` when omitted, and
            the post-processing's bytes)

    The report's ``peak_rss_bytes`` is the method's peak (before the
    post-processing, recorded in the manifest); ``command_peak_rss_bytes``
    is this process's peak at the end, post-processing included.
    """
    buffers_bytes = postprocess_budget(memory_budget)
    buffers = StreamBuffers.of(buffers_bytes)
    if reported_budget is None:
        setting = "none" if memory_budget is None else str(memory_budget)
        reported_budget = (setting, buffers_bytes)
    graph = GraphDir.open(graph_dir)
    graph.check_structure()
    trim_heap()  # the check's freed blocks (a 4M-entry block of each array)
    settings = settings or MethodSettings()
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
    partitioner = make_partitioner(method, settings)
    partitioner.progress = progress
    job = _Job(graph, Path(out_dir), partitioner, method, options, method_params(method, settings))
    if tracking is None:
        return _measured(job, key, buffers, reported_budget)
    name = graph.manifest.name
    run_tags = {"dataset": name, "task": "partition", "method": method, **(tags or {})}
    # the run opens first only for its id, which the partition's manifest records
    with tracking.start_run(f"{name}-{method}-p{parts}", run_tags) as run:
        report = _measured(job, key, buffers, reported_budget, run.run_id)
        record_partition(run, job, report)
    return report


#: The most ``"auto"`` gives the post-processing: past it, larger reads gain little.
AUTO_POSTPROCESS_CAP = 1 << 30


def postprocess_budget(memory_budget: int | str | None) -> int:
    """Bytes of the post-processing's buffers: ``None`` is 128 MiB, ``"auto"`` a
    quarter of the memory this process may take (cgroup limit included) between
    128 MiB and 1 GiB, a size string or int is taken as given."""
    if memory_budget is None:
        return DEFAULT_MEMORY_BUDGET
    if memory_budget == "auto":
        quarter = default_memory_budget(0.25)
        return max(DEFAULT_MEMORY_BUDGET, min(quarter, AUTO_POSTPROCESS_CAP))
    resolved = resolve_memory_budget(memory_budget)
    return DEFAULT_MEMORY_BUDGET if resolved is None else resolved


def postprocess_share(stage_budget: int) -> int:
    """The post-processing's buffers out of a whole stage's budget (the
    deployment's, :class:`resources.MemoryBudgetResource`): a quarter of it,
    between :data:`~gnncore.partition.postprocess_stream.MIN_MEMORY_BUDGET`
    and :data:`AUTO_POSTPROCESS_CAP` (the method and the O(|V|) arrays take the rest)."""
    return max(MIN_MEMORY_BUDGET, min(int(stage_budget) // 4, AUTO_POSTPROCESS_CAP))


@dataclass(frozen=True)
class _Job:
    """One partitioning: what goes in and where it goes."""

    graph: GraphDir
    out_dir: Path
    partitioner: Partitioner
    method: str
    options: PartitionOptions
    params: dict[str, Any]

    def say(self, message: str) -> None:
        if self.partitioner.progress is not None:
            self.partitioner.progress(message)


@dataclass(frozen=True)
class _Assignment:
    """The computed partition before it is stored: the labels, the method's
    seconds and peak RSS, and what split balancing did (``None``: not run)."""

    labels: np.ndarray
    seconds: float
    peak_rss_bytes: int
    balancing: dict[str, Any] | None


def _measured(
    job: _Job,
    key: str,
    buffers: StreamBuffers,
    budget: tuple[str, int | None],
    run_id: str | None = None,
) -> PartitionReport:
    """Compute, then store; the report carries the bytes read and written, the
    output's size and the budget (setting, bytes) it ran under."""
    with StageUsage() as usage:
        computed = compute_assignment(job, buffers)
        report = _store(job, computed, key, buffers, run_id)
    usage.set_outputs([report.out_dir])
    report.storage_read_bytes = usage.storage_read_bytes
    report.storage_written_bytes = usage.storage_written_bytes
    report.output_bytes = usage.output_bytes
    report.memory_budget, report.memory_budget_bytes = budget
    return report


def compute_assignment(job: _Job, buffers: StreamBuffers) -> _Assignment:
    """The method's labels, then (when the graph has splits and the options ask)
    the split balancing's; nothing is written but the balancing's scratch."""
    graph, options, method = job.graph, job.options, job.method
    settings = "".join(f", {k}={v}" for k, v in job.params.items())
    job.say(
        f"{method}: {graph.num_nodes:,} nodes, "
        f"{graph.manifest.num_undirected_edges:,} undirected edges into {options.parts} "
        f"parts (seed={options.seed}{settings})"
    )
    start = time.perf_counter()
    labels = np.asarray(job.partitioner.assign(graph, options), dtype=np.int64)
    seconds = time.perf_counter() - start
    trim_heap()  # what the method freed stays out of the post-processing's peak
    # the method's own peak (with its worker processes'), before post-processing
    rss = peak_rss_bytes() + job.partitioner.helper_peak_rss_bytes
    job.say(f"{method}: assigned in {seconds:.2f} s, peak RSS {rss / 2**20:,.0f} MiB")
    if not (options.balance_splits and any(graph.has(s) for s in SPLITS)):
        return _Assignment(labels, seconds, rss, None)
    job.say(
        f"balancing train/val/test counts to within {options.split_tolerance:.0%} "
        "of their per-part mean"
    )
    started = time.perf_counter()
    balanced = balance_splits(
        graph,
        labels,
        options.parts,
        tolerance=options.split_tolerance,
        imbalance=options.imbalance,
        chunk_rows=buffers.chunk_rows,
        tmp_dir=job.out_dir.absolute().parent,
        sort_budget=buffers.sort_budget,
    )
    trim_heap()
    balancing = {
        "tolerance": options.split_tolerance,
        "moved": balanced.moved,
        "cut_before": balanced.cut_before,
        "cut_after": balanced.cut_after,
        "cut_cost": balanced.cut_cost,
        "satisfied": balanced.satisfied,
        "seconds": time.perf_counter() - started,
    }
    job.say(
        f"balancing moved {balanced.moved:,} nodes (cut cost {balanced.cut_cost:+,} "
        f"edges){'' if balanced.satisfied else '; tolerance NOT reached'}"
    )
    return _Assignment(balanced.assignment, seconds, rss, balancing)


def _store(
    job: _Job, computed: _Assignment, key: str, buffers: StreamBuffers, run_id: str | None
) -> PartitionReport:
    """Write the partition directory (metrics, relabelling and halos in streaming
    passes over the edge file) and say what it holds."""
    options, balancing = job.options, computed.balancing
    job.say("metrics, relabelling and 1-hop halos (streaming passes over the edge file)")
    started = time.perf_counter()
    info = {
        "method": job.method,
        "parts": options.parts,
        "seed": options.seed,
        "imbalance": options.imbalance,
        **job.params,
        "seconds": computed.seconds,
        "peak_rss_bytes": computed.peak_rss_bytes,
        "split_balancing": balancing,
        "stage_key": key,
        **({"mlflow_run_id": run_id} if run_id else {}),
    }
    written = write_postprocessed(
        job.out_dir,
        job.graph,
        computed.labels,
        options.parts,
        info,
        chunk_rows=buffers.chunk_rows,
        halo_budget=buffers.halo_budget,
    )
    metrics = written.metrics
    post_seconds = time.perf_counter() - started + (balancing or {}).get("seconds", 0.0)
    command_rss = peak_rss_bytes() + job.partitioner.helper_peak_rss_bytes
    job.say(
        f"wrote {job.out_dir}: edge cut {metrics.edge_cut_fraction:.2%}, "
        f"max part {metrics.max_part_ratio:.4f} x N/p; post-processing "
        f"{post_seconds:.2f} s ({written.edge_reads} reads of the edges), "
        f"peak RSS of the command {command_rss / 2**20:,.0f} MiB"
    )
    return PartitionReport(
        job.method,
        options.parts,
        options.seed,
        str(job.out_dir),
        computed.seconds,
        computed.peak_rss_bytes,
        metrics,
        job.params,
        halo_sizes=written.halo_sizes,
        balancing=balancing,
        stage_key=key,
        command_peak_rss_bytes=command_rss,
        postprocess_seconds=post_seconds,
        phases={
            "partition": computed.seconds,
            **({"split balancing": balancing["seconds"]} if balancing else {}),
            "post-processing": time.perf_counter() - started,
        },
        run_id=run_id,
    )


def record_partition(run: Any, job: _Job, report: PartitionReport) -> None:
    """Everything a tracked partitioning logs, in one place: the params (method,
    options, graph size, the method's settings), the metrics (cut, balance,
    seconds, peak RSS, costs, ``memory_budget_bytes`` and ``peak_rss_of_budget``
    when it ran under a budget; the ``memory_budget`` setting as a param) and the
    part-size chart."""
    graph, options, m = job.graph, job.options, report.metrics
    run.log_params(
        {
            "method": job.method,
            "parts": options.parts,
            "seed": options.seed,
            "imbalance": options.imbalance,
            "num_nodes": graph.num_nodes,
            "num_edges": graph.manifest.num_undirected_edges,
            **job.params,
        }
    )
    metrics = {
        "edge_cut_fraction": m.edge_cut_fraction,
        "max_part_ratio": m.max_part_ratio,
        "seconds": report.seconds,
        "peak_rss_bytes": float(report.peak_rss_bytes),
        "halo_nodes_max": float(max(report.halo_sizes, default=0)),
        **{f"split_balance_{k}": v for k, v in m.split_balance.items()},
        **cost_metrics(
            report.phases,
            output_bytes=report.output_bytes,
            storage_read_bytes=report.storage_read_bytes,
            storage_written_bytes=report.storage_written_bytes,
        ),
    }
    if report.balancing:
        metrics["balancing_cut_cost"] = float(report.balancing["cut_cost"])
    if report.command_peak_rss_bytes is not None:
        metrics["command_peak_rss_bytes"] = float(report.command_peak_rss_bytes)
    budget = report.budget_figures()
    if "memory_budget" in budget:
        run.log_params({"memory_budget": budget.pop("memory_budget")})
    metrics.update({name: float(value) for name, value in budget.items()})
    run.log_metrics(metrics)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part_sizes.png"
        path.write_bytes(part_size_chart(report))
        run.log_artifact(path)


__all__ = [
    "METHODS",
    "MethodSettings",
    "PartitionDir",
    "PartitionReport",
    "compute_assignment",
    "make_partitioner",
    "method_params",
    "part_size_chart",
    "partition_graph",
    "partition_stage_key",
    "postprocess_budget",
    "record_partition",
    "reusable_partition",
]
