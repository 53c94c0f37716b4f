"""The graph directory a bounded-memory run writes, whatever the width of its
ids: the node data first, the edges by the width's writer, then the topology,
the manifest's ``stats`` and the report (:func:`write_graph_dir`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnncore.io.bounded.budget import batch_rows
from gnncore.io.bounded.phases import Phases
from gnncore.io.canonical import plain
from gnncore.io.report import IngestReport
from gnncore.progress import stage
from gnncore.store.writer import GraphDirWriter, create_graph_dir
from gnncore.usage import peak_rss_bytes


@dataclass
class StreamJob:
    """What a bounded-memory write needs besides the edges: the arguments of
    :func:`gnncore.io.bounded.stream.write_edge_stream` (documented there)."""

    out_dir: str | os.PathLike[str]
    scratch: Path
    phases: Phases
    num_nodes: int
    directed: bool
    name: str
    seed: int
    budget: int
    fmt: str
    source: str | os.PathLike[str]
    before: Callable[[GraphDirWriter], None] | None = None
    details: Mapping[str, Any] | None = None
    started: float = field(default_factory=time.perf_counter)
    max_fan_in: int = 64
    before_phase: str = "write"
    before_beside: bool = False
    """Run ``before`` on a thread beside the edges (small node data, such as
    ``node_ids.parquet``, that would otherwise hold one core idle), not first."""

    def __post_init__(self) -> None:
        self.num_nodes = int(self.num_nodes)

    @property
    def rows(self) -> int:
        """Rows of an edge chunk / block under the budget."""
        return batch_rows(self.budget)


@dataclass(frozen=True)
class EdgeCounts:
    """What writing the edges found and wrote (the manifest's and report's counts)."""

    num_input: int
    loops: int
    num_canonical: int
    num_edges: int
    num_pairs: int
    shuffle_buckets: int = 0
    """0 for numpy's permutation of the seed, else the bucket shuffle's buckets."""

    @property
    def duplicates(self) -> int:
        return self.num_input - self.loops - self.num_canonical


def write_graph_dir(
    job: StreamJob, write_edges: Callable[[GraphDirWriter], EdgeCounts]
) -> IngestReport:
    """Create ``job.out_dir`` (atomically): the node data of ``job.before``, the
    edge files of ``write_edges(writer)``, the topology, ``stats`` and the manifest."""
    phases = job.phases
    with create_graph_dir(Path(job.out_dir).absolute(), job.name) as writer:
        if job.before is not None and not job.before_beside:
            stage("node data")
            phases.start(job.before_phase)
            job.before(writer)
            for file in writer.files:
                writer.hash_in_background(file)
        counts = _edges_beside(job, writer, write_edges)
        if counts.shuffle_buckets:
            writer.stats["shuffle_buckets"] = counts.shuffle_buckets
        writer.set_topology(
            job.num_nodes,
            num_edges=counts.num_edges,
            num_canonical_edges=counts.num_canonical,
            num_undirected_edges=counts.num_pairs,
            directed=job.directed,
            shuffle_seed=job.seed,
        )
        details = _record_stats(writer, job, counts)
        stage("checksums and manifest")
        phases.start("checksums")
    phases.stop()
    return IngestReport(
        format=job.fmt,
        source=str(job.source),
        out_dir=str(job.out_dir),
        num_nodes=job.num_nodes,
        num_input_edges=counts.num_input,
        self_loops_removed=counts.loops,
        duplicates_removed=counts.duplicates,
        num_canonical_edges=counts.num_canonical,
        num_edges=int(counts.num_edges),
        directed=job.directed,
        num_features=writer.num_features,
        num_classes=writer.num_classes,
        seconds=round(time.perf_counter() - job.started, 3),
        details=details,
        phases=phases.rounded(),
        peak_rss_bytes=peak_rss_bytes(),
        memory_budget=job.budget,
    )


def _edges_beside(
    job: StreamJob, writer: GraphDirWriter, write_edges: Callable[[GraphDirWriter], EdgeCounts]
) -> EdgeCounts:
    """``write_edges(writer)``, with ``job.before`` on a thread beside it when
    ``job.before_beside`` (its files are hashed by :meth:`GraphDirWriter.finish`);
    an error of either is raised once both are done."""
    if job.before is None or not job.before_beside:
        return write_edges(writer)
    stage("node data")  # started here (its time counts in the phases beside it)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnncore-node-data") as pool:
        node_data = pool.submit(job.before, writer)
        try:
            counts = write_edges(writer)
        finally:
            wait([node_data])  # nothing is written into the directory once it is removed
        node_data.result()
    return counts


def _record_stats(writer: GraphDirWriter, job: StreamJob, counts: EdgeCounts) -> dict[str, Any]:
    """Put the run's details and counts into the manifest's ``stats``; returns the details."""
    plain_details: dict[str, Any] = plain(dict(job.details or {}))
    writer.stats.update(plain_details)
    writer.stats.update(
        {
            "format": job.fmt,
            "source": str(Path(job.source).absolute()),
            "num_input_edges": counts.num_input,
            "self_loops_removed": counts.loops,
            "duplicates_removed": counts.duplicates,
        }
    )
    return plain_details
